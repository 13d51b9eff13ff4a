"""Actor and critic as TorchRL TensorDict modules over ppo_td's networks, sized from the env's description."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs import EnvBase
from torchrl.modules import IndependentNormal, MaskedCategorical, ProbabilisticActor, TanhNormal, ValueOperator

from ppo_td import keys
from ppo_td.config import ModelConfig
from ppo_td.envs import MASK_KEY, EnvDescription, import_attr
from ppo_td.envs.description import ObservationSpace
from ppo_td.envs.multiagent import describe_any
from ppo_td.models.distributions import MaskedMultiCategorical
from ppo_td.models.encoders import EncoderFactory, check_encoder, features, make_encoder
from ppo_td.models.gsde import NOISE_KEY, GSDEHead, GSDENormal
from ppo_td.models.multiagent import make_agent_actor_critic, make_team_actor_critic
from ppo_td.models.networks import PARAM_KEYS, GaussianHead, PolicyNet, ScalarStdHead, ValueNet, init_layers_, mlp
from ppo_td.models.recurrent import make_core, recurrent_actor, recurrent_critic


def _description(env: EnvDescription | EnvBase) -> EnvDescription:
    return env if isinstance(env, EnvDescription) else describe_any(env)


def read_space(desc: EnvDescription, config: ModelConfig, role: str) -> ObservationSpace:
    """The part of ``desc``'s observation that the ``role`` network ('actor' or 'critic') reads: the Dict entries
    ``config.actor_keys`` / ``config.critic_keys`` name (every entry where they are empty).

    Raises:
        ValueError: keys given for an observation that is not a Dict, or naming an entry it lacks (the message
            lists its entries).
    """
    chosen = config.actor_keys if role == "actor" else config.critic_keys
    space = desc.observation_space
    if not chosen:
        return space
    setting = f"model.{role}_keys"
    if space.kind != "dict":
        raise ValueError(f"{setting}={list(chosen)} picks entries of a Dict observation; this env's observation is "
                         f"{space}: leave {setting} empty, or give the env a Dict observation of the groups (a "
                         "Gymnasium Dict space; a TorchRL env's entries kept apart with env.observation_dict)")
    entries = dict(space.entries)
    missing = [k for k in chosen if k not in entries]
    if missing:
        raise ValueError(f"{setting} names {missing}, not entries of this env's observation {space}: choose among "
                         f"{sorted(entries)}")
    return ObservationSpace("dict", entries=tuple((k, entries[k]) for k in sorted(chosen)))


def _encoder(desc: EnvDescription, config: ModelConfig, encoder: EncoderFactory | None,
             role: str = "actor") -> tuple[nn.Module | None, int]:
    """A fresh encoder of the observation entries the ``role`` network reads (``encoder``, else
    ``config.encoder``) and its output size."""
    space = read_space(desc, config, role)
    if encoder is None and ":" in config.encoder:
        encoder = import_attr(config.encoder, "model.encoder")
    if encoder is None:
        module = make_encoder(space, config.encoder, config.scale_images)
        return module, features(module, space)
    module = encoder(space)
    if not isinstance(module, nn.Module):
        raise TypeError(f"the encoder factory {getattr(encoder, '__name__', encoder)!r} returned a "
                        f"{type(module).__name__} for {space}; it must return an nn.Module")
    size = check_encoder(module, space)
    chosen = config.actor_keys if role == "actor" else config.critic_keys
    return (SelectEntries(module, tuple(k for k, _ in space.entries)) if chosen else module), size


class SelectEntries(nn.Module):
    """A user's encoder of some of a Dict observation's entries (model.actor_keys / critic_keys), given those
    entries only: what it was built for and probed on, never the others (the critic's privileged ones)."""

    def __init__(self, encoder: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.encoder, self.names = encoder, names
        self.out_features = getattr(encoder, "out_features", None)

    def forward(self, observation: TensorDictBase) -> torch.Tensor:
        return self.encoder(observation.select(*self.names))


def _policy_net(desc: EnvDescription, config: ModelConfig, head_in: int, trunk: nn.Module | None,
                hidden: bool, device: torch.device | None = None) -> PolicyNet:
    """The policy head for ``desc``'s actions: logits (masked where the env has a mask) or a Gaussian.

    ``hidden``: the head has ``config.hidden_sizes`` (else one linear layer, after a shared trunk)."""
    def head_layers(out: int) -> nn.Module:
        if hidden:
            return mlp(head_in, out, config, config.policy_head_gain)
        return init_layers_(nn.Linear(head_in, out), config, config.policy_head_gain)

    if desc.action_kind != "box" and config.exploration == "gsde":
        raise ValueError(f"model.exploration='gsde' explores Box actions; this env's are {desc.action_kind}: use "
                         "model.exploration='gaussian'")
    if desc.action_kind != "box":
        if desc.action_kind == "discrete":
            dist = MaskedCategorical if desc.action_mask else torch.distributions.Categorical
            kwargs = {}
        else:
            dist, kwargs = MaskedMultiCategorical, {"nvec": list(desc.action_nvec)}
        masked = desc.action_mask
        return PolicyNet(head_layers(desc.action_size), ("logits",), dist, kwargs, masked=masked, trunk=trunk)
    if config.exploration == "gsde":  # the last hidden features feed the state-dependent noise
        body = mlp(head_in, config.hidden_sizes[-1], config, None) if hidden and config.hidden_sizes else None
        width = config.hidden_sizes[-1] if body is not None else head_in
        mean = init_layers_(nn.Linear(width, desc.action_size), config, config.policy_head_gain)
        return PolicyNet(GSDEHead(body, mean, config.log_std_init), ("loc", "scale", "noise"), GSDENormal, {},
                         trunk=trunk)
    kind = ScalarStdHead if config.std_type == "scalar" else GaussianHead
    head = kind(head_layers(desc.action_size), desc.action_size, config.log_std_init)
    if config.squash_actions:
        dist, kwargs = TanhNormal, {"low": torch.tensor(desc.action_low, device=device),
                                "high": torch.tensor(desc.action_high, device=device)}
    else:  # the sample (and its log-prob) is stored unclipped; the env clips it (EnvConfig.clip_actions)
        dist, kwargs = IndependentNormal, {}
    return PolicyNet(head, ("loc", "scale"), dist, kwargs, trunk=trunk)


def wrap_policy(net: PolicyNet) -> ProbabilisticActor:
    """``net`` as TorchRL's ``ProbabilisticActor``: reads ``"observation"`` (and the mask), writes the
    distribution parameters, ``"action"`` and its log-prob."""
    out_keys = [PARAM_KEYS[name] for name in net.param_names]
    dist_keys = dict(zip(net.param_names, out_keys, strict=True))
    if net.masked:
        dist_keys["mask"] = MASK_KEY
    reads = [keys.OBSERVATION] + ([NOISE_KEY] if isinstance(net.head, GSDEHead) else [])
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=reads, out_keys=out_keys),
        in_keys=dist_keys, out_keys=[keys.ACTION], distribution_class=net.distribution_class,
        distribution_kwargs=net.distribution_kwargs, return_log_prob=True,
    )


