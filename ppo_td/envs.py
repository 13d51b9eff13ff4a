"""Gymnasium id -> batched TorchRL env with the transforms PPO needs."""

from __future__ import annotations

import difflib
from functools import partial
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from torchrl.envs import Compose, DoubleToFloat, EnvBase, GymWrapper, RewardSum, StepCounter, TransformedEnv

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.transforms import FiniteCheck


class EnvStepError(RuntimeError):
    """An exception raised inside an environment's step, with the env id and step attached."""


class StepErrorContext(gym.Wrapper):
    """Re-raise an exception from ``step`` as :class:`EnvStepError` naming the env id and the step."""

    def __init__(self, env: gym.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.steps = 0

    def step(self, action):
        self.steps += 1
        try:
            return self.env.step(action)
        except Exception as err:
            raise EnvStepError(
                f"env {self.env_id!r} raised {type(err).__name__} at step {self.steps} "
                f"(action {action!r}): {err}"
            ) from err


def _check_env_id(env_id: str) -> None:
    if env_id in gym.registry:
        return
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f" Close matches: {close}." if close else ""
    raise ValueError(
        f"unknown Gymnasium env id {env_id!r}.{hint} Check the spelling and version suffix, "
        "or import the package that registers it before building the env."
    )


def _check_spaces(env_id: str, vec: gym.vector.VectorEnv) -> None:
    action_space = vec.single_action_space
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(
            f"env {env_id!r} has action space {action_space}, but ppo_td's policy needs a "
            "Discrete action space (Gaussian policies for Box actions are not built yet). "
            "Pick a discrete-action env such as CartPole-v1 or Acrobot-v1."
        )
    obs_space = vec.single_observation_space
    if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
        raise ValueError(
            f"env {env_id!r} has observation space {obs_space}; ppo_td's MLP networks need a flat "
            "Box observation. Flatten it with gymnasium.wrappers.FlattenObservation in your own "
            "env factory and pass the env to train(..., env=...)."
        )


def make_env(config: EnvConfig, seed: int | None = None) -> TransformedEnv:
    """Build ``config.num_envs`` copies of a Gymnasium env as one batched TorchRL env.

    The copies run in this process (a synchronous Gymnasium vector env without
    autoreset: TorchRL resets finished envs itself, so ``("next", "observation")``
    is the true final observation and time-limit truncation can be bootstrapped).
    Transforms: ``FiniteCheck`` (NaN/inf guard, unless ``check_finite=False``),
    ``StepCounter`` (episode length), ``RewardSum`` (episode return), ``DoubleToFloat``
    (float64 observations to float32). Each Gymnasium env is wrapped so an exception
    in its ``step`` names the env id and step (:class:`EnvStepError`).

    Example:
        >>> env = make_env(EnvConfig("CartPole-v1", num_envs=4), seed=0)
        >>> env.batch_size
        torch.Size([4])
    """
    _check_env_id(config.env_id)
    make_kwargs: dict[str, Any] = {}
    if config.max_episode_steps is not None:
        make_kwargs["max_episode_steps"] = config.max_episode_steps
    vec = gym.make_vec(
        config.env_id,
        num_envs=config.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
        wrappers=[partial(StepErrorContext, env_id=config.env_id)],
        **make_kwargs,
    )
    try:
        _check_spaces(config.env_id, vec)
    except ValueError:
        vec.close()
        raise
    base = GymWrapper(vec, categorical_action_encoding=True)
    transforms = [StepCounter(), RewardSum()]
    if config.check_finite:
        transforms.insert(0, FiniteCheck(config.env_id))
    if base.observation_spec[keys.OBSERVATION].dtype == torch.float64:
        transforms.append(DoubleToFloat())
    env = TransformedEnv(base, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env


def env_signature(env: EnvBase) -> dict[str, Any]:
    """What a checkpoint must match to be loaded into ``env``: observation shape and action count."""
    obs_spec = env.observation_spec[keys.OBSERVATION]
    action_spec = env.action_spec
    return {
        "observation_shape": list(obs_spec.shape[len(env.batch_size):]),
        "action_space": f"Discrete({action_spec.space.n})",
    }
