"""Agent groups: how multi-agent envs (VMAS scenarios and PettingZoo parallel envs, built by
:mod:`ppo_td.envs.sources`) put their agents in groups, and the description of one agent of a group.

TorchRL's wrappers put each group's entries under the group's name: ``("agents", "observation")`` of shape
``[copies, agents, ...]``, ``("agents", "action")``, ``("agents", "reward")``, and, where the env has them, the
group's own ``done``/``terminated``/``truncated`` (PettingZoo: agents can finish at different times). The
env-wide ``done`` at the root ends the episode of every agent of a copy. ppo_td adds two transforms
(:func:`ppo_td.envs.layers.agents`):
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
from collections.abc import Sequence

import torch
from torchrl.data import Composite
from torchrl.envs import EnvBase

from ppo_td import keys
from ppo_td.envs.description import EnvDescription, describe, describe_spec
from ppo_td.envs.masking import MASK_KEY


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
