"""Where an env comes from: one module per kind of env, each with ``build(config, env_id, seed)``, which returns the
batched env before ppo_td's standard layers (:class:`~ppo_td.envs.sources.base.Base`), and one row of
:data:`SOURCES` saying which configs it takes.

:func:`source_for` reads the config (and, for one agent, its env id once: :func:`ppo_td.envs.ids.resolve`) and
picks the first row that takes it, without entering any source; :func:`build` enters that source only;
:func:`ppo_td.envs.build_env` then adds the standard layers (:mod:`ppo_td.envs.layers`). A new kind of env is one
module here and one row in the table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import ModuleType

from ppo_td.config import EnvConfig
from ppo_td.envs.ids import EnvId, own_step_limit, resolve
from ppo_td.envs.sources import envpool, gymnasium, pettingzoo, torchrl, vmas
from ppo_td.envs.sources.base import Base


@dataclasses.dataclass(frozen=True)
class Source:
    """One kind of env: its name, its module (``module.build(config, env_id, seed) -> Base``) and which configs it
    takes (``takes(config, env_id)``; ``env_id`` is None for a multi-agent config)."""

    name: str
    module: ModuleType
    takes: Callable[[EnvConfig, EnvId | None], bool]


SOURCES: tuple[Source, ...] = (
    Source("vmas", vmas, lambda config, env_id: config.suite == "vmas"),
    Source("pettingzoo", pettingzoo, lambda config, env_id: config.suite == "pettingzoo"),
    Source("torchrl", torchrl, lambda config, env_id: env_id is not None and env_id.torchrl is not None),
    Source("envpool", envpool, lambda config, env_id: env_id is not None and config.vectorization == "envpool"),
    Source("gymnasium", gymnasium, lambda config, env_id: env_id is not None),
)
"""Asked in this order: the multi-agent suites by ``env.suite``; an id naming a function or class that makes a
TorchRL env; EnvPool by ``env.vectorization``; any other id or factory is a Gymnasium env."""


def source_for(config: EnvConfig) -> tuple[Source, EnvId | None]:
    """The source that takes ``config``, and its env id read (None for a multi-agent config).

    Raises:
        ValueError: an unknown id (naming close ones), or a config no source takes.
    """
    env_id = None if config.multiagent else resolve(config)
    for source in SOURCES:
        if source.takes(config, env_id):
            return source, env_id
    raise ValueError(f"no env source takes env.suite={config.suite!r} (sources: "
                     f"{', '.join(s.name for s in SOURCES)})")


def build(config: EnvConfig, seed: int | None) -> Base:
    """The copies of ``config``'s env, built by the source that takes it (before ppo_td's standard layers)."""
    source, env_id = source_for(config)
    return source.module.build(config, env_id, seed)


def ends_episodes(config: EnvConfig) -> bool:
    """Whether the env ends its episodes by itself: a time limit ppo_td reads (:func:`~ppo_td.envs.ids.
    own_step_limit`), a PettingZoo env's ``max_cycles``, or a factory's env with a time limit in its wrappers (one
    copy is made to look)."""
    if own_step_limit(config) is not None:
        return True
    if config.suite == "pettingzoo":
        return pettingzoo.max_cycles(config) is not None
    return gymnasium.ends_by_itself(config)
