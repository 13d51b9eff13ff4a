"""Multi-agent envs as TorchRL gives them: VMAS scenarios and PettingZoo parallel envs, in agent groups.

TorchRL's wrappers put each group's entries under the group's name: ``("agents", "observation")`` of shape
``[copies, agents, ...]``, ``("agents", "action")``, ``("agents", "reward")``, and, where the env has them, the
group's own ``done``/``terminated``/``truncated`` (PettingZoo: agents can finish at different times). The
env-wide ``done`` at the root ends the episode of every agent of a copy. ppo_td adds two transforms:
``StepCounter`` (the episode length, and ``env.max_episode_steps`` as a *truncation*, so GAE bootstraps from the
final observation; VMAS's own ``max_steps`` would mark it as a termination) and ``RewardSum`` over the group's
reward (each agent's raw episode reward, ``("agents", "episode_reward")``).

Agent groups: as ``env.groups`` says, else as TorchRL's wrappers group them by default (what BenchMARL trains):
by their names' prefix (``adversary_0``, ``adversary_1`` -> ``"adversary"``); VMAS agents whose names share a
prefix, or do not all follow ``<name>_<number>``, form one group, ``"agents"``, and so do PettingZoo agents that
share one prefix (:func:`group_map`). Inside a group the agents' spaces must agree
(one network for all, or one each of the same shape); groups may differ in everything. Each group gets its own
``RewardSum`` (``(group, "episode_reward")``), policy, critic, advantages and loss (:mod:`ppo_td.training`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torchrl.data import Composite
from torchrl.envs import Compose, EnvBase, RewardSum, SerialEnv, StepCounter, TransformedEnv

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs.description import BuiltEnv, EnvDescription, describe, describe_spec
from ppo_td.envs.imports import env_kwargs_of, import_from_cwd
from ppo_td.envs.masking import MASK_KEY

_INSTALL = {"vmas": "pip install vmas", "pettingzoo": "pip install pettingzoo mpe2"}


def build_agents_env(config: EnvConfig, seed: int | None = None) -> BuiltEnv:
    """``config.num_envs`` copies of a multi-agent env (``config.suite``) as one batched TorchRL env.

    A PettingZoo env that has a ``state()`` also gives the env's global state (``"state"``, read by a critic with
    ``model.critic_scope='state'``).

    Raises:
        ValueError: the suite is not installed, the id names no scenario or module, the env has several agent groups
            or a group without an ``"observation"`` (the message says which and what to do).
    """
    if not config.multiagent:
        raise ValueError(f"env.suite={config.suite!r} is a one-agent suite: build it with ppo_td.envs.build_env")
    kwargs = _kwargs(config)
    base, simulator = _vmas(config, kwargs, seed) if config.suite == "vmas" else (
        _pettingzoo(config, kwargs, seed), None)
    groups = groups_of(base)
    if not groups:
        base.close()
        raise ValueError(f"env {config.env_id!r} gives no agent group with an 'observation' entry")
    transforms = [StepCounter(max_steps=config.max_episode_steps),
                  RewardSum(in_keys=[(g, "reward") for g in groups], out_keys=[(g, "episode_reward") for g in groups])]
    env = TransformedEnv(base, Compose(*transforms))
    try:
        description = describe_agents(env)
    except BaseException:
        env.close()
        raise
    return BuiltEnv(env=env, vector=None, description=description, config=config, simulator=simulator)


def group_map(agents: Sequence[str], given: Sequence[str] = ()) -> dict[str, list[str]]:
    """The agent groups of a PettingZoo env with ``agents`` (its names, in its order), or of any env given
    ``env.groups`` entries ('NAME=agent,agent'): those, else by the names' prefix before ``_<number>`` (a name
    without one is a group of its own, as TorchRL's PettingZoo wrapper groups them), else, where all share one
    prefix, one group ``"agents"``. (A VMAS env without ``env.groups`` is grouped by TorchRL's ``VmasWrapper``.)

    Raises:
        ValueError: ``given`` names an agent the env lacks, leaves one out, or puts one in two groups.
    """
    if given:
        groups = {name: [a.strip() for a in members.split(",")]
                  for name, _, members in (item.partition("=") for item in given)}
        listed = [a for members in groups.values() for a in members]
        unknown = sorted(set(listed) - set(agents))
        missing = [a for a in agents if a not in listed]
        twice = sorted({a for a in listed if listed.count(a) > 1})
        if unknown or missing or twice:
            raise ValueError(f"env.groups={list(given)} does not split the env's agents {list(agents)} into groups: "
                             + "; ".join(part for part in (unknown and f"no agents {unknown} in the env",
                                                           missing and f"{missing} in no group",
                                                           twice and f"{twice} in two groups") if part))
        return {name: [a for a in agents if a in members] for name, members in groups.items()}
    by_prefix: dict[str, list[str]] = {}
    for agent in agents:
        prefix, sep, number = agent.rpartition("_")
        by_prefix.setdefault(prefix if sep and prefix and number.isdigit() else agent, []).append(agent)
    return by_prefix if len(by_prefix) > 1 else {"agents": list(agents)}


_SET_BY_PPO_TD = {"vmas": ("num_envs", "max_steps", "seed", "device"), "pettingzoo": ()}


def env_device(config: EnvConfig) -> torch.device:
    """Where ``config``'s simulator steps (``env.device`` resolved here; the CPU for any suite but VMAS).

    Raises:
        ValueError: a CUDA device torch cannot see here, naming the way out.
    """
    if config.suite != "vmas" or config.device == "cpu":
        return torch.device("cpu")
    if config.device == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(config.device)
    if not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"env.device={config.device!r}, but torch sees {torch.cuda.device_count()} CUDA GPU(s) here: "
                         "use --env.device cpu, or auto (the GPU when there is one)")
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def runnable_here(config: EnvConfig) -> EnvConfig:
    """``config`` with a CUDA ``env.device`` this machine lacks moved to the CPU (evaluating, exporting or acting
    with a run trained on a GPU elsewhere: the simulator's results do not depend on its device beyond rounding)."""
    if config.suite != "vmas" or config.device in ("cpu", "auto"):
        return config
    try:
        env_device(config)
    except ValueError:
        return dataclasses.replace(config, device="cpu")
    return config


def _kwargs(config: EnvConfig) -> dict[str, Any]:
    kwargs = env_kwargs_of(config)
    taken = [k for k in _SET_BY_PPO_TD[config.suite] if k in kwargs]
    if taken:
        raise ValueError(f"env.kwargs sets {taken}, which ppo_td sets for env.suite={config.suite!r}: use "
                         "env.num_envs, env.max_episode_steps, seed and env.device instead")
    return kwargs


def _import(suite: str, module: str) -> Any:
    try:
        import_from_cwd(module)  # a module next to the user's script too, as Gymnasium's module:EnvId
        return sys.modules[module]
    except ModuleNotFoundError as err:
        if err.name is not None and module.startswith(err.name.split(".")[0]) and err.name.split(".")[0] in (
                "vmas", "pettingzoo", "mpe2"):
            raise ValueError(f"env.suite={suite!r} needs {err.name.split('.')[0]}: {_INSTALL[suite]} "
                             "(or pip install -e '.[multiagent]')") from err
        top = (err.name or "").split(".")[0]
        if top and not module.startswith(top) and importlib.util.find_spec(module.split(".")[0]) is not None:
            # the env's module exists; a library it imports does not (PettingZoo's butterfly envs need pymunk)
            raise ValueError(f"env.env_id={module!r} needs {top}, which is not installed: pip install {top} (the "
                             "multiagent extra installs pymunk, which PettingZoo's butterfly envs need)") from err
        raise ValueError(f"env.env_id={module!r} with env.suite={suite!r}: no module {err.name!r} (give an "
                         "importable module with a parallel_env function, e.g. mpe2.simple_spread_v3)") from err


def _vmas(config: EnvConfig, kwargs: dict[str, Any], seed: int | None) -> tuple[EnvBase, Any]:
    """The VMAS scenario's simulator and TorchRL's wrapper of it: what ``VmasEnv`` builds, with the simulator kept
    (:class:`~ppo_td.collect.AgentsCollector` steps it)."""
    vmas = _import("vmas", "vmas")
    from torchrl.envs.libs.vmas import VmasEnv, VmasWrapper

    if config.env_id not in VmasEnv.available_envs:
        raise ValueError(f"env.env_id={config.env_id!r} is not a VMAS scenario; VMAS has "
                         f"{', '.join(sorted(VmasEnv.available_envs))}")
    # Box actions are stored as sampled and clipped to their range by VMAS (env.clip_actions), as for one agent
    kwargs = {"continuous_actions": True, "clamp_actions": config.clip_actions, **kwargs}
    if "group_map" in kwargs:
        raise ValueError("env.kwargs sets group_map: give the agent groups as env.groups NAME=agent,agent ... (what "
                         "evaluation, load_policy and export read back)")
    wrapper_kwargs = {k: kwargs.pop(k) for k in ("categorical_actions",) if k in kwargs}  # VmasEnv's own
    simulator = vmas.make_env(config.env_id, num_envs=config.num_envs, device=env_device(config), max_steps=None,
                              seed=seed, wrapper=None, **kwargs)
    if config.groups:  # else TorchRL's own grouping of VMAS agents (by name prefix; one group 'agents' where alike)
        wrapper_kwargs["group_map"] = group_map([agent.name for agent in simulator.agents], config.groups)
    return VmasWrapper(simulator, **wrapper_kwargs), simulator


def _pettingzoo(config: EnvConfig, kwargs: dict[str, Any], seed: int | None) -> EnvBase:
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
    found = getattr(_import("pettingzoo", module), name or "parallel_env", None)
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


def groups_of(env: EnvBase) -> list[str]:
    """The agent groups of ``env``: the top-level observation entries, one agent dimension past the env's batch,
    that hold an ``"observation"`` of their own (TorchRL's multi-agent layout; empty for a one-agent env)."""
    spec, dims = env.observation_spec, len(env.batch_size)
    return [k for k in spec.keys() if isinstance(k, str) and k != keys.OBSERVATION
            and isinstance(spec[k], Composite) and len(spec[k].shape) == dims + 1
            and keys.OBSERVATION in spec[k].keys()]


def describe_agents(env: EnvBase) -> EnvDescription:
    """An :class:`~ppo_td.envs.EnvDescription` of one agent of ``env``'s group (its observation and action), with
    the group's name and size, and the global state's shape when the env has one; for an env with several groups,
    one such description per group, in ``teams``."""
    groups = groups_of(env)
    if not groups:
        raise ValueError("the env has no agent group (an entry holding the agents' 'observation')")
    described = tuple(describe_group(env, name) for name in groups)
    if len(described) == 1:
        return described[0]
    return dataclasses.replace(described[0], group=None, num_agents=sum(d.num_agents for d in described),
                               teams=described)


def describe_group(env: EnvBase, name: str) -> EnvDescription:
    """The description of one agent of ``env``'s group ``name``."""
    batch_dims = len(env.batch_size)
    obs = env.observation_spec[name, keys.OBSERVATION]
    n_agents = int(obs.shape[batch_dims])
    action = env.full_action_spec_unbatched[name, keys.ACTION]
    state = env.observation_spec.get("state", None)
    if any(d < 0 for d in obs.shape) or any(d < 0 for d in action.shape):
        raise ValueError(f"the agents of group {name!r} have different observation or action spaces (observation "
                         f"{tuple(obs.shape)}, action {tuple(action.shape)}, -1 where they differ); the agents of a "
                         "group share their spaces, as shared parameters need: put them in groups of their own with "
                         "--env.groups NAME=agent,agent ...")
    desc = describe_spec(observation=obs, action=action, batch_dims=batch_dims + 1, agent_dims=1,
                         num_envs=int(env.batch_size.numel()) if batch_dims else 1,
                         action_mask=MASK_KEY in env.observation_spec[name].keys()
                         and env.observation_spec[name, MASK_KEY].dtype == torch.bool)
    desc = desc.with_agents(name, n_agents, None if state is None else tuple(state.shape[batch_dims:]))
    if desc.observation is not None:
        raise ValueError(f"the agents of group {name!r} observe {desc.observation}; ppo_td's multi-agent networks "
                         "read float vectors")
    return desc


def describe_any(env: EnvBase) -> EnvDescription:
    """The description of a one-agent env (:func:`~ppo_td.envs.describe`), or of one agent of a multi-agent env's
    group (:func:`describe_agents`)."""
    return describe_agents(env) if groups_of(env) else describe(env)
