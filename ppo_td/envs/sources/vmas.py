"""VMAS scenarios (``env.suite='vmas'``): the simulator, vectorized in torch, in TorchRL's ``VmasWrapper``, its
agents in groups (TorchRL's, or ``env.groups``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torchrl.envs import EnvBase

from ppo_td.config import EnvConfig
from ppo_td.envs.multiagent import group_map
from ppo_td.envs.sources.agents_common import checked_kwargs, import_suite
from ppo_td.envs.sources.base import Base


def build(config: EnvConfig, env_id: None, seed: int | None) -> Base:
    """The scenario's ``env.num_envs`` copies, vectorized by VMAS (``env_id`` is None: a scenario is no Gymnasium
    id)."""
    env, simulator = _wrapped(config, checked_kwargs(config), seed)
    return Base(env=env, close=env.close, simulator=simulator, limit=config.max_episode_steps)


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


def _wrapped(config: EnvConfig, kwargs: dict[str, Any], seed: int | None) -> tuple[EnvBase, Any]:
    """The VMAS scenario's simulator and TorchRL's wrapper of it: what ``VmasEnv`` builds, with the simulator kept
    (:class:`~ppo_td.collect.AgentsCollector` steps it)."""
    vmas = import_suite("vmas", "vmas")
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
