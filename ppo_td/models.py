"""Actor and critic as TensorDict modules, with the published orthogonal init."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs import EnvBase
from torchrl.modules import (
    MLP,
    ActorValueOperator,
    IndependentNormal,
    MaskedCategorical,
    ProbabilisticActor,
    TanhNormal,
    ValueOperator,
)

from ppo_td import keys
from ppo_td.config import ModelConfig
from ppo_td.envs import action_nvec, has_action_mask, is_discrete
from ppo_td.masking import MASK_KEY, MaskedMultiCategorical

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def init_orthogonal_(net: nn.Module, hidden_gain: float, head_gain: float | None) -> nn.Module:
    """Orthogonal weights and zero biases for every ``nn.Linear`` in ``net``.

    The last linear layer gets ``head_gain`` (policy head 0.01, value head 1.0);
    the others get ``hidden_gain`` (sqrt(2)). ``head_gain=None`` treats every
    layer as hidden (a shared trunk). Returns ``net`` for chaining.
    """
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        is_head = head_gain is not None and i == len(linears) - 1
        nn.init.orthogonal_(layer.weight, gain=head_gain if is_head else hidden_gain)
        nn.init.zeros_(layer.bias)
    return net


def _mlp(in_features: int, out_features: int, config: ModelConfig, head_gain: float | None) -> nn.Module:
    net = MLP(
        in_features=in_features,
        out_features=out_features,
        num_cells=list(config.hidden_sizes) if head_gain is not None else list(config.hidden_sizes[:-1]),
        activation_class=_ACTIVATIONS[config.activation],
        activate_last_layer=head_gain is None,
    )
    return init_orthogonal_(net, config.hidden_gain, head_gain)


class GaussianHead(nn.Module):
    """Mean from ``net``, standard deviation from a state-independent learned log-std (CleanRL's actor_logstd)."""

    def __init__(self, net: nn.Module, action_dim: int, log_std_init: float) -> None:
        super().__init__()
        self.net = net
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.net(features)
        return loc, self.log_std.exp().expand_as(loc)


def _sizes(env: EnvBase) -> tuple[int, int]:
    obs_dim = env.observation_spec[keys.OBSERVATION].shape[-1]
    nvec = action_nvec(env)
    return obs_dim, sum(nvec) if nvec is not None else int(env.action_spec_unbatched.shape[-1])


def _logits_head(module: nn.Module, in_key: str, env: EnvBase) -> ProbabilisticActor:
    """Categorical (Discrete) or per-dimension categoricals (MultiDiscrete), masked when the env has a mask."""
    masked = has_action_mask(env)
    in_keys = {"logits": keys.LOGITS, "mask": MASK_KEY} if masked else {"logits": keys.LOGITS}
    if is_discrete(env):
        dist, kwargs = (MaskedCategorical if masked else torch.distributions.Categorical), {}
    else:
        dist, kwargs = MaskedMultiCategorical, {"nvec": action_nvec(env)}
    return ProbabilisticActor(
        TensorDictModule(module, in_keys=[in_key], out_keys=[keys.LOGITS]),
        in_keys=in_keys, out_keys=[keys.ACTION], distribution_class=dist, distribution_kwargs=kwargs,
        return_log_prob=True,
    )


def _policy_head(module: nn.Module, in_key: str, env: EnvBase, config: ModelConfig) -> ProbabilisticActor:
    """Logits head for (multi-)discrete actions; Gaussian (optionally tanh-squashed) head for Box actions."""
    if action_nvec(env) is not None:
        return _logits_head(module, in_key, env)
    action_dim = int(env.action_spec_unbatched.shape[-1])
    head = TensorDictModule(GaussianHead(module, action_dim, config.log_std_init), in_keys=[in_key],
                            out_keys=[keys.LOC, keys.SCALE])
    if config.squash_actions:
        space = env.action_spec_unbatched.space
        dist, kwargs = TanhNormal, {"low": space.low.clone(), "high": space.high.clone()}
    else:  # the sample (and its log-prob) is stored unclipped; the env clips it (EnvConfig.clip_actions)
        dist, kwargs = IndependentNormal, {}
    return ProbabilisticActor(head, in_keys=[keys.LOC, keys.SCALE], out_keys=[keys.ACTION],
                              distribution_class=dist, distribution_kwargs=kwargs, return_log_prob=True)


def make_actor(env: EnvBase, config: ModelConfig) -> ProbabilisticActor:
    """Policy: observation -> logits -> Categorical action, or -> (loc, scale) -> Gaussian action.

    Both write the action and its log-prob.

    Example:
        >>> actor = make_actor(env, ModelConfig())
        >>> actor(env.reset())["action"].shape == env.action_spec.shape
        True
    """
    obs_dim, n_out = _sizes(env)
    return _policy_head(_mlp(obs_dim, n_out, config, config.policy_head_gain), keys.OBSERVATION, env, config)


def make_critic(env: EnvBase, config: ModelConfig) -> ValueOperator:
    """State-value network: observation -> ``state_value``."""
    obs_dim, _ = _sizes(env)
    net = _mlp(obs_dim, 1, config, config.value_head_gain)
    return ValueOperator(net, in_keys=[keys.OBSERVATION], out_keys=[keys.STATE_VALUE])


def make_actor_critic(env: EnvBase, config: ModelConfig) -> tuple[TensorDictModule, TensorDictModule]:
    """Actor and critic for ``env``: separate networks, or one shared trunk if configured."""
    if not config.shared_trunk:
        return make_actor(env, config), make_critic(env, config)
    obs_dim, n_actions = _sizes(env)
    width = config.hidden_sizes[-1]
    trunk = TensorDictModule(_mlp(obs_dim, width, config, None), in_keys=[keys.OBSERVATION], out_keys=[keys.HIDDEN])
    policy_net = init_orthogonal_(nn.Linear(width, n_actions), 1.0, config.policy_head_gain)
    policy = _policy_head(policy_net, keys.HIDDEN, env, config)
    value_net = init_orthogonal_(nn.Linear(width, 1), 1.0, config.value_head_gain)
    value = ValueOperator(value_net, in_keys=[keys.HIDDEN], out_keys=[keys.STATE_VALUE])
    both = ActorValueOperator(trunk, policy, value)
    return both.get_policy_operator(), both.get_value_operator()
