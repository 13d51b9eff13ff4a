"""Deterministic evaluation episodes of a trained actor."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs import make_env

DEFAULT_STEP_CAP = 100_000


def evaluate(actor: TensorDictModule, env_config: EnvConfig, episodes: int, seed: int) -> list[float]:
    """Return of ``episodes`` deterministic episodes (the mode of the policy), one per env copy.

    Runs ``episodes`` copies of the env side by side and keeps the first episode
    of each. Raises if an episode does not end within the env's time limit (or
    100,000 steps when the env has none).
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    env = make_env(dataclasses.replace(env_config, num_envs=episodes), seed=seed)
    limit = env_config.max_episode_steps or gym.spec(env_config.env_id).max_episode_steps or DEFAULT_STEP_CAP
    returns: list[float | None] = [None] * episodes
    try:
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            td = env.reset()
            for _ in range(limit):
                td, next_td = env.step_and_maybe_reset(actor(td))
                done = td.get(keys.DONE).view(episodes)
                for i in done.nonzero().flatten().tolist():
                    if returns[i] is None:
                        returns[i] = float(td.get(keys.EPISODE_RETURN)[i])
                if all(r is not None for r in returns):
                    return [float(r) for r in returns]
                td = next_td
    finally:
        env.close()
    unfinished = sum(r is None for r in returns)
    raise RuntimeError(
        f"{unfinished} of {episodes} evaluation episodes of {env_config.env_id} did not end within "
        f"{limit} steps; set env.max_episode_steps to bound them."
    )
