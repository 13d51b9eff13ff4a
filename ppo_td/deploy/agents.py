"""A trained agent group's policy as a plain callable: the agents' observations as the multi-agent env gives them
in, their actions as it takes them out.

:class:`AgentsPolicy` is what :func:`~ppo_td.deploy.load_policy` returns for a multi-agent run. It takes the
formats of the env libraries themselves:

- PettingZoo's parallel API: a dict ``{agent: observation}`` -> ``{agent: action}`` for the agents present (an agent
  that has left the episode is simply absent); the legal actions as ``action_mask={agent: mask}`` (from each
  agent's ``info["action_mask"]``) where the policy was trained with masks;
- VMAS: a list with each agent's ``[envs, obs]`` tensor -> a list with each agent's ``[envs, action]`` tensor;
- stacked: an array or tensor ``[..., agents, obs]`` -> ``[..., agents, action]`` (the group's layout in TorchRL).

Each agent's action depends on its own observation only (decentralised execution, as in training). It runs the
very TorchRL actor evaluation runs, in its deterministic mode by default (``tests/test_multiagent.py`` compares
the two on an episode).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ppo_td import keys
from ppo_td.config import TrainConfig
from ppo_td.envs import MASK_KEY, EnvDescription
from ppo_td.envs.imports import env_kwargs_of
from ppo_td.envs.multiagent import group_map
from ppo_td.envs.sources.pettingzoo import pettingzoo_maker
from ppo_td.envs.sources.vmas import runnable_here
from ppo_td.models.device import resolve_device
from ppo_td.models.distributions import deterministic_action
from ppo_td.models.multiagent import GroupPolicy, group_policy, team_members


def agent_names(config: TrainConfig, num_agents: int) -> list[str]:
    """The agents of the group in the order of its rows: PettingZoo's ``possible_agents`` (TorchRL's wrapper keeps
    their order), the VMAS scenario's agents' names (TorchRL's ``VmasEnv.agent_names``)."""
    names, _ = env_agents(config)
    if len(names) != num_agents:
        raise ValueError(f"{config.env.env_id} has the agents {names}; the checkpoint's policy acts for "
                         f"{num_agents}: the env changed since training")
    return names


def team_agents(config: TrainConfig, description: EnvDescription) -> dict[str, list[str]]:
    """Each agent group's agents, in the order of its rows, as training grouped them (``env.groups``, else the
    wrapper's own grouping), checked against ``description.teams``."""
    _, mapping = env_agents(config)
    trained = {team.group: team.num_agents for team in description.teams}
    if {g: len(v) for g, v in mapping.items()} != trained:
        raise ValueError(f"{config.env.env_id} groups its agents as {mapping}; the checkpoint's policies act for the "
                         f"groups {trained} (agents per group): the env changed since training")
    return mapping


def env_agents(config: TrainConfig) -> tuple[list[str], dict[str, list[str]]]:
    """The env's agents, in its order (PettingZoo's ``possible_agents``, the VMAS scenario's agents' names), and
    their groups as training made them (``env.groups``; else TorchRL's ``VmasEnv.group_map`` for VMAS,
    :func:`~ppo_td.envs.multiagent.group_map` for PettingZoo)."""
    if config.env.suite == "vmas":
        from torchrl.envs.libs.vmas import VmasEnv

        env = VmasEnv(config.env.env_id, num_envs=1, **{"continuous_actions": True, **env_kwargs_of(config.env)})
        try:
            names, default = list(env.agent_names), {g: list(v) for g, v in env.group_map.items()}
        finally:
            env.close()
        return names, group_map(names, config.env.groups) if config.env.groups else default
    env = pettingzoo_maker(config.env.env_id)(**env_kwargs_of(config.env))
    try:
        names = list(env.possible_agents)
    finally:
        env.close()
    return names, group_map(names, config.env.groups)


class AgentsPolicy(nn.Module):
    """A trained agent group's policy: each agent's observation in, each agent's action out (see the module).

    ``deterministic``: the policy's mode (default) or actions sampled from it (torch's RNG: ``torch.manual_seed``
    makes them reproducible).

    Example:
        >>> policy = load_policy("runs/mpe-spread-seed1")
        >>> env = policy.make_env()
        >>> observations, infos = env.reset(seed=0)
        >>> observations, rewards, terminations, truncations, infos = env.step(policy(observations))
    """

    def __init__(self, actor: TensorDictModuleBase, config: TrainConfig, description: EnvDescription,
                 agents: Sequence[str], device: str | torch.device = "cpu", deterministic: bool = True) -> None:
        super().__init__()
        if description.group is None:
            raise ValueError("AgentsPolicy acts for an agent group; this env has one agent: use ppo_td.load_policy "
                             "on a one-agent run (a Policy)")
        if len(agents) != description.num_agents:
            raise ValueError(f"{len(agents)} agent names for a group of {description.num_agents} agents")
        self.config, self.description, self.deterministic = config, description, deterministic
        self.group, self.agents = description.group, list(agents)
        self.actor = copy.deepcopy(actor).eval()  # a copy: the caller's module (a training actor) is left alone
        for p in self.actor.parameters():
            p.requires_grad_(False)
        self.discrete = description.action_kind == "discrete"
        # a Gaussian's action clipped where training clipped it (VMAS's clamp_actions); PettingZoo gets it as it is
        self.clip = (config.env.suite == "vmas" and config.env.clip_actions and not self.discrete
                     and not config.model.squash_actions)
        if self.clip:
            self.register_buffer("action_low", torch.as_tensor(description.action_low), persistent=False)
            self.register_buffer("action_high", torch.as_tensor(description.action_high), persistent=False)
        self.register_buffer("anchor", torch.zeros(()), persistent=False)
        self.to(resolve_device(str(device), images=False))
        self._plain: GroupPolicy | None = group_policy(self.actor)
        """The actor's network and distribution on plain tensors (a ppo_td-built group actor): the deterministic
        action without the TensorDict round trip (the same network, distribution and mode, so the same actions)."""

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    def __repr__(self) -> str:
        """``AgentsPolicy(env=..., group=..., agents=[...], observation=..., action=..., deterministic)``, not the
        TensorDict modules' tree (``policy.actor`` prints that)."""
        d = self.description
        action = (f"Discrete({d.action_nvec[0]})" if self.discrete else f"Box({list(d.action_shape)})")
        return (f"AgentsPolicy(env={self.config.env.env_id!r}, group={self.group!r}, agents={self.agents}, "
                f"observation={d.observation_size}, action={action}, "
                f"{'deterministic' if self.deterministic else 'sampled'})")

    def make_env(self, num_envs: int = 1, render_mode: str | None = None) -> Any:
        """The env this policy was trained on, as its library gives it: a PettingZoo parallel env (``num_envs`` is
        1; its own episode length: ``env.max_episode_steps``, where set, is not applied), or a VMAS env of
        ``num_envs`` copies with the training episode length (``vmas.make_env``)."""
        env = self.config.env
        kwargs = env_kwargs_of(env)
        if env.suite == "pettingzoo":
            if num_envs != 1:
                raise ValueError(f"make_env(num_envs={num_envs}): a PettingZoo parallel env is one copy")
            if render_mode is not None:
                kwargs["render_mode"] = render_mode
            return pettingzoo_maker(env.env_id)(**kwargs)
        import vmas

        # as training made it (ppo_td.envs.multiagent), with VMAS's own time limit for the episode length
        kwargs = {"continuous_actions": True, "clamp_actions": env.clip_actions, **kwargs}
        return vmas.make_env(env.env_id, num_envs=num_envs, max_steps=env.max_episode_steps, **kwargs)

    @torch.no_grad()
    def forward(self, observations: Any, action_mask: Any = None, deterministic: bool | None = None) -> Any:
        """The agents' actions for ``observations`` (a dict per agent, a list per agent, or stacked: see the
        module), in the same format."""
        if action_mask is not None and not self.description.action_mask:
            raise ValueError("action_mask given, but this policy was trained without action masks (the env had "
                             "none): call it without action_mask")
        if isinstance(observations, Mapping):
            return self._per_agent(observations, action_mask, deterministic)
        if isinstance(observations, tuple):
            raise ValueError("observations as a tuple: pass PettingZoo's observations dict (reset() returns "
                             "(observations, infos)), VMAS's list with each agent's observations, or one stacked "
                             "[..., agents, obs] array")
        if isinstance(observations, list):
            if len(observations) != len(self.agents):
                raise ValueError(f"{len(observations)} observations for the {len(self.agents)} agents {self.agents}: "
                                 "give one per agent, in this order")
            stacked = torch.stack([self._tensor(o, "observation") for o in observations], dim=-2)
            mask = None if action_mask is None else torch.stack(
                [self._tensor(m, "action_mask") for m in action_mask], dim=-2)
            actions = self._act(stacked, mask, deterministic)
            out = list(actions.unbind(-1 if self.discrete else -2))
            first = observations[0]
            return [a.to(first.device) for a in out] if isinstance(first, torch.Tensor) else [
                a.cpu().numpy() for a in out]
        given = observations if isinstance(observations, torch.Tensor) else None
        stacked = self._tensor(observations, "observation")
        mask = None if action_mask is None else self._tensor(action_mask, "action_mask")
        actions = self._act(stacked, mask, deterministic)
        return actions.to(given.device) if given is not None else actions.cpu().numpy()

    def _per_agent(self, observations: Mapping, action_mask: Any, deterministic: bool | None) -> dict:
        unknown = [a for a in observations if a not in self.agents]
        if unknown:
            raise ValueError(f"observations of {unknown}, which are not agents of this policy's group "
                             f"{self.agents}")
        present = [a for a in self.agents if a in observations]
        if not present:
            return {}
        masks = dict(action_mask or {})
        obs = {}
        for agent in present:
            value = observations[agent]
            if isinstance(value, Mapping):
                raise ValueError(f"the observation of {agent} is a dict ({sorted(value)}); this policy reads each "
                                 f"agent's observation as {self.description.observation_size} values")
            obs[agent] = self._tensor(value, f"the observation of {agent}")
        rows = obs[present[0]].shape[:-1]
        blank = torch.zeros(*rows, self.description.observation_size)  # agents that have left: not returned
        stacked = torch.stack([obs.get(a, blank) for a in self.agents], dim=-2)
        mask = None
        if self.description.action_mask:
            missing = [a for a in present if a not in masks]
            if missing:
                raise ValueError(f"this policy was trained with action masks; none given for {missing}: pass "
                                 "action_mask={agent: info[agent]['action_mask']}")
            allowed = torch.ones(*rows, self.description.action_size, dtype=torch.bool)
            mask = torch.stack([self._tensor(masks[a], f"the action mask of {a}") if a in masks else allowed
                                for a in self.agents], dim=-2)
        actions = self._act(stacked, mask, deterministic).cpu()
        out = {}
        for i, agent in enumerate(self.agents):
            if agent in obs:
                action = actions[..., i, :] if not self.discrete else actions[..., i]
                out[agent] = action.item() if self.discrete and action.dim() == 0 else action.numpy()
        return out

    def _tensor(self, value: Any, what: str) -> torch.Tensor:
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        if what.startswith("the action mask") or what == "action_mask":
            size = self.description.action_size
            if tensor.shape[-1:] != (size,):
                raise ValueError(f"{what} has shape {tuple(tensor.shape)}; the policy expects {size} flags per agent")
            return tensor.to(torch.bool)
        size = self.description.observation_size
        if tensor.dim() == 0 or tensor.shape[-1] != size:
            raise ValueError(f"{what} has shape {tuple(tensor.shape)}; the policy expects observations of {size} "
                             "values, as the env it was trained on emits")
        return tensor.to(torch.float32)

    def _act(self, observation: torch.Tensor, mask: torch.Tensor | None, deterministic: bool | None) -> torch.Tensor:
        """Actions for ``[..., agents, obs]`` observations (and ``[..., agents, actions]`` masks)."""
        if observation.dim() < 2 or observation.shape[-2] != len(self.agents):
            raise ValueError(f"observations of shape {tuple(observation.shape)}; the policy expects "
                             f"[..., {len(self.agents)} agents, {self.description.observation_size}]")
        if self.description.action_mask and mask is None:
            raise ValueError("this policy was trained with action masks: pass action_mask= (one row of flags per "
                             "agent)")
        if mask is not None and bool((~mask).all(-1).any()):
            raise ValueError("an action mask allows no action: every agent needs at least one legal action")
        rows = observation.shape[:-2]
        flat = observation.reshape(-1, *observation.shape[-2:]).to(self.device)
        mode = self.deterministic if deterministic is None else deterministic
        if mode and self._plain is not None:
            masks = None if mask is None else mask.reshape(-1, *mask.shape[-2:]).to(self.device)
            params = self._plain(flat)
            if self._plain.distribution_class is torch.distributions.Categorical:  # its mode: the most probable
                action = params.argmax(-1)  # action, read from the logits (softmax keeps their order)
            else:
                action = deterministic_action(self._plain.distribution(params, masks))
            if self.clip:
                action = torch.maximum(torch.minimum(action, self.action_high), self.action_low)
            return action.reshape(*rows, *action.shape[1:])
        entries = {keys.OBSERVATION: flat}
        if mask is not None:
            entries[MASK_KEY] = mask.reshape(-1, *mask.shape[-2:]).to(self.device)
        td = TensorDict({self.group: TensorDict(entries, batch_size=flat.shape[:2])}, batch_size=flat.shape[:1],
                        device=self.device)
        with set_exploration_type(ExplorationType.DETERMINISTIC if mode else ExplorationType.RANDOM):
            action = self.actor(td).get((self.group, keys.ACTION))
        if self.clip:
            action = torch.maximum(torch.minimum(action, self.action_high), self.action_low)
        return action.reshape(*rows, *action.shape[1:])


class TeamPolicy(nn.Module):
    """The trained policies of an env with several agent groups, as one callable: each agent acts with its group's
    :class:`AgentsPolicy` (``policy[group]``, what export writes, one file per group).

    It takes PettingZoo's parallel API, ``{agent: observation}`` -> ``{agent: action}`` (any agents, of any groups),
    VMAS's list of every agent's observations in the env's order, or ``{group: [..., agents, obs]}`` (each group's
    stacked observations) -> ``{group: actions}``; ``action_mask`` in the same format.

    Example:
        >>> policy = load_policy("runs/simple-tag")
        >>> env = policy.make_env()
        >>> observations, infos = env.reset(seed=0)
        >>> observations, rewards, terminations, truncations, infos = env.step(policy(observations))
    """

    def __init__(self, actor: TensorDictModuleBase, config: TrainConfig, description: EnvDescription,
                 agents: Mapping[str, Sequence[str]], device: str | torch.device = "cpu",
                 deterministic: bool = True) -> None:
        super().__init__()
        if not description.teams:
            raise ValueError("TeamPolicy acts for several agent groups; this env has "
                             f"{'one group' if description.group else 'one agent'}: use ppo_td.load_policy")
        groups = description.group_names
        if list(agents) != groups:
            raise ValueError(f"agents given for the groups {list(agents)}; the policy's groups are {groups}")
        actors = team_members(actor, groups, keys.ACTION)
        self.config, self.description = config, description
        self.policies = nn.ModuleDict({team.group: AgentsPolicy(actors[team.group], config, team,
                                                                agents[team.group], device, deterministic)
                                       for team in description.teams})
        self.group_of = {agent: group for group, members in agents.items() for agent in members}
        """Each agent's group."""
        names, _ = env_agents(config)
        self.order = names if set(names) == set(self.group_of) else list(self.group_of)
        """Every agent in the env's order (what VMAS's lists follow)."""

    def __repr__(self) -> str:
        inner = ", ".join(repr(p).removeprefix("AgentsPolicy") for p in self.policies.values())
        return f"TeamPolicy({inner})"

    def __getitem__(self, group: str) -> AgentsPolicy:
        if group not in self.policies:
            raise KeyError(f"no agent group {group!r}; the groups are {list(self.policies)}")
        return self.policies[group]

    @property
    def groups(self) -> list[str]:
        return list(self.policies)

    @property
    def agents(self) -> list[str]:
        return list(self.order)

    @property
    def device(self) -> torch.device:
        return next(iter(self.policies.values())).device

    def make_env(self, num_envs: int = 1, render_mode: str | None = None) -> Any:
        """The env these policies were trained on, as its library gives it (see :meth:`AgentsPolicy.make_env`)."""
        return next(iter(self.policies.values())).make_env(num_envs, render_mode)

    @torch.no_grad()
    def forward(self, observations: Any, action_mask: Any = None, deterministic: bool | None = None) -> Any:
        """The agents' actions for ``observations`` (see the class), in the same format."""
        if isinstance(observations, Mapping):
            if observations and not all(k in self.group_of for k in observations) and all(
                    k in self.policies for k in observations):  # {group: stacked}
                masks = dict(action_mask or {})
                return {g: self.policies[g](obs, masks.get(g), deterministic)
                        for g, obs in observations.items()}
            unknown = [a for a in observations if a not in self.group_of]
            if unknown:
                raise ValueError(f"observations of {unknown}, which are neither agents of this env "
                                 f"{self.agents} nor its groups {self.groups}")
            masks = dict(action_mask or {})
            out: dict[str, Any] = {}
            for group, policy in self.policies.items():
                mine = {a: o for a, o in observations.items() if self.group_of[a] == group}
                if mine:
                    given = {a: m for a, m in masks.items() if a in mine}
                    out.update(policy(mine, given or None, deterministic))
            return {a: out[a] for a in observations}
        if isinstance(observations, list):
            if len(observations) != len(self.order):
                raise ValueError(f"{len(observations)} observations for the {len(self.order)} agents {self.order}: "
                                 "give one per agent, in this order")
            masks = action_mask if action_mask is not None else [None] * len(self.order)
            acted: dict[str, Any] = {}
            for group, policy in self.policies.items():
                rows = [i for i, a in enumerate(self.order) if self.group_of[a] == group]
                group_masks = [masks[i] for i in rows]
                actions = policy([observations[i] for i in rows],
                                 None if any(m is None for m in group_masks) else group_masks, deterministic)
                acted.update({self.order[i]: a for i, a in zip(rows, actions, strict=True)})
            return [acted[a] for a in self.order]
        raise ValueError(f"observations as {type(observations).__name__}: the agents of several groups take "
                         "PettingZoo's {agent: observation} dict, VMAS's list of every agent's observations, or "
                         "{group: [..., agents, obs]} (a stacked array per group)")


def load_agents_policy(state: dict[str, Any], config: TrainConfig, device: str | torch.device = "cpu",
                       deterministic: bool = True) -> AgentsPolicy | TeamPolicy:
    """The :class:`AgentsPolicy` of a multi-agent checkpoint ``state`` (read by ``load_policy``)."""
    from ppo_td.envs import build_env
    from ppo_td.models import make_actor_critic
    from ppo_td.persist.checkpoint import check_compatible, load_weights

    built = build_env(dataclasses.replace(runnable_here(config.env), num_envs=1))
    try:
        check_compatible(state, built.description)
        actor, _ = make_actor_critic(built.description, config.model)
        description = built.description
    finally:
        built.close()
    load_weights(actor, state, "actor")
    if description.teams:
        return TeamPolicy(actor, config, description, team_agents(config, description), device=device,
                          deterministic=deterministic)
    return AgentsPolicy(actor, config, description, agent_names(config, description.num_agents), device=device,
                        deterministic=deterministic)
