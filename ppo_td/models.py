"""Actor and critic as TensorDict modules, with the published orthogonal init."""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.envs import EnvBase
from torchrl.modules import MLP, ActorValueOperator, ProbabilisticActor, ValueOperator

from ppo_td import keys
from ppo_td.config import ModelConfig

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


def _sizes(env: EnvBase) -> tuple[int, int]:
    obs_dim = env.observation_spec[keys.OBSERVATION].shape[-1]
    return obs_dim, int(env.action_spec.space.n)


def _policy_head(module: nn.Module, in_key: str) -> ProbabilisticActor:
    return ProbabilisticActor(
        TensorDictModule(module, in_keys=[in_key], out_keys=[keys.LOGITS]),
        in_keys=[keys.LOGITS],
        out_keys=[keys.ACTION],
        distribution_class=torch.distributions.Categorical,
        return_log_prob=True,
    )


def make_actor(env: EnvBase, config: ModelConfig) -> ProbabilisticActor:
    """Categorical policy: observation -> logits -> action (+ its log-prob).

    Example:
        >>> actor = make_actor(env, ModelConfig())
        >>> actor(env.reset())["action"].shape == env.action_spec.shape
        True
    """
    obs_dim, n_actions = _sizes(env)
    return _policy_head(_mlp(obs_dim, n_actions, config, config.policy_head_gain), keys.OBSERVATION)


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
    policy = _policy_head(init_orthogonal_(nn.Linear(width, n_actions), 1.0, config.policy_head_gain), keys.HIDDEN)
    value_net = init_orthogonal_(nn.Linear(width, 1), 1.0, config.value_head_gain)
    value = ValueOperator(value_net, in_keys=[keys.HIDDEN], out_keys=[keys.STATE_VALUE])
    both = ActorValueOperator(trunk, policy, value)
    return both.get_policy_operator(), both.get_value_operator()
