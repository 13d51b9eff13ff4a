"""Gymnasium wrappers ppo_td puts around each env copy it steps (see :func:`ppo_td.envs.build_env`).

Each keeps whatever state it has public (``state_dict`` / ``load_state_dict``), so a checkpoint can
record it and a resume can put it back (:mod:`ppo_td.envs.state`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from ppo_td.envs.masking import MASK_KEY, InfoMaskToObservation


class EnvStepError(RuntimeError):
    """An exception raised inside an environment's step, with the env id and step attached."""


class StepErrorContext(gym.Wrapper):
    """Re-raise an exception from ``step`` or ``reset`` as :class:`EnvStepError` naming the env id and the step
    (or the reset's seed)."""

    def __init__(self, env: gym.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.steps = 0

    def step(self, action):
        self.steps += 1
        try:
            out = self.env.step(action)
        except Exception as err:
            raise EnvStepError(
                f"env {self.env_id!r} raised {type(err).__name__} at step {self.steps} "
                f"(action {action!r}): {err}"
            ) from err
        if np.ndim(out[1]) != 0:
            raise EnvStepError(f"env {self.env_id!r} returned a reward of shape {np.shape(out[1])} at step "
                               f"{self.steps}; a Gymnasium env's reward is one number per step (sum or pick one "
                               "in a wrapper)")
        return out

    def reset(self, *, seed=None, options=None):
        try:
            return self.env.reset(seed=seed, options=options)
        except Exception as err:
            raise EnvStepError(f"env {self.env_id!r} raised {type(err).__name__} in reset (seed {seed}, after "
                               f"{self.steps} steps): {err}") from err

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])


