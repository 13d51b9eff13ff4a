"""Atari games in EnvPool's threads (``env.vectorization='envpool'``, :mod:`ppo_td.envs.envpool`): EnvPool's
vector env, its preprocessing set to ppo_td's, wrapped as a Gymnasium vector env is
(:func:`ppo_td.envs.sources.gymnasium.wrap`)."""

from __future__ import annotations

from ppo_td.config import EnvConfig
from ppo_td.envs.envpool import envpool_atari
from ppo_td.envs.ids import EnvId
from ppo_td.envs.sources.base import Base
from ppo_td.envs.sources.gymnasium import check, wrap


def build(config: EnvConfig, env_id: EnvId, seed: int | None) -> Base:
    """EnvPool's ``env.num_envs`` copies of the Atari game ``env_id`` names, as a Gymnasium vector env is wrapped."""
    check(config)
    return wrap(config, envpool_atari(config, env_id.kwargs))
