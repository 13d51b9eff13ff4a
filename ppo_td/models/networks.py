"""ppo_td's networks as plain ``nn.Module``\\ s: tensors in, tensors out, with the published init.

:class:`PolicyNet` maps an observation to its distribution's parameters and builds
that distribution; :class:`ValueNet` maps it to V(s). The factories in
:mod:`ppo_td.models.factory` wrap them in TorchRL's ``ProbabilisticActor`` and
``ValueOperator`` (what TorchRL's collectors and ``ClipPPOLoss`` run); ppo_td's fast
collector and loss call the very same modules on plain tensors, so both paths use the
same parameters and the same operations.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torchrl.modules import MLP

from ppo_td import keys
from ppo_td.config import ModelConfig
from ppo_td.models.activations import Tanh

PARAM_KEYS = {"logits": keys.LOGITS, "loc": keys.LOC, "scale": keys.SCALE, "noise": keys.ACTION_NOISE}
"""The TensorDict entry of each distribution parameter a :class:`PolicyNet` returns."""

ACTIVATIONS = {"tanh": Tanh, "relu": nn.ReLU, "elu": nn.ELU}  # Tanh: nn.Tanh, numpy's kernel on large tensors


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


def init_layers_(net: nn.Module, config: ModelConfig, head_gain: float | None) -> nn.Module:
    """``net``'s linear layers initialized as ``config`` says: orthogonally (:func:`init_orthogonal_` with
    ``config.hidden_gain`` and ``head_gain``), or with ``config.orthogonal_init=False`` left at PyTorch's default
    initialization. Returns ``net``."""
    return init_orthogonal_(net, config.hidden_gain, head_gain) if config.orthogonal_init else net


def mlp(in_features: int, out_features: int, config: ModelConfig, head_gain: float | None) -> nn.Module:
    """TorchRL's ``MLP`` with ``config``'s widths and activation, initialized by :func:`init_layers_`.

    ``head_gain=None`` builds a trunk: the hidden layers only, the last one activated.
    """
    net = MLP(
        in_features=in_features,
        out_features=out_features,
        num_cells=list(config.hidden_sizes) if head_gain is not None else list(config.hidden_sizes[:-1]),
        activation_class=ACTIVATIONS[config.activation],
        activate_last_layer=head_gain is None,
    )
    return init_layers_(net, config, head_gain)


class GaussianHead(nn.Module):
    """Mean from ``net``, standard deviation from a state-independent learned log-std (CleanRL's actor_logstd), or
    with :class:`ScalarStdHead` the std itself."""

    def __init__(self, net: nn.Module, action_dim: int, log_std_init: float) -> None:
        super().__init__()
        self.net = net
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.net(features)
        return loc, self.log_std.exp().expand_as(loc)


class ScalarStdHead(nn.Module):
    """Mean from ``net``, the standard deviation a learned parameter itself (``model.std_type='scalar'``: rsl_rl's
    default ``std_type``), kept at 1e-6 or more as rsl_rl clamps it. An optimizer step moves the std by about the
    learning rate whatever its size, where a log-std moves it by about that fraction of itself."""

    MIN_STD = 1e-6

    def __init__(self, net: nn.Module, action_dim: int, log_std_init: float) -> None:
        super().__init__()
        self.net = net
        self.std = nn.Parameter(torch.full((action_dim,), float(math.exp(log_std_init))))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.net(features)
        return loc, self.std.clamp(min=self.MIN_STD).expand_as(loc)


class SharedFeatures:
    """The trunk output of one input, for a policy and a value net that share their trunk: set as both nets'
    ``shared_features`` (by the fast loss, for one minibatch), the second net to read the same input object reuses
    the first's features instead of running the trunk again. Both nets still run (their hooks fire)."""

    def __init__(self) -> None:
        self.input: Any = None
        self.output: Any = None


def _trunk_features(net: nn.Module, observation: Any) -> Any:
    if net.trunk is None:
        return observation
    cache = net.shared_features
    if cache is not None and cache.input is observation:
        return cache.output
    out = net.trunk(observation)
    if cache is not None:
        cache.input, cache.output = observation, out
    return out


class PolicyNet(nn.Module):
    """Observation -> distribution parameters (``param_names``), and the distribution they define.

    ``trunk`` (optional, shared with a :class:`ValueNet`) runs first; ``head`` returns the
    parameters: logits, or ``(loc, scale)`` through a :class:`GaussianHead`.
    ``distribution_class(**params, **distribution_kwargs)`` (plus ``mask=`` when masked) is
    the action distribution, exactly as the TorchRL actor wrapping this module builds it.
    """

    def __init__(self, head: nn.Module, param_names: tuple[str, ...], distribution_class: type,
                 distribution_kwargs: dict[str, Any] | None = None, masked: bool = False,
                 trunk: nn.Module | None = None) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = head
        self.param_names = tuple(param_names)
        self.distribution_class = distribution_class
        self.distribution_kwargs = dict(distribution_kwargs or {})
        self.masked = masked
        self.shared_features: SharedFeatures | None = None

    def forward(self, observation: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The parameters for ``observation``; ``extra`` inputs go to the head after the features (a gSDE head's
        noise matrix, :mod:`ppo_td.models.gsde`)."""
        return self.head(_trunk_features(self, observation), *extra)

    def distribution(self, params: torch.Tensor | tuple[torch.Tensor, ...],
                     mask: torch.Tensor | None = None) -> torch.distributions.Distribution:
        """The action distribution for ``params`` (this module's output) and the legal-action ``mask``."""
        values = params if isinstance(params, tuple) else (params,)
        kwargs = dict(zip(self.param_names, values, strict=True))
        if self.masked:
            kwargs["mask"] = mask
        return self.distribution_class(**kwargs, **self.distribution_kwargs)


class ValueNet(nn.Module):
    """Observation -> state value ``[..., 1]``; ``trunk`` (optional) is shared with a :class:`PolicyNet`."""

    def __init__(self, head: nn.Module, trunk: nn.Module | None = None) -> None:
        super().__init__()
        self.trunk = trunk
        self.head = head
        self.shared_features: SharedFeatures | None = None

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.head(_trunk_features(self, observation))