class StepLimit(gym.wrappers.TimeLimit):
    """Truncate an episode after ``max_episode_steps`` steps: Gymnasium's ``TimeLimit`` with its step count
    public, so a checkpoint records it (``TimeLimit`` keeps it in a private attribute).

    ppo_td builds its env copies without ``TimeLimit`` and puts this wrapper in its place, with the same
    semantics: ``truncated`` is True on the step that reaches the limit; ``reset`` starts the count again. A
    ``TimeLimit`` to the wrappers above it (its spec's ``max_episode_steps`` is the limit), as Gymnasium's is:
    ``TimeAwareObservation`` reads it there.
    """

    def __init__(self, env: gym.Env, max_episode_steps: int) -> None:
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
        super().__init__(env, int(max_episode_steps))
        self.max_episode_steps = int(max_episode_steps)
        self.elapsed_steps = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.elapsed_steps += 1
        return obs, reward, terminated, truncated or self.elapsed_steps >= self.max_episode_steps, info

    def reset(self, *, seed=None, options=None):
        self.elapsed_steps = 0
        return self.env.reset(seed=seed, options=options)

    def state_dict(self) -> dict[str, Any]:
        return {"elapsed_steps": self.elapsed_steps, "max_episode_steps": self.max_episode_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.elapsed_steps = int(state["elapsed_steps"])


class ClipToBounds(gym.ActionWrapper):
    """Clip Box actions to the bounds before the env sees them, keeping the bounded action space.

    Gymnasium's ``ClipAction`` widens the space to (-inf, inf), which would hide the
    bounds from the policy (the tanh-squashed Gaussian needs them).
    """

    def action(self, action):
        return np.clip(action, self.action_space.low, self.action_space.high)


def clip_box_actions(env: gym.Env) -> gym.Env:
    """``env`` wrapped in :class:`ClipToBounds` when its actions are a Box; else ``env``."""
    return ClipToBounds(env) if isinstance(env.action_space, gym.spaces.Box) else env


def adapted(env: gym.Env, env_id: str, *, clip_actions: bool, lift_mask: bool) -> gym.Env:
    """One copy of the user's env as ppo_td's vector env steps it, in this order: its errors name ``env_id`` and
    the step (:class:`StepErrorContext`), Box actions clipped to their bounds (``clip_actions``), ``info``'s action
    mask lifted into the observation (``lift_mask``), a nested or non-dict observation made a flat Dict
    (:class:`NestObservation`, where it needs one)."""
    env = StepErrorContext(env, env_id=env_id)
    if clip_actions:
        env = clip_box_actions(env)
    if lift_mask:
        space = env.action_space
        size = int(space.n) if isinstance(space, gym.spaces.Discrete) else int(sum(space.nvec))
        env = InfoMaskToObservation(env, size)
    return NestObservation(env) if needs_nesting(env.observation_space) else env


class NestObservation(gym.ObservationWrapper):
    """A ``Dict`` or ``Tuple`` observation as ``{"observation": {...}}`` with the action mask (an
    ``"action_mask"`` entry, if any) beside it; ``Tuple`` spaces become ``Dict`` spaces keyed "0", "1", ...

    TorchRL's GymWrapper then reads the entries as the nested keys ``("observation", key)``: the
    networks read one ``"observation"`` entry (a TensorDict here) and the mask stays where ppo_td's
    masking reads it. A ``{"observation": X, "action_mask": M}`` observation keeps X as it is, but for
    its tuples. An entry named ``"state"`` is named ``"observation"`` (in a Dict without one), as TorchRL names it.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        entries = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {"observation": space}
        mask = entries.pop(MASK_KEY, None)
        self._inner = nests_entries(space)
        inner = gym.spaces.Dict(entries) if self._inner else entries["observation"]
        out = {"observation": _as_dict(inner)}
        if mask is not None:
            out[MASK_KEY] = mask
        self.observation_space = gym.spaces.Dict(out)

    def observation(self, observation: Any) -> dict[str, Any]:
        return nest_observation(observation, self._inner)


def nests_entries(space: gym.Space) -> bool:
    """Whether :class:`NestObservation` puts the entries of ``space`` under ``"observation"`` (a Dict other than
    ``{"observation": X}`` plus the mask), rather than keeping its ``"observation"`` entry as it is."""
    entries = set(space.spaces) - {MASK_KEY} if isinstance(space, gym.spaces.Dict) else {"observation"}
    return entries != {"observation"}


def nest_observation(observation: Any, inner: bool) -> dict[str, Any]:
    """:class:`NestObservation`'s observation (one or a batch: the structure is the same), ``inner`` as
    :func:`nests_entries` of its space."""
    entries = dict(observation) if isinstance(observation, dict) else {"observation": observation}
    mask = entries.pop(MASK_KEY, None)
    out = {"observation": _dict_of(entries if inner else entries["observation"])}
    if mask is not None:
        out[MASK_KEY] = mask
    return out


def _key(key: str, keys: Any) -> str:
    """TorchRL's GymWrapper names a Dict's ``"state"`` entry ``"observation"`` (when it has none) in the
    spec at every level; ppo_td renames the data the same way, so both agree."""
    return "observation" if key == "state" and "observation" not in keys else key


def _as_dict(space: gym.Space) -> gym.Space:
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Dict({str(i): _as_dict(s) for i, s in enumerate(space.spaces)})
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({_key(k, space.spaces): _as_dict(s) for k, s in space.spaces.items()})
    return space


def _dict_of(value: Any) -> Any:
    if isinstance(value, tuple):
        return {str(i): _dict_of(v) for i, v in enumerate(value)}
    if isinstance(value, dict):
        return {_key(k, value): _dict_of(v) for k, v in value.items()}
    return value


def needs_nesting(space: gym.Space) -> bool:
    """Whether an observation space needs :class:`NestObservation`: a Dict other than ppo_td's mask
    convention ``{"observation": Box-like, "action_mask": ...}``, or a Tuple anywhere."""
    if isinstance(space, gym.spaces.Dict) and "observation" in space.spaces \
            and set(space.spaces) <= {"observation", MASK_KEY}:
        return not _plain(space["observation"])
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def _plain(space: gym.Space) -> bool:
    return not isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


UNENCODABLE = (gym.spaces.Text, gym.spaces.Graph, gym.spaces.Sequence)


def unencodable(space: gym.Space, where: str = "") -> str | None:
    """The first part of ``space`` no encoder reads (Text, Graph, Sequence, OneOf..., indices not starting at 0),
    named with its path."""
    if isinstance(space, gym.spaces.Dict):
        return next((bad for k, s in space.spaces.items() if (bad := unencodable(s, f"{where}[{k!r}]"))), None)
    if isinstance(space, gym.spaces.Tuple):
        return next((bad for i, s in enumerate(space.spaces) if (bad := unencodable(s, f"{where}[{i}]"))), None)
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)) and np.any(space.start != 0):
        return f"observation{where} is {space}, whose indices start at {space.start} (one-hot encoding counts from 0)"
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return None
    return f"observation{where} is {space}"
