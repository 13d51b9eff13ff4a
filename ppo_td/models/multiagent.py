"""Actor and critic for an agent group: per-agent networks (:func:`agent_mlp`: one MLP shared by the agents, or
TorchRL's ``MultiAgentMLP`` with a copy per agent) under ``ProbabilisticActor`` and ``ValueOperator``, reading and
writing the group's entries (``("agents", "observation")`` ->
``("agents", "action")``, ``("agents", "state_value")``).

IPPO and MAPPO are one setting apart (``ModelConfig.critic_scope``): each agent's value from its own observation
(IPPO, de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft Multi-Agent Challenge?"), from
all agents' observations (MAPPO's centralised critic, Yu et al. 2022, "The Surprising Effectiveness of PPO in
Cooperative Multi-Agent Games", sec. 3), or from the env's global state beside the agent's own observation (the
paper's agent-specific global state, its sec. 4.2). ``share_params`` gives the agents one network (each acting on
its own observation; the paper shares parameters among homogeneous agents) or one each.

The networks follow the one-agent defaults: orthogonal initialization (gain sqrt(2) hidden, 0.01 policy head, 1
value head: the MAPPO paper's too), tanh MLPs. For Box actions each agent's network outputs its mean and its
standard deviation (TorchRL's ``NormalParamExtractor``, as TorchRL's MAPPO tutorial and BenchMARL do), not the
one-agent state-independent log-std: at the multi-agent learning rates (BenchMARL's 5e-5) a free log-std parameter
barely moves, and the policy stays as noisy as it started (measured: a per-agent reward of 0.51 after 600k frames
of VMAS navigation). The policy reads only its agent's observation (decentralised execution), whatever the critic
reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn
from torchrl.modules import (
    MLP,
    IndependentNormal,
    MaskedCategorical,
    MultiAgentMLP,
    NormalParamExtractor,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)

from ppo_td import keys
from ppo_td.config import ModelConfig
from ppo_td.envs import MASK_KEY, EnvDescription
from ppo_td.models.networks import ACTIVATIONS, mlp


def agent_mlp(n_inputs: int, n_outputs: int, desc: EnvDescription, config: ModelConfig, head_gain: float,
              centralised: bool = False, device: torch.device | None = None) -> nn.Module:
    """Each agent's network over ``desc``'s agents (``[..., agents, n_inputs]`` -> ``[..., agents, n_outputs]``),
    with ``config``'s widths and activation, initialized orthogonally (PyTorch's default with
    ``config.orthogonal_init=False``).

    Shared parameters: one plain MLP applied to every agent's row (:class:`SharedMLP`; the same function as
    TorchRL's ``MultiAgentMLP(share_params=True)``, without its per-call parameter swap), and for a centralised
    network one pass per env step whose output every agent reads (:class:`TeamMLP`: the agents' inputs are the same
    concatenation, so ``MultiAgentMLP`` computes the same value once per agent). Per-agent parameters: TorchRL's
    ``MultiAgentMLP``, each agent's copy of a weight initialized on its own."""
    if not config.hidden_sizes:
        raise ValueError("model.hidden_sizes=() with a multi-agent env: the agents' networks need hidden layers")
    if config.share_params:
        if centralised:
            return TeamMLP(mlp(desc.num_agents * n_inputs, n_outputs, config, head_gain).to(device), desc.num_agents)
        return SharedMLP(mlp(n_inputs, n_outputs, config, head_gain).to(device))
    if len(set(config.hidden_sizes)) != 1:
        raise ValueError(f"model.hidden_sizes={config.hidden_sizes} with model.share_params=False: TorchRL's "
                         "MultiAgentMLP takes one width for all its layers (e.g. (256, 256))")
    net = MultiAgentMLP(n_agent_inputs=n_inputs, n_agent_outputs=n_outputs, n_agents=desc.num_agents,
                        centralized=centralised, share_params=False, device=device,
                        depth=len(config.hidden_sizes), num_cells=config.hidden_sizes[0],
                        activation_class=ACTIVATIONS[config.activation])
    if not config.orthogonal_init:
        return net
    weights = [q for name, q in net.named_parameters() if name.endswith("weight")]
    with torch.no_grad():
        for name, q in net.named_parameters():
            if name.endswith("bias"):
                q.zero_()
                continue
            gain = head_gain if q is weights[-1] else config.hidden_gain
            for matrix in q:  # per-agent weights: [agents, out, in]
                nn.init.orthogonal_(matrix, gain=gain)
    return net


