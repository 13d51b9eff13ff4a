"""Where an env comes from: one module per kind, each with ``claim(config)``, which returns a builder
(``builder(seed) -> Base``, :class:`~ppo_td.envs.sources.base.Base`) for a config of its kind, else None.

:func:`source_for` asks them in the order of :data:`SOURCES`; :func:`build` builds with the first that claims the
config; :func:`ppo_td.envs.build_env` then adds ppo_td's standard layers (:mod:`ppo_td.envs.layers`). A new kind
of env is one module here and one entry in the table.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ppo_td.config import EnvConfig
from ppo_td.envs.ids import own_step_limit
from ppo_td.envs.sources import envpool, gymnasium, pettingzoo, torchrl, vmas
from ppo_td.envs.sources.base import Base

SOURCES: tuple[ModuleType, ...] = (vmas, pettingzoo, torchrl, envpool, gymnasium)
"""Asked in this order: the multi-agent suites by ``env.suite``; a TorchRL env (its factory called once to see);
EnvPool by ``env.vectorization``; any other id or factory is a Gymnasium env."""


def source_for(config: EnvConfig) -> tuple[ModuleType, Any]:
    """The source that takes ``config`` and its builder (``builder(seed)``)."""
    for source in SOURCES:
        builder = source.claim(config)
        if builder is not None:
            return source, builder
    raise ValueError(f"no env source takes env.suite={config.suite!r} (sources: "
                     f"{', '.join(s.NAME for s in SOURCES)})")


def build(config: EnvConfig, seed: int | None) -> Base:
    """The copies of ``config``'s env, built by the first source that takes it (before ppo_td's standard layers)."""
    _, builder = source_for(config)
    return builder(seed)


def ends_episodes(config: EnvConfig) -> bool:
    """Whether the env ends its episodes by itself: a time limit ppo_td reads (:func:`~ppo_td.envs.ids.
    own_step_limit`), a PettingZoo env's ``max_cycles``, or a factory's env with a time limit in its wrappers (one
    copy is made to look)."""
    if own_step_limit(config) is not None:
        return True
    if config.suite == "pettingzoo":
        return pettingzoo.max_cycles(config) is not None
    return gymnasium.ends_by_itself(config)
