"""The env's ``info`` values a run records per episode (``env.info_keys``, ``--log-info``): ``info["is_success"]``.

:class:`InfoReader` is a TorchRL info reader (``GymWrapper.set_info_dict_reader``): each step's (and reset's)
``info[key]`` of every env copy goes to ``("info", key)`` in the step's TensorDict, a float32 per copy, NaN where a
copy did not report it (Gymnasium's vector infos: ``info[key]`` with its ``info["_" + key]`` mask). The training
loop records an episode's value as the one at its last step (what Stable-Baselines3's ``Monitor`` and RL Zoo log as
``is_success``), and an iteration's as the mean over its episodes that reported one.

``is_success`` is watched unasked (:data:`UNASKED`) in every Gymnasium env's step: it is recorded from the first
iteration where the env reported it (as Stable-Baselines3 logs ``success_rate`` once its envs report
``is_success``), and nothing is added for an env that never does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Composite, Unbounded
from torchrl.envs.gym_like import BaseInfoDictReader

INFO = "info"
"""The sub-TensorDict holding the recorded info values."""

UNASKED = ("is_success",)
"""Info entries every Gymnasium env's step is read for without ``env.info_keys`` naming them: recorded where the env
reports them (Gymnasium-Robotics, panda-gym, highway-env's parking and the goal envs of Stable-Baselines3's HER
report ``is_success``)."""


def watched(info_keys: Sequence[str]) -> tuple[str, ...]:
    """The info entries a Gymnasium env's step is read for: ``info_keys`` (``env.info_keys``), then :data:`UNASKED`."""
    return tuple(dict.fromkeys((*info_keys, *UNASKED)))


def info_values(info_dict: dict[str, Any], keys: Sequence[str], copies: int,
                asked: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """``info_dict[key]`` for each of ``keys``: float32 ``[copies]``, NaN where a copy did not report it (Gymnasium's
    vector infos: ``info[key]`` with its ``info["_" + key]`` mask; a plain env's info: its one value). A key not in
    ``asked`` (default: all are; :data:`UNASKED` ones are not) that is not one number per copy reads NaN: an env's own
    ``is_success`` of another kind (a tuple per vehicle, say) is left unrecorded, never an error.

    Raises:
        ValueError: an asked-for info value that is not a number (naming the key and what it holds).
    """
    values = {}
    for key in keys:
        out = np.full(copies, np.nan, dtype=np.float32)
        raw = _numbers(info_dict, key, copies, strict=asked is None or key in asked) if key in info_dict else None
        if raw is not None:
            reported = np.asarray(info_dict.get(f"_{key}", np.ones(raw.shape, bool)), dtype=bool).reshape(-1)
            if raw.size == 1 and copies > 1:  # a plain (non-vector) info: every copy's
                raw, reported = np.full(copies, raw[0]), np.full(copies, bool(reported[0]))
            out[reported] = raw[reported]
        values[key] = torch.from_numpy(out)
    return values


def _numbers(info_dict: dict[str, Any], key: str, copies: int, strict: bool) -> np.ndarray | None:
    """``info_dict[key]`` as one number, or one per copy; else an error naming it (``strict``) or None."""
    try:
        raw = np.asarray(info_dict[key], dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        if not strict:
            return None
        raise ValueError(f"env.info_keys: info[{key!r}] is {info_dict[key]!r}, not a number ppo_td can record per "
                         "episode; drop it from env.info_keys (--log-info)") from err
    if raw.size in (1, copies):
        return raw
    if not strict:
        return None
    raise ValueError(f"env.info_keys: info[{key!r}] holds {raw.size} numbers for {copies} env copies; ppo_td records "
                     "one number per episode: drop it from env.info_keys")


class InfoReader(BaseInfoDictReader):
    """``info[key]`` for each of ``keys`` into ``("info", key)``: float32 ``[copies]``, NaN where not reported
    (:func:`info_values`; ``asked``: the keys ``env.info_keys`` names, the others recorded only where they are numbers).

    Raises (when called):
        ValueError: an asked-for info value that is not a number (naming the key and what it holds).
    """

    def __init__(self, keys: Sequence[str], copies: int, asked: Sequence[str] | None = None) -> None:
        self.keys, self.copies, self.asked = tuple(keys), copies, None if asked is None else tuple(asked)
        entries = {key: Unbounded((copies,), dtype=torch.float32) for key in self.keys}
        self._spec = Composite({INFO: Composite(entries, shape=(copies,))}, shape=(copies,))

    @classmethod
    def for_env(cls, info_keys: Sequence[str], copies: int) -> InfoReader:
        """The reader of a Gymnasium env's step: the keys ``env.info_keys`` asks for, then :data:`UNASKED`."""
        return cls(watched(info_keys), copies, asked=info_keys)

    @property
    def info_spec(self) -> Composite:
        return self._spec

    def __call__(self, info_dict: dict[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        values = info_values(info_dict, self.keys, self.copies, self.asked)
        tensordict.set(INFO, TensorDict(values, batch_size=tensordict.batch_size))
        return tensordict


def episode_infos(batch: TensorDictBase, done: torch.Tensor, keys: Sequence[str]) -> dict[str, list[float]]:
    """Each key's value at the last step of every episode that ended in ``batch`` (``done`` its ``[env, time]``
    flags), in the order the ended episodes' returns are read (NaN where not reported)."""
    out = {}
    for key in keys:
        value = batch.get(("next", INFO, key), None)
        out[key] = [float("nan")] * int(done.sum()) if value is None else value[done].flatten().tolist()
    return out


def recorded(batch: TensorDictBase, info_keys: Sequence[str]) -> tuple[str, ...]:
    """The info entries ``batch``'s episodes are recorded with: ``info_keys`` (``env.info_keys``, asked for), then
    each of :data:`UNASKED` the env reported at any step of ``batch``."""
    seen = []
    for key in UNASKED:
        value = batch.get(("next", INFO, key), None)
        if key not in info_keys and value is not None and not torch.isnan(value).all():
            seen.append(key)
    return (*info_keys, *seen)
