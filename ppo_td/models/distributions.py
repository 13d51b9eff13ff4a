"""Distributions ppo_td's policies use that torch and TorchRL lack."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import distributions as D
from torch.nn import functional as F  # noqa: N812 - torch's own name
from torchrl.modules import IndependentNormal, MaskedCategorical

_NO_SAMPLE_SHAPE = torch.Size()


class MaskedMultiCategorical(D.Distribution):
    """Independent (masked) categoricals, one per MultiDiscrete dimension.

    ``logits`` and ``mask`` hold the dimensions side by side (``sum(nvec)`` entries);
    the action holds one index per dimension. Log-prob and entropy are sums over
    dimensions; masked entries get zero probability and no gradient.
    """

    arg_constraints: dict = {}

    def __init__(self, logits: torch.Tensor, nvec: Sequence[int], mask: torch.Tensor | None = None) -> None:
        self.nvec = [int(n) for n in nvec]
        masks = mask.split(self.nvec, -1) if mask is not None else [None] * len(self.nvec)
        self.parts = [MaskedCategorical(logits=lg, mask=m) if m is not None else D.Categorical(logits=lg)
                      for lg, m in zip(logits.split(self.nvec, -1), masks, strict=True)]
        super().__init__(batch_shape=logits.shape[:-1], validate_args=False)

    def sample(self, sample_shape: torch.Size = _NO_SAMPLE_SHAPE) -> torch.Tensor:
        return torch.stack([p.sample(sample_shape) for p in self.parts], -1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return sum(p.log_prob(v) for p, v in zip(self.parts, value.unbind(-1), strict=True))

    def entropy(self) -> torch.Tensor:
        return sum(p.entropy() for p in self.parts)

    @property
    def mode(self) -> torch.Tensor:
        return torch.stack([p.probs.argmax(-1) for p in self.parts], -1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


_HALF_LOG_2PI = math.log(math.sqrt(2 * math.pi))  # torch's Normal.log_prob constant


class ClosedForm:
    """Sampling, log-prob and entropy of a diagonal Gaussian (TorchRL's ``IndependentNormal``) or an unmasked
    ``Categorical`` on plain tensors, without building ``torch.distributions`` objects.

    The fast collector and the fast loss call these once per step and once per minibatch; building the
    distribution objects (argument validation, broadcasting, lazy properties) cost about as much as the small
    networks themselves. The operations are torch's own ``Normal``/``Categorical`` code, in its order, so the
    samples, RNG use, log-probs and entropies are the same bits (``tests/test_distributions.py``). What the
    skipped argument validation caught when sampling, :meth:`sample` refuses too: NaN parameters (and, for the
    Gaussian, an infinite mean or a scale that is not positive), with a ``ValueError`` naming them.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @classmethod
    def of(cls, distribution_class: type, distribution_kwargs: dict, masked: bool) -> ClosedForm | None:
        """The closed form of ``distribution_class(**params, **distribution_kwargs)``, or None (then the
        distribution object is built)."""
        if distribution_kwargs or masked:
            return None
        if distribution_class is IndependentNormal:
            return cls("normal")
        if distribution_class is D.Categorical:
            return cls("categorical")
        return None

    def sample(self, params: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """An action and its log-prob (``Normal.rsample`` / ``Categorical.sample``, then ``log_prob``)."""
        if self.kind == "normal":
            loc, scale = params
            eps = torch.empty(loc.shape, dtype=loc.dtype, device=loc.device).normal_()
            action = loc + eps * scale
            log_prob = self._normal_log_prob(loc, scale, action, scale.log())
            if not bool(log_prob.isfinite().all()):  # NaN/inf mean, or a scale that is NaN, inf or <= 0
                raise ValueError("the policy's Gaussian parameters (loc, scale) hold NaN or inf values, or a scale "
                                 "<= 0: the network's parameters or its input overflowed")
            return action, log_prob
        if bool(params[0].isnan().any()):
            raise ValueError("the policy's logits hold NaN values: the network's parameters or its input overflowed")
        logits = self._normalized(params[0])
        probs = F.softmax(logits, dim=-1)
        action = torch.multinomial(probs.reshape(-1, logits.shape[-1]), 1, True).T.reshape(logits.shape[:-1])
        return action, self._categorical_log_prob(logits, action)

    def log_prob_entropy(self, params: tuple[torch.Tensor, ...],
                         action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-prob of ``action`` and the entropy, as ``log_prob`` and ``entropy`` compute them."""
        if self.kind == "normal":
            loc, scale = params  # two log(scale) nodes, as torch's two calls: the same gradients, bit for bit
            log_prob = self._normal_log_prob(loc, scale, action, scale.log())
            return log_prob, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(scale)).sum(-1)
        logits = self._normalized(params[0])
        log_prob = self._categorical_log_prob(logits, action)  # before the entropy, as the loss calls them
        probs = F.softmax(logits, dim=-1)
        return log_prob, -(torch.clamp(logits, min=torch.finfo(logits.dtype).min) * probs).sum(-1)

    @staticmethod
    def _normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, value: torch.Tensor,
                         log_scale: torch.Tensor) -> torch.Tensor:
        var = scale**2
        return (-((value - loc) ** 2) / (2 * var) - log_scale - _HALF_LOG_2PI).sum(-1)

    @staticmethod
    def _normalized(logits: torch.Tensor) -> torch.Tensor:
        return logits - logits.logsumexp(dim=-1, keepdim=True)

    @staticmethod
    def _categorical_log_prob(logits: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        value, log_pmf = torch.broadcast_tensors(value.long().unsqueeze(-1), logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)
