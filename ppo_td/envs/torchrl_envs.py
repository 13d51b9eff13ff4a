"""Any TorchRL env as ppo_td's networks read it: one ``"observation"`` tensor, a batch of copies.

TorchRL envs name their observation entries freely (``PendulumEnv``: ``th``, ``thdot`` and a ``params`` sub-TensorDict
of physical constants). :func:`observation_transforms` concatenates the tensor entries, in the spec's order or as
``env.observation_keys`` lists them, into ``"observation"`` (TorchRL's ``UnsqueezeTransform`` for scalar entries,
``CatTensors``), leaving the env's own entries in place (the env may read them back as its state) and parameter
sub-TensorDicts and non-tensor entries out; or, with ``env.observation_dict``, keeps them apart as a Dict observation,
each under ``"observation"`` (the groups an asymmetric actor-critic splits). An unbatched env (``batch_size=[]``) is
stepped as ``env.num_envs`` copies in TorchRL's ``SerialEnv``."""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torchrl.data import Composite, NonTensor
from torchrl.envs import (
    CatTensors,
    DoubleToFloat,
    EnvBase,
    ExcludeTransform,
    RenameTransform,
    SerialEnv,
    Transform,
    UnsqueezeTransform,
)

from ppo_td import keys
from ppo_td.envs.masking import MASK_KEY

_FLAT = "__flat"  # suffix of a scalar entry given one dimension before the concatenation (deleted by CatTensors)


