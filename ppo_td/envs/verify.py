"""Check that a run's record of an env rebuilds the env the user gave: the same spaces, and from the same seed the
same first observations, rewards and endings over a few steps of the same actions.

ppo_td never trains on an env object it is given: it makes copies from the record (:mod:`ppo_td.envs.rebuild`),
for training, every evaluation, a resume, ``ppo-td eval`` and workers. A record that makes a different env (a
wrapper whose arguments Gymnasium's spec does not hold, an object whose state was changed after it was made, a
factory in a script that needs what only the script's main block sets) would train the wrong env without a word,
so the copy is built as another process would build it (:func:`~ppo_td.envs.scripts.as_another_process`) and
compared with the object given, before anything trains.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ppo_td.config import EnvConfig
from ppo_td.envs.scripts import as_another_process
from ppo_td.envs.sources.gymnasium import gym_env

STEPS = 8
"""Steps compared after the reset: enough to reach rewards and dynamics that an argument changes. The whole check
(a copy made, two deep copies, three traces) costs 1.4 ms on CartPole-v1, 15 ms on HalfCheetah-v5 and 0.57 s on
ALE/Pong-v5 (its emulator's start), once per env given (``python -m benchmarks record_check``, 2026-12-01)."""

SEED = 12_345
"""The seed of the compared resets and of the actions sampled."""


class Mismatch(ValueError):
    """The env rebuilt from the record differs from the env given; the message says where."""


def check_rebuilds(given: Callable[[], gym.Env] | None, config: EnvConfig, what: str,
                   spaces: tuple[gym.Space, gym.Space] | None = None) -> str | None:
    """Raise :class:`Mismatch` where ``config`` does not rebuild the env ``given()`` makes (``what`` names it in the
    message). ``given`` makes a fresh copy of the user's env each call (a deep copy of an object, or the factory
    called): two of them are compared first, and where they differ from the same seed (an env that does not draw
    its randomness from its seed), only the spaces are compared. ``given`` None (an object that cannot be copied, a
    vector env): only ``spaces`` (observation, action) are compared. Returns a line saying what could not be
    compared (None where all was)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Gymnasium's env checker on the copies: the run's own env says it once
        try:
            with as_another_process():
                rebuilt = gym_env(config)
        except Exception as err:  # noqa: BLE001 - whatever the user's code raises, said with its record
            raise Mismatch(f"{what}: made from its record as another process makes it (ppo-td eval, a resume, a "
                           f"worker), it fails: {type(err).__name__}: {err}") from err
        try:
            if given is None:
                _same_spaces(spaces, rebuilt, what)
                return None
            first = given()
            try:
                _same_spaces(spaces or (first.observation_space, first.action_space), rebuilt, what)
                return _same_steps(first, rebuilt, given, what)
            finally:
                first.close()
        finally:
            rebuilt.close()


def _same_spaces(spaces: tuple[gym.Space, gym.Space] | None, rebuilt: gym.Env, what: str) -> None:
    for name, mine in zip(("observation_space", "action_space"), spaces or (), strict=False):
        theirs = getattr(rebuilt, name)
        if mine != theirs:
            raise Mismatch(f"{what}: rebuilt from its record, its {name} is {theirs}, not {mine}")


def _same_steps(first: gym.Env, rebuilt: gym.Env, given: Callable[[], gym.Env], what: str) -> str | None:
    if getattr(first, "render_mode", None) == "human":
        return f"{what}: rendered in a window (render_mode='human'), so only its spaces were checked against its record"
    mine = trace(first)
    second = given()
    try:
        again = trace(second)
    finally:
        second.close()
    if difference(mine, again) is not None:
        return (f"{what}: two copies of it differ from the same seed (it draws randomness outside its seed), so only "
                "its spaces were checked against its record")
    try:
        theirs = trace(rebuilt)
    except Exception as err:  # noqa: BLE001
        raise Mismatch(f"{what}: made from its record, it fails in its first steps: {type(err).__name__}: {err}"
                       ) from err
    where = difference(mine, theirs)
    if where is not None:
        raise Mismatch(f"{what}: rebuilt from its record, it differs from the env given {where}")
    return None


def trace(env: gym.Env, steps: int = STEPS) -> list[tuple[str, Any]]:
    """What ``env`` gives from a reset seeded :data:`SEED` and ``steps`` actions sampled from its action space
    seeded the same (fewer where the episode ends): the reset's observation, then each step's observation,
    reward, termination and truncation."""
    out: list[tuple[str, Any]] = []
    obs, _ = env.reset(seed=SEED)
    out.append(("the first observation", obs))
    actions = copy.deepcopy(env.action_space)
    actions.seed(SEED)
    for step in range(1, steps + 1):
        obs, reward, terminated, truncated, _ = env.step(actions.sample())
        out += [(f"the observation of step {step}", obs), (f"the reward of step {step}", reward),
                (f"whether step {step} terminated", terminated), (f"whether step {step} truncated", truncated)]
        if terminated or truncated:
            break
    return out


def difference(a: list[tuple[str, Any]], b: list[tuple[str, Any]]) -> str | None:
    """Where two traces first differ (``in the reward of step 1: -1.2 against -120.0``), or None."""
    for (name, x), (_, y) in zip(a, b, strict=False):
        if not same(x, y):
            return f"in {name}: {_short(y)} against {_short(x)}"
    if len(a) != len(b):
        return f"in the episode's length: {len(b) // 4} steps against {len(a) // 4}"
    return None


def same(x: Any, y: Any) -> bool:
    """Equal values, nested dicts and tuples included; NaN equals NaN."""
    if isinstance(x, dict) or isinstance(y, dict):
        return isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys() and all(
            same(x[k], y[k]) for k in x)
    if isinstance(x, (tuple, list)) or isinstance(y, (tuple, list)):
        return isinstance(y, type(x)) and len(x) == len(y) and all(same(u, v) for u, v in zip(x, y, strict=True))
    try:
        a, b = np.asarray(x), np.asarray(y)
        with contextlib.suppress(TypeError):
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
        return a.shape == b.shape and bool(np.array_equal(a, b))
    except ValueError:
        return x == y


def _short(value: Any) -> str:
    text = np.array2string(value, precision=4, threshold=6) if isinstance(value, np.ndarray) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