class SharedMLP(nn.Module):
    """One network for all agents of a group: ``net`` applied to each agent's row of ``[..., agents, features]``."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.net(inputs)


class TeamMLP(nn.Module):
    """A centralised network with parameters shared among the agents: ``net`` reads all agents' inputs
    (``[..., agents, features]``, concatenated) once per env step, and every agent gets its output
    (``[..., agents, outputs]``, a broadcast view: the gradient sums over the agents)."""

    def __init__(self, net: nn.Module, num_agents: int) -> None:
        super().__init__()
        self.net = net
        self.num_agents = num_agents

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if inputs.shape[-2] != self.num_agents:
            raise ValueError(f"a team network over {self.num_agents} agents got inputs of shape {tuple(inputs.shape)} "
                             "([..., agents, features] expected)")
        out = self.net(inputs.flatten(-2))
        return out.unsqueeze(-2).expand(*out.shape[:-1], self.num_agents, out.shape[-1])


class PerAgentMLPs(nn.Module):
    """A per-agent ``MultiAgentMLP``'s function (``share_params=False``, not centralised) as plain modules: each
    agent's own MLP, given its slice of the stacked parameters, on its row of ``[..., agents, features]``. What an
    exported file holds (TorchScript's tracer and ``torch.export`` cannot follow ``MultiAgentMLP``'s vmapped call over
    its ``TensorDictParams``); the same values within float rounding (separate products instead of a batched one).
    """

    def __init__(self, net: MultiAgentMLP) -> None:
        super().__init__()
        if net.share_params or net.centralized:
            raise ValueError("PerAgentMLPs copies a MultiAgentMLP with per-agent parameters that is not centralised")
        self.nets = nn.ModuleList()
        for i in range(net.n_agents):
            with torch.random.fork_rng(devices=[]):  # the initial weights, overwritten below, draw from torch's RNG
                agent = MLP(in_features=net.n_agent_inputs, out_features=net.n_agent_outputs, depth=net.depth,
                            num_cells=net.num_cells, activation_class=net.activation_class)
            agent.load_state_dict({".".join(key): value[i].detach().clone()
                                   for key, value in net.params.items(True, True)})
            self.nets.append(agent.to(next(iter(net.parameters())).device))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.stack([agent(inputs[..., i, :]) for i, agent in enumerate(self.nets)], dim=-2)


def plain_agent_network(net: nn.Module) -> nn.Module:
    """The group policy's network (a :class:`GroupPolicy`'s ``net``) with a per-agent ``MultiAgentMLP`` replaced by
    :class:`PerAgentMLPs` (its ``NormalParamExtractor`` kept): what tracers can follow. Any other network is
    returned as it is."""
    head = net[1] if type(net) is nn.Sequential and len(net) == 2 and type(net[1]) is NormalParamExtractor else None
    body = net[0] if head is not None else net
    if type(body) is not MultiAgentMLP or body.share_params or body.centralized:
        return net
    return nn.Sequential(PerAgentMLPs(body), head) if head is not None else PerAgentMLPs(body)


class StateAndObservation(nn.Module):
    """Each agent's input for a critic of the global state: the state (``[..., state]``, one per env copy) beside
    the agent's own observation (``[..., agents, obs]``)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, state: torch.Tensor, observation: torch.Tensor) -> torch.Tensor:
        shared = state.unsqueeze(-2).expand(*observation.shape[:-1], state.shape[-1])
        return self.net(torch.cat([shared, observation], dim=-1))


def make_agent_actor(desc: EnvDescription, config: ModelConfig,
                     device: torch.device | None = None) -> ProbabilisticActor:
    """The group's policy: a ``ProbabilisticActor`` reading each agent's observation (and mask) and writing its
    ``("agents", "action")`` and log-prob (``("agents", "action_log_prob")``)."""
    group, obs = desc.group, desc.observation_size
    if desc.action_kind == "multi_discrete":
        raise ValueError("a multi-agent env with MultiDiscrete actions: ppo_td's multi-agent policies take Discrete "
                         "or Box actions")
    if desc.action_kind == "discrete":
        net = agent_mlp(obs, desc.action_size, desc, config, config.policy_head_gain, device=device)
        module = TensorDictModule(net, in_keys=[(group, keys.OBSERVATION)], out_keys=[(group, keys.LOGITS)])
        dist_keys = {"logits": (group, keys.LOGITS)}
        dist, kwargs = (MaskedCategorical if desc.action_mask else torch.distributions.Categorical), {}
        if desc.action_mask:
            dist_keys["mask"] = (group, MASK_KEY)
    else:
        # each agent's mean and standard deviation from its network (TorchRL's MAPPO tutorial and BenchMARL): the
        # scale output is mapped by a softplus biased so that it starts at exp(model.log_std_init)
        net = agent_mlp(obs, 2 * desc.action_size, desc, config, config.policy_head_gain, device=device)
        scale = math.exp(config.log_std_init)
        head = nn.Sequential(net, NormalParamExtractor(scale_mapping=f"biased_softplus_{scale}"))
        module = TensorDictModule(head, in_keys=[(group, keys.OBSERVATION)],
                                  out_keys=[(group, keys.LOC), (group, keys.SCALE)])
        dist_keys = {"loc": (group, keys.LOC), "scale": (group, keys.SCALE)}
        if config.squash_actions:
            dist, kwargs = TanhNormal, {"low": torch.tensor(desc.action_low, device=device),
                                        "high": torch.tensor(desc.action_high, device=device)}
        else:  # stored unclipped; the env clips it (VMAS's clamp_actions, set from env.clip_actions)
            dist, kwargs = IndependentNormal, {}
    return ProbabilisticActor(module, in_keys=dist_keys, out_keys=[(group, keys.ACTION)], distribution_class=dist,
                              distribution_kwargs=kwargs, return_log_prob=True,
                              log_prob_key=(group, "action_log_prob"))