def wrap_value(net: ValueNet) -> ValueOperator:
    """``net`` as TorchRL's ``ValueOperator``: ``"observation"`` -> ``"state_value"``."""
    return ValueOperator(net, in_keys=[keys.OBSERVATION], out_keys=[keys.STATE_VALUE])


def make_actor(env: EnvDescription | EnvBase, config: ModelConfig,
               encoder: EncoderFactory | None = None, device: torch.device | str | None = None) -> ProbabilisticActor:
    """Policy: observation -> (encoder) -> MLP -> logits -> (masked) Categorical action, or -> (loc, scale) ->
    Gaussian action.

    Both write the action and its log-prob. ``env`` is an :class:`~ppo_td.envs.EnvDescription`
    (or a TorchRL env, described once). ``encoder(space) -> nn.Module`` replaces ``config.encoder``
    (see :mod:`ppo_td.models.encoders`). ``device``: where the parameters live (initialized on the CPU first,
    so a seed gives the same initial weights on every device).

    Example:
        >>> actor = make_actor(built.description, ModelConfig())
        >>> actor(built.env.reset())["action"].shape
        torch.Size([32])
    """
    desc, where = _description(env), _device(device)
    trunk, size = _encoder(desc, config, encoder)
    if config.recurrent != "none":
        core = _core(config, trunk, size, "actor")
        net = _policy_net(desc, config, config.recurrent_size, trunk=None, hidden=True, device=where)
        return recurrent_actor(net, trunk, core, _param_keys(net)).to(where)
    return wrap_policy(_policy_net(desc, config, size, trunk=trunk, hidden=True, device=where)).to(where)


