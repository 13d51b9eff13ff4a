"""Atari games in EnvPool's threads (``env.vectorization='envpool'``, :mod:`ppo_td.envs.envpool`): EnvPool's
vector env, its preprocessing set to ppo_td's, wrapped as a Gymnasium vector env is
(:func:`ppo_td.envs.sources.gymnasium.wrap`)."""

from __future__ import annotations

from typing import Any

from ppo_td.config import EnvConfig
from ppo_td.envs.envpool import envpool_atari
from ppo_td.envs.imports import env_kwargs_of
from ppo_td.envs.sources.base import Base
from ppo_td.envs.sources.gymnasium import check, wrap

NAME = "envpool"


def claim(config: EnvConfig) -> Any:
    """This source's builder for ``config`` (``env.vectorization='envpool'``), else None."""
    return (lambda seed: build(config)) if config.vectorization == "envpool" and not config.multiagent else None


def build(config: EnvConfig) -> Base:
    check(config)
    return wrap(config, envpool_atari(config, env_kwargs_of(config)))