def observation_entries(env: EnvBase, chosen: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The observation entries of ``env`` its networks read (``chosen`` where given, else every tensor entry of the
    observation spec, in order) and those left out (sub-TensorDicts such as parameters, non-tensor entries, and
    integer or boolean entries such as a step count, which are read only when chosen).

    Raises:
        ValueError: a chosen entry the env does not have, or not one tensor; no tensor entry at all.
    """
    spec = env.observation_spec
    names = [k for k in spec.keys() if k != MASK_KEY]
    if chosen:
        missing = [k for k in chosen if k not in names]
        if missing:
            raise ValueError(f"env.observation_keys names {missing}, which the env's observation spec lacks (it has "
                             f"{names})")
        bad = [k for k in chosen if isinstance(spec[k], (Composite, NonTensor))]
        if bad:
            raise ValueError(f"env.observation_keys: {bad} are not tensors (a sub-TensorDict or non-tensor entry); "
                             "name the tensor entries inside them with a transform first")
        return list(chosen), [k for k in names if k not in chosen]
    used = [k for k in names if not isinstance(spec[k], (Composite, NonTensor)) and spec[k].dtype.is_floating_point]
    if not used:
        raise ValueError(f"the env's observation spec has no floating-point tensor entry to read (it has {names}): "
                         "give the entries with env.observation_keys, or a transform that writes 'observation'")
    return used, [k for k in names if k not in used]


def observation_transforms(env: EnvBase, chosen: Sequence[str] = (), as_dict: bool = False
                           ) -> tuple[list[Transform], str | None]:
    """Transforms that give ``env`` an ``"observation"`` of its entries (see the module), and a note naming what
    was read and what left out (None when the env already has ``"observation"`` and nothing is chosen).
    ``as_dict`` (``env.observation_dict``): the entries kept apart, each one under ``"observation"`` as the env
    names it (a Dict observation: an asymmetric actor-critic's groups), instead of concatenated."""
    spec = env.observation_spec
    if keys.OBSERVATION in spec.keys() and not chosen and not as_dict:
        return [], None
    used, left = observation_entries(env, chosen)
    batch = len(env.batch_size)
    out: list[Transform] = []
    doubles = [k for k in used if spec[k].dtype == torch.float64]
    if doubles:
        out.append(DoubleToFloat(in_keys=doubles))
    ints = [k for k in used if not spec[k].dtype.is_floating_point]
    if as_dict:
        return out + _nested(spec, used, batch), f"observation: {{{', '.join(used)}}}" + (
            f" (left out: {', '.join(left)})" if left else "")
    if ints:
        raise ValueError(f"the env's observation entries {ints} are not floating point, so they cannot be "
                         "concatenated with the others into one 'observation': choose the float entries with "
                         "env.observation_keys, or cast them with a transform (torchrl.envs.DTypeCastTransform)")
    scalars = [k for k in used if len(spec[k].shape) == batch]
    if scalars:
        out.append(UnsqueezeTransform(-1, in_keys=scalars, out_keys=[f"{k}{_FLAT}" for k in scalars]))
    deeper = [k for k in used if len(spec[k].shape) > batch + 1]
    if deeper:
        raise ValueError(f"the env's observation entries {deeper} have more than one dimension per copy: give one "
                         "entry (an image) as env.observation_keys and rename it 'observation', or flatten them "
                         "with a transform (torchrl.envs.FlattenObservation)")
    inputs = [f"{k}{_FLAT}" if k in scalars else k for k in used]
    if len(used) == 1 and not scalars:
        out.append(RenameTransform(in_keys=used, out_keys=[keys.OBSERVATION], create_copy=True))
    else:
        out.append(CatTensors(in_keys=inputs, out_key=keys.OBSERVATION, del_keys=False))
        if scalars:
            out.append(ExcludeTransform(*[f"{k}{_FLAT}" for k in scalars]))
    note = f"observation: {' + '.join(used)}" + (f" (left out: {', '.join(left)})" if left else "")
    return out, note


def _nested(spec: Composite, used: list[str], batch: int) -> list[Transform]:
    """Transforms that copy each of the entries ``used`` under ``"observation"`` (a scalar given one dimension),
    leaving the env's own entries in place; an entry itself named ``"observation"`` becomes
    ``("observation", "observation")``."""
    scalars = [k for k in used if len(spec[k].shape) == batch]
    out: list[Transform] = []
    if scalars:
        out.append(UnsqueezeTransform(-1, in_keys=scalars, out_keys=[f"{k}{_FLAT}" for k in scalars]))
    staged = [f"{k}{_FLAT}" if k in scalars else k for k in used]
    if keys.OBSERVATION in scalars:  # its copy staged: the entry leaves the name its nested copy is written under
        out.append(ExcludeTransform(keys.OBSERVATION))
    elif keys.OBSERVATION in used:
        out.append(RenameTransform(in_keys=[keys.OBSERVATION], out_keys=[f"{keys.OBSERVATION}{_FLAT}"]))
        staged[used.index(keys.OBSERVATION)] = f"{keys.OBSERVATION}{_FLAT}"
    plain = [k for k, s in zip(used, staged, strict=True) if k == s]
    moved = [(s, k) for k, s in zip(used, staged, strict=True) if k != s]
    if plain:
        out.append(RenameTransform(in_keys=plain, out_keys=[(keys.OBSERVATION, k) for k in plain], create_copy=True))
    if moved:
        out.append(RenameTransform(in_keys=[s for s, _ in moved], out_keys=[(keys.OBSERVATION, k) for _, k in moved]))
    return out


def takes_num_envs(factory: Callable[..., Any]) -> bool:
    """``factory`` has a ``num_envs`` parameter (not bound yet): it makes the batch itself, and ppo_td passes
    ``env.num_envs`` (a batched simulator: :mod:`ppo_td.envs.simulators`)."""
    try:
        parameter = inspect.signature(factory).parameters.get("num_envs")
    except (TypeError, ValueError):  # a builtin or extension callable without a signature
        return False
    bound = factory.keywords if isinstance(factory, functools.partial) else {}
    return parameter is not None and "num_envs" not in bound


def batched(factory: Callable[[], EnvBase], num_envs: int, what: str) -> EnvBase:
    """``num_envs`` copies of the TorchRL env ``factory`` makes: itself where it is batched with that many
    (``batch_size=[num_envs]``: a simulator's factory with ``num_envs`` bound), else a ``SerialEnv`` of unbatched
    copies."""
    env = factory()
    if not isinstance(env, EnvBase):
        raise TypeError(f"{what} returned a {type(env).__name__}, not a TorchRL env")
    if len(env.batch_size) == 0:
        close(env)
        return SerialEnv(num_envs, factory)
    if env.batch_size.numel() != num_envs or len(env.batch_size) != 1:
        size = list(env.batch_size)
        close(env)
        raise ValueError(f"{what} makes a TorchRL env of batch_size={size}; ppo_td steps env.num_envs={num_envs} "
                         f"copies: set env.num_envs={size[0] if len(size) == 1 else 'its size'} (one batch "
                         "dimension), or return an unbatched env (ppo_td then makes the copies)")
    return env


def close(env: EnvBase) -> None:
    """Close ``env`` unless it is closed (a batched env not started yet counts as closed)."""
    if not env.is_closed:
        env.close()


def torchrl_factory(factory: Callable[..., Any] | None, kwargs: dict[str, Any]) -> Callable[[], EnvBase] | None:
    """``factory`` with its keyword arguments where it makes TorchRL envs (a subclass of ``EnvBase``, or a function
    whose env is one: made once to see, and closed), else None (a Gymnasium env's factory)."""
    if factory is None:
        return None
    if "num_envs" in kwargs and takes_num_envs(factory):
        raise ValueError(f"env.kwargs num_envs={kwargs['num_envs']}: ppo_td passes env.num_envs to "
                         f"{getattr(factory, '__name__', factory)} (a different count for evaluation): give it as "
                         "--env.num-envs instead")
    bound = functools.partial(factory, **kwargs) if kwargs else factory
    if isinstance(factory, type):
        return bound if issubclass(factory, EnvBase) else None
    if _returns_torchrl(factory):  # annotated: known without making one (a simulator's build can take seconds)
        return bound
    made = bound(num_envs=1) if takes_num_envs(factory) else bound()
    try:
        return bound if isinstance(made, EnvBase) else None
    finally:
        if isinstance(made, EnvBase):
            close(made)
        elif callable(getattr(made, "close", None)):
            made.close()


def say(text: str | None) -> None:
    """One line for the user (the observation entries read, a missing time limit)."""
    if text:
        logging.getLogger("ppo_td").warning("%s", text)


def _returns_torchrl(factory: Callable[..., Any]) -> bool:
    """``factory`` is annotated to return a TorchRL env (``-> EnvBase``)."""
    try:
        made = typing.get_type_hints(factory).get("return")
    except Exception:  # annotations naming what cannot be resolved: not known
        return False
    return isinstance(made, type) and issubclass(made, EnvBase)