def make_agent_critic(desc: EnvDescription, config: ModelConfig, device: torch.device | None = None) -> ValueOperator:
    """The group's critic, writing each agent's ``("agents", "state_value")`` from what ``config.critic_scope``
    says it sees."""
    group, obs = desc.group, desc.observation_size
    value_key = (group, keys.STATE_VALUE)
    if config.critic_scope == "state":
        if desc.state_shape is None:
            raise ValueError("model.critic_scope='state' needs an env with a global state (a PettingZoo env with "
                             "state()); this one has none: use 'team' (all agents' observations) or 'agent'")
        if len(desc.state_shape) != 1:
            raise ValueError(f"model.critic_scope='state' reads a flat state vector; this env's state has shape "
                             f"{desc.state_shape}: use 'team' or 'agent'")
        size = desc.state_shape[0]
        net = StateAndObservation(agent_mlp(size + obs, 1, desc, config, config.value_head_gain, device=device))
        return ValueOperator(net, in_keys=["state", (group, keys.OBSERVATION)], out_keys=[value_key])
    net = agent_mlp(obs, 1, desc, config, config.value_head_gain, centralised=config.critic_scope == "team",
                    device=device)
    return ValueOperator(net, in_keys=[(group, keys.OBSERVATION)], out_keys=[value_key])


def make_agent_actor_critic(desc: EnvDescription, config: ModelConfig,
                            device: torch.device | None = None) -> tuple[ProbabilisticActor, ValueOperator]:
    """Actor and critic of ``desc``'s agent group (separate networks: the critic may see more than the policy)."""
    if desc.group is None:
        raise ValueError("make_agent_actor_critic builds networks for an agent group; this env has one agent: use "
                         "ppo_td.models.make_actor_critic")
    if config.recurrent != "none" or config.shared_trunk:
        raise ValueError("a multi-agent env takes separate feed-forward actor and critic networks: set "
                         "model.recurrent='none' and model.shared_trunk=False")
    return make_agent_actor(desc, config, device), make_agent_critic(desc, config, device)


def make_team_actor_critic(desc: EnvDescription, config: ModelConfig, device: torch.device | None = None
                           ) -> tuple[TensorDictSequential, TensorDictSequential]:
    """Actor and critic of an env with several agent groups (``desc.teams``): each group's own
    (:func:`make_agent_actor_critic`, the same ``config``), in one ``TensorDictSequential`` each (the groups' modules
    read and write disjoint entries). Each group's parts are found again by :func:`team_members`."""
    if not desc.teams:
        raise ValueError("make_team_actor_critic builds networks for several agent groups; this env has "
                         f"{'one, ' + repr(desc.group) if desc.group is not None else 'one agent'}: use "
                         "ppo_td.models.make_actor_critic")
    pairs = [make_agent_actor_critic(team, config, device) for team in desc.teams]
    return TensorDictSequential(*(a for a, _ in pairs)), TensorDictSequential(*(c for _, c in pairs))


def team_members(module: TensorDictModuleBase, groups: list[str], key: str) -> dict[str, TensorDictModuleBase]:
    """Each group's part of a team actor or critic: the module of a ``TensorDictSequential`` that writes the group's
    ``key`` (``"action"`` for an actor, ``"state_value"`` for a critic), one per group.

    Raises:
        ValueError: ``module`` is not one module per group as :func:`make_team_actor_critic` builds (the message says
            what was found and how to pass a team's own parts).
    """
    parts = list(module.module) if type(module) is TensorDictSequential else [module]
    found: dict[str, list[TensorDictModuleBase]] = {g: [] for g in groups}
    for part in parts:
        for group in groups:
            if (group, key) in part.out_keys:
                found[group].append(part)
    if len(parts) != len(groups) or any(len(v) != 1 for v in found.values()):
        raise ValueError(f"a module for the agent groups {groups} must be a TensorDictSequential of one module per "
                         f"group, each writing (group, {key!r}) (as ppo_td.models.make_team_actor_critic builds); "
                         f"got {type(module).__name__} writing {list(module.out_keys)}")
    return {g: v[0] for g, v in found.items()}


