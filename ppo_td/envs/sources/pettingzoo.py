"""PettingZoo parallel envs (``env.suite='pettingzoo'``: MPE's ``mpe2.simple_spread_v3``, a user's
``module:function``): ``env.num_envs`` copies in TorchRL's ``SerialEnv`` of ``PettingZooWrapper``, agents in
groups (:func:`~ppo_td.envs.multiagent.group_map`), the global state where the env has one."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from torchrl.envs import EnvBase, SerialEnv

from ppo_td.config import EnvConfig
from ppo_td.envs.imports import env_kwargs_of
from ppo_td.envs.multiagent import group_map
from ppo_td.envs.sources.agents_common import checked_kwargs, import_suite
from ppo_td.envs.sources.base import Base


def build(config: EnvConfig, env_id: None, seed: int | None) -> Base:
    """``env.num_envs`` copies of the parallel env in a ``SerialEnv`` (``env_id`` is None: no Gymnasium id)."""
    env = _serial(config, checked_kwargs(config), seed)
    return Base(env=env, close=env.close, limit=config.max_episode_steps)


def max_cycles(config: EnvConfig) -> int | None:
    """The ``max_cycles`` of a PettingZoo env (MPE and butterfly envs end their episodes there), or None."""
    try:
        env = pettingzoo_maker(config.env_id)(**env_kwargs_of(config))
    except Exception:  # noqa: BLE001 - the env's own error is said where it is built
        return None
    try:
        cycles = getattr(env.unwrapped, "max_cycles", None)
        return cycles if isinstance(cycles, int) and cycles > 0 else None
    finally:
        env.close()


def _serial(config: EnvConfig, kwargs: dict[str, Any], seed: int | None) -> EnvBase:
    pettingzoo_maker(config.env_id)  # refused here, before any copy, where it names no function
    make = functools.partial(_pettingzoo_copy, config.env_id, kwargs, config.groups)
    env = SerialEnv(config.num_envs, make)  # batched [num_envs] even for one copy: the loop reads [env, time]
    if seed is not None:
        env.set_seed(seed)
    return env


def pettingzoo_maker(env_id: str) -> Callable[..., Any]:
    """The function making a PettingZoo env for ``env_id``: a module's ``parallel_env`` (``mpe2.simple_spread_v3``)
    or a factory ``module:function`` (a function of the user's, recorded as such from Python); the module is
    looked for in the current folder too.

    Raises:
        ValueError: no such module or function (naming what to give), or a library it needs is missing.
    """
    module, _, name = env_id.partition(":")
    found = getattr(import_suite("pettingzoo", module), name or "parallel_env", None)
    if not callable(found):
        raise ValueError(f"env.env_id={env_id!r}: {module} has no {name or 'parallel_env'} function: give a "
                         "PettingZoo env module such as mpe2.simple_spread_v3 (its parallel_env), or module:function "
                         "returning a pettingzoo.ParallelEnv")
    return found


def _pettingzoo_copy(module: str, kwargs: dict[str, Any], groups: Sequence[str] = ()) -> EnvBase:
    """One copy of a PettingZoo parallel env, its agents in groups (:func:`group_map`), with its global state
    where it has one (a module-level function: picklable)."""
    from pettingzoo import AECEnv
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    make = pettingzoo_maker(module)
    try:  # the arguments checked first: a TypeError raised inside the env's own code is its own
        inspect.signature(make).bind(**kwargs)
    except TypeError as err:
        raise ValueError(f"env.env_id={module!r}: {getattr(make, '__name__', 'its function')}("
                         f"{', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) does not fit: {err}. env.kwargs are "
                         "passed to the env's function: set them to what it takes (env.kwargs=() for none; a preset's "
                         "are its own env's)") from err
    except ValueError:  # no signature to read (a builtin): the call says
        pass
    probe = make(**kwargs)
    if isinstance(probe, AECEnv):
        probe.close()
        raise ValueError(f"env.env_id={module!r} makes a turn-based PettingZoo env (AECEnv, one agent acting at a "
                         "time), and ppo_td trains parallel envs, where every agent acts at each step "
                         "(pettingzoo.ParallelEnv): give its parallel_env, or convert one whose agents act together "
                         "with pettingzoo.utils.conversions.aec_to_parallel. Turn-based games (chess, go, card "
                         "games) are not supported yet")
    spaces = {a: (probe.observation_space(a), probe.action_space(a)) for a in probe.possible_agents}
    probe.close()
    mapping = group_map(list(spaces), groups)
    for name, members in mapping.items():
        if len({repr(spaces[a]) for a in members}) > 1:
            listed = "; ".join(f"{a}: observation {spaces[a][0]}, action {spaces[a][1]}" for a in members)
            raise ValueError(f"the agents of group {name!r} of {module} have different spaces ({listed}); the agents "
                             "of a group share their spaces (one network for all, or one each of the same shape): "
                             "put them in groups of their own with --env.groups NAME=agent,agent ... (every agent "
                             f"in one group; the env's agents: {', '.join(spaces)})")
    with warnings.catch_warnings():  # TorchRL names the PettingZoo version it was tested with
        warnings.filterwarnings("ignore", message="PettingZoo in TorchRL is tested")
        for state in (True, False):
            try:
                return PettingZooWrapper(make(**kwargs), group_map=mapping, return_state=state,
                                         categorical_actions=True, use_mask=False)
            except NotImplementedError:  # PettingZoo's default state(): the env has no global state
                if not state:
                    raise
    raise AssertionError("unreachable")
