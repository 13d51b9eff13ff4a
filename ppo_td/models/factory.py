"""Actor and critic as TorchRL TensorDict modules over ppo_td's networks, sized from the env's description."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs import EnvBase
from torchrl.modules import IndependentNormal, MaskedCategorical, ProbabilisticActor, TanhNormal, ValueOperator

from ppo_td import keys
from ppo_td.config import ModelConfig
from ppo_td.envs import MASK_KEY, EnvDescription, describe
from ppo_td.models.distributions import MaskedMultiCategorical
from ppo_td.models.networks import GaussianHead, PolicyNet, ValueNet, init_orthogonal_, mlp


def _description(env: EnvDescription | EnvBase) -> EnvDescription:
    return env if isinstance(env, EnvDescription) else describe(env)


def _check_flat(desc: EnvDescription) -> None:
    if len(desc.observation_shape) != 1:
        raise ValueError(f"observations of shape {desc.observation_shape}: ppo_td's MLP networks take flat "
                         "vectors. Flatten them (gymnasium.wrappers.FlattenObservation) or pass your own actor "
                         "and critic")


def _policy_net(desc: EnvDescription, config: ModelConfig, head_in: int, trunk: nn.Module | None) -> PolicyNet:
    """The policy head for ``desc``'s actions: logits (masked where the env has a mask) or a Gaussian."""
    def head_layers(out: int) -> nn.Module:
        if trunk is None:
            return mlp(head_in, out, config, config.policy_head_gain)
        return init_orthogonal_(nn.Linear(head_in, out), 1.0, config.policy_head_gain)

    if desc.action_kind != "box":
        if desc.action_kind == "discrete":
            dist = MaskedCategorical if desc.action_mask else torch.distributions.Categorical
            kwargs = {}
        else:
            dist, kwargs = MaskedMultiCategorical, {"nvec": list(desc.action_nvec)}
        masked = desc.action_mask
        return PolicyNet(head_layers(desc.action_size), ("logits",), dist, kwargs, masked=masked, trunk=trunk)
    head = GaussianHead(head_layers(desc.action_size), desc.action_size, config.log_std_init)
    if config.squash_actions:
        dist, kwargs = TanhNormal, {"low": torch.tensor(desc.action_low), "high": torch.tensor(desc.action_high)}
    else:  # the sample (and its log-prob) is stored unclipped; the env clips it (EnvConfig.clip_actions)
        dist, kwargs = IndependentNormal, {}
    return PolicyNet(head, ("loc", "scale"), dist, kwargs, trunk=trunk)


def wrap_policy(net: PolicyNet) -> ProbabilisticActor:
    """``net`` as TorchRL's ``ProbabilisticActor``: reads ``"observation"`` (and the mask), writes the
    distribution parameters, ``"action"`` and its log-prob."""
    param_keys = {"logits": keys.LOGITS, "loc": keys.LOC, "scale": keys.SCALE}
    out_keys = [param_keys[name] for name in net.param_names]
    dist_keys = dict(zip(net.param_names, out_keys, strict=True))
    if net.masked:
        dist_keys["mask"] = MASK_KEY
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=[keys.OBSERVATION], out_keys=out_keys),
        in_keys=dist_keys, out_keys=[keys.ACTION], distribution_class=net.distribution_class,
        distribution_kwargs=net.distribution_kwargs, return_log_prob=True,
    )


def wrap_value(net: ValueNet) -> ValueOperator:
    """``net`` as TorchRL's ``ValueOperator``: ``"observation"`` -> ``"state_value"``."""
    return ValueOperator(net, in_keys=[keys.OBSERVATION], out_keys=[keys.STATE_VALUE])


def make_actor(env: EnvDescription | EnvBase, config: ModelConfig) -> ProbabilisticActor:
    """Policy: observation -> logits -> (masked) Categorical action, or -> (loc, scale) -> Gaussian action.

    Both write the action and its log-prob. ``env`` is an :class:`~ppo_td.envs.EnvDescription`
    (or a TorchRL env, described once).

    Example:
        >>> actor = make_actor(built.description, ModelConfig())
        >>> actor(built.env.reset())["action"].shape
        torch.Size([32])
    """
    desc = _description(env)
    _check_flat(desc)
    return wrap_policy(_policy_net(desc, config, desc.observation_size, trunk=None))


def make_critic(env: EnvDescription | EnvBase, config: ModelConfig) -> ValueOperator:
    """State-value network: observation -> ``state_value``."""
    desc = _description(env)
    _check_flat(desc)
    return wrap_value(ValueNet(mlp(desc.observation_size, 1, config, config.value_head_gain)))


def make_actor_critic(env: EnvDescription | EnvBase, config: ModelConfig) -> tuple[ProbabilisticActor,
                                                                                   ValueOperator]:
    """Actor and critic for ``env``: separate networks, or one shared trunk if ``config.shared_trunk``.

    A shared trunk is one module inside both networks: its parameters are the same
    tensors, trained by both losses.
    """
    desc = _description(env)
    if not config.shared_trunk:
        return make_actor(desc, config), make_critic(desc, config)
    _check_flat(desc)
    width = config.hidden_sizes[-1]
    trunk = mlp(desc.observation_size, width, config, None)
    policy = _policy_net(desc, config, width, trunk=trunk)
    value = ValueNet(init_orthogonal_(nn.Linear(width, 1), 1.0, config.value_head_gain), trunk=trunk)
    return wrap_policy(policy), wrap_value(value)