def make_critic(env: EnvDescription | EnvBase, config: ModelConfig,
                encoder: EncoderFactory | None = None, device: torch.device | str | None = None) -> ValueOperator:
    """State-value network: observation -> (encoder) -> MLP -> ``state_value`` (parameters on ``device``)."""
    desc = _description(env)
    trunk, size = _encoder(desc, config, encoder, "critic")
    if config.recurrent != "none":
        core = _core(config, trunk, size, "critic")
        net = ValueNet(mlp(config.recurrent_size, 1, config, config.value_head_gain))
        return recurrent_critic(net, trunk, core).to(_device(device))
    return wrap_value(ValueNet(mlp(size, 1, config, config.value_head_gain), trunk=trunk)).to(_device(device))


def _core(config: ModelConfig, encoder: nn.Module | None, size: int, prefix: str) -> nn.Module:
    input_key = keys.OBSERVATION if encoder is None else f"{prefix}_features"
    return make_core(config.recurrent, input_key, size, config.recurrent_size, prefix)


def _param_keys(net: PolicyNet) -> list:
    return [PARAM_KEYS[name] for name in net.param_names]


def _device(device: torch.device | str | None) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


def make_actor_critic(env: EnvDescription | EnvBase, config: ModelConfig, encoder: EncoderFactory | None = None,
                      device: torch.device | str | None = None) -> tuple[ProbabilisticActor, ValueOperator]:
    """Actor and critic for ``env``: separate networks (each with its own encoder), or one shared trunk (the
    encoder and the hidden layers) if ``config.shared_trunk``.

    A shared trunk is one module inside both networks: its parameters are the same
    tensors, trained by both losses.
    """
    desc = _description(env)
    if (desc.teams or desc.group is not None) and config.exploration == "gsde":
        raise ValueError("model.exploration='gsde' is for one-agent envs; the agents' networks explore with a "
                         "Gaussian: use model.exploration='gaussian'")
    if (desc.teams or desc.group is not None) and (config.actor_keys or config.critic_keys):
        raise ValueError("model.actor_keys and model.critic_keys pick a one-agent Dict observation's entries; for "
                         "the agents' critic use model.critic_scope ('agent', 'team' or 'state')")
    read_space(desc, config, "actor"), read_space(desc, config, "critic")  # a wrong entry refused before building
    if desc.teams:  # several agent groups: each its own networks
        return make_team_actor_critic(desc, config, _device(device))
    if desc.group is not None:  # a multi-agent env's group: per-agent networks (ppo_td.models.multiagent)
        return make_agent_actor_critic(desc, config, _device(device))
    if config.recurrent != "none" and config.shared_recurrent:
        return _shared_recurrent(desc, config, encoder, _device(device))
    if not config.shared_trunk:
        return make_actor(desc, config, encoder, device), make_critic(desc, config, encoder, device)
    encoding, size = _encoder(desc, config, encoder)
    layers = [] if encoding is None else [encoding]
    if config.hidden_sizes:
        layers.append(mlp(size, config.hidden_sizes[-1], config, None))
        size = config.hidden_sizes[-1]
    if not layers:
        raise ValueError("model.shared_trunk with no hidden layers and no encoder shares nothing: give "
                         "model.hidden_sizes, or set shared_trunk=False")
    trunk = layers[0] if len(layers) == 1 else nn.Sequential(*layers)
    where = _device(device)
    policy = _policy_net(desc, config, size, trunk=trunk, hidden=False, device=where)
    value = ValueNet(init_layers_(nn.Linear(size, 1), config, config.value_head_gain), trunk=trunk)
    return wrap_policy(policy).to(where), wrap_value(value).to(where)


def _shared_recurrent(desc: EnvDescription, config: ModelConfig, encoder: EncoderFactory | None,
                      where: torch.device) -> tuple[ProbabilisticActor, nn.Module]:
    """One encoder and one recurrent core in both networks; with ``shared_trunk`` the hidden layers too."""
    encoding, size = _encoder(desc, config, encoder)
    core = _core(config, encoding, size, "shared")
    size = config.recurrent_size
    if config.shared_trunk and config.hidden_sizes:
        trunk = mlp(size, config.hidden_sizes[-1], config, None)
        size = config.hidden_sizes[-1]
        policy = _policy_net(desc, config, size, trunk=trunk, hidden=False, device=where)
        value = ValueNet(init_layers_(nn.Linear(size, 1), config, config.value_head_gain), trunk=trunk)
    else:
        policy = _policy_net(desc, config, size, trunk=None, hidden=True, device=where)
        value = ValueNet(mlp(size, 1, config, config.value_head_gain))
    actor = recurrent_actor(policy, encoding, core, _param_keys(policy))
    return actor.to(where), recurrent_critic(value, encoding, core).to(where)