_GROUP_PARAMS = ("loc", "scale", "logits")
_GROUP_DISTRIBUTIONS = (TanhNormal, IndependentNormal, torch.distributions.Categorical, MaskedCategorical)


class GroupPolicy:
    """A group policy :func:`make_agent_actor` built, on plain tensors (what ppo_td's fast loss calls): the agents'
    network (with its ``NormalParamExtractor`` for Box actions) on the group's observations, and the action
    distribution built as the actor's ``SafeProbabilisticModule`` builds it (the same class and keyword
    arguments). Found by :func:`group_networks`."""

    trunk = None  # no trunk shared with the critic
    shared_features = None

    def __init__(self, net: nn.Module, names: tuple[str, ...], distribution_class: type,
                 distribution_kwargs: dict, observation_key: tuple[str, str], mask_key: tuple[str, str] | None,
                 param_keys: list[tuple[str, str]], log_prob_key: tuple[str, str]) -> None:
        self.net, self.names = net, names
        self.distribution_class, self.distribution_kwargs = distribution_class, distribution_kwargs
        self.observation_key, self.mask_key = observation_key, mask_key
        self.masked = mask_key is not None
        self.param_keys, self.log_prob_key = param_keys, log_prob_key
        """Where the actor writes the distribution's parameters and the action's log-probability."""

    def __call__(self, observation: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.net(observation)

    def parameters(self) -> Iterator[nn.Parameter]:
        """The network's parameters (where they are tells where the policy runs)."""
        return self.net.parameters()

    def distribution(self, params: torch.Tensor | tuple[torch.Tensor, ...],
                     mask: torch.Tensor | None = None) -> torch.distributions.Distribution:
        kwargs = dict(zip(self.names, params if isinstance(params, tuple) else (params,), strict=True))
        if self.masked:
            kwargs["mask"] = mask
        return self.distribution_class(**kwargs, **self.distribution_kwargs)


def group_policy(actor: nn.Module) -> GroupPolicy | None:
    """The plain-tensor policy of an agent group's actor when it is exactly as :func:`make_agent_actor` builds it
    (what ppo_td's fast loss and agents collector run); else None, and the TorchRL module runs."""
    if type(actor) is not ProbabilisticActor or len(actor.module) != 2:
        return None
    wrapper, dist_module = actor.module[0], actor.module[1]
    if type(wrapper) is not TensorDictModule or len(wrapper.in_keys) != 1:
        return None
    observation_key = wrapper.in_keys[0]
    if not (isinstance(observation_key, tuple) and len(observation_key) == 2
            and observation_key[1] == keys.OBSERVATION):
        return None
    group, net = observation_key[0], wrapper.module
    body = net[0] if (type(net) is nn.Sequential and len(net) == 2
                      and type(net[1]) is NormalParamExtractor) else net
    if type(body) not in (SharedMLP, MultiAgentMLP):
        return None
    names = tuple(dist_module.dist_keys)
    reads = dict(zip(names, dist_module.in_keys, strict=True))
    params = tuple(name for name in names if name != "mask")
    mask_key = reads.get("mask")
    same = (all(name in _GROUP_PARAMS for name in params)
            and list(wrapper.out_keys) == [reads[name] for name in params]
            and dist_module.distribution_class in _GROUP_DISTRIBUTIONS
            and (mask_key is None or mask_key == (group, MASK_KEY))
            and dist_module.return_log_prob and dist_module.num_samples is None
            and list(actor.out_keys) == [*wrapper.out_keys, (group, keys.ACTION), dist_module.log_prob_key])
    if not same:
        return None
    return GroupPolicy(net, params, dist_module.distribution_class, dist_module.distribution_kwargs,
                       observation_key, mask_key, list(wrapper.out_keys), dist_module.log_prob_key)


def group_networks(actor: nn.Module, critic: nn.Module) -> tuple[GroupPolicy, nn.Module] | None:
    """The plain-tensor policy and value network of an agent group's actor and critic, when both are exactly as
    :func:`make_agent_actor` and :func:`make_agent_critic` build them (a critic of the agents' observations:
    ``critic_scope`` 'team' or 'agent'); else None, and the loss runs the TorchRL modules."""
    policy = group_policy(actor)
    if policy is None or type(critic) is not ValueOperator:
        return None
    group = policy.observation_key[0]
    same = (list(critic.in_keys) == [policy.observation_key]
            and list(critic.out_keys) == [(group, keys.STATE_VALUE)]
            and type(critic.module) in (SharedMLP, TeamMLP, MultiAgentMLP))
    return (policy, critic.module) if same else None
