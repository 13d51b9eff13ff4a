"""Distributions ppo_td's policies use that torch and TorchRL lack."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict.utils import expand_as_right
from torch import distributions as D
from torch.nn import functional as F  # noqa: N812 - torch's own name
from torchrl.modules import IndependentNormal, MaskedCategorical, TanhNormal

from ppo_td.models.gsde import GSDENormal

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
_TANH_LIMIT = {dtype: 1.0 - torch.finfo(dtype).resolution for dtype in (torch.float16, torch.bfloat16, torch.float32,
                                                                       torch.float64)}
"""Where TorchRL's safe tanh and atanh clamp (``1 - finfo(dtype).resolution``)."""


def _unit_bounds(kwargs: dict) -> bool:
    """``TanhNormal`` keyword arguments that are bounds of -1 and 1 only (its other settings at their defaults): the
    distribution is the safe tanh of a diagonal Gaussian, without an affine map after it."""
    if set(kwargs) - {"low", "high"}:
        return False
    low, high = kwargs.get("low", -1.0), kwargs.get("high", 1.0)
    return bool((torch.as_tensor(low) == -1.0).all()) and bool((torch.as_tensor(high) == 1.0).all())


class ClosedForm:
    """Sampling, log-prob and entropy of a diagonal Gaussian (TorchRL's ``IndependentNormal``; ppo_td's gSDE Gaussian,
    :class:`~ppo_td.models.gsde.GSDENormal`, whose sample is its mean plus the state-dependent noise), a
    ``Categorical``, TorchRL's ``MaskedCategorical`` with a boolean mask, or a tanh-normal with bounds -1 and 1
    (TorchRL's ``TanhNormal``: its safe tanh, no affine map after it; its entropy is sampled, :meth:`sample_log_prob`)
    on plain tensors, without building ``torch.distributions`` objects.

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
        if distribution_class is TanhNormal and not masked and _unit_bounds(distribution_kwargs):
            return cls("tanh_normal")
        if distribution_class is MaskedCategorical and masked and not distribution_kwargs:
            return cls("masked_categorical")
        if distribution_kwargs or masked:
            return None
        if distribution_class is IndependentNormal:
            return cls("normal")
        if distribution_class is GSDENormal:  # params (loc, scale, noise): the action is loc + noise
            return cls("gsde")
        if distribution_class is D.Categorical:
            return cls("categorical")
        return None

    def sample(self, params: tuple[torch.Tensor, ...],
               mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """An action and its log-prob (``Normal.rsample`` / ``Categorical.sample``, then ``log_prob``; the
        tanh-normal's ``rsample_and_log_prob``). ``mask``: the legal actions of a masked categorical."""
        if self.kind == "tanh_normal":
            loc, scale = params
            preimage = self._normal_sample(loc, scale, ())
            limit = _TANH_LIMIT[preimage.dtype]
            action = preimage.tanh().clamp(-limit, limit)  # TorchRL's safe tanh's value (its gradient past the
            # limit is not kept: the collectors sample without gradients)
            log_prob = self._torch_normal_log_prob(loc, scale, preimage) - self._tanh_log_det(preimage)
            if not bool(log_prob.isfinite().all()):
                raise ValueError("the policy's tanh-normal parameters (loc, scale) hold NaN or inf values, or a scale "
                                 "<= 0: the network's parameters or its input overflowed")
            return action, log_prob
        if self.kind in ("normal", "gsde"):
            loc, scale = params[:2]
            if self.kind == "gsde":  # GSDENormal's sample: the state-dependent noise, no draw
                action = loc + params[2]
            else:
                eps = torch.empty(loc.shape, dtype=loc.dtype, device=loc.device).normal_()
                action = loc + eps * scale
            log_prob = self._torch_normal_log_prob(loc, scale, action)
            if not bool(log_prob.isfinite().all()):  # NaN/inf mean, or a scale that is NaN, inf or <= 0
                raise ValueError("the policy's Gaussian parameters (loc, scale) hold NaN or inf values, or a scale "
                                 "<= 0: the network's parameters or its input overflowed")
            return action, log_prob
        nan = params[0].isnan()
        if bool((nan & mask if self.kind == "masked_categorical" and mask is not None else nan).any()):
            # (a masked policy's NaN at an illegal action is masked away, as MaskedCategorical masks it)
            raise ValueError("the policy's logits hold NaN values: the network's parameters or its input overflowed")
        logits = self._normalized(self._masked(params[0], mask))
        probs = F.softmax(logits, dim=-1)
        action = torch.multinomial(probs.reshape(-1, logits.shape[-1]), 1, True).T.reshape(logits.shape[:-1])
        if self.kind == "masked_categorical":
            return action, self._masked_log_prob(logits, action)
        return action, self._categorical_log_prob(logits, action)

    def log_prob_entropy(self, params: tuple[torch.Tensor, ...], action: torch.Tensor,
                         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-prob of ``action`` and the entropy, as ``log_prob`` and ``entropy`` compute them (the
        tanh-normal's entropy is None: it is sampled, :meth:`sample_log_prob`). ``mask``: the legal actions of a
        masked categorical."""
        if self.kind == "tanh_normal":  # TransformedDistribution.log_prob: the Jacobian term, then the base's
            loc, scale = params
            limit = _TANH_LIMIT[action.dtype]
            preimage = action.clamp(-limit, limit).atanh()  # TorchRL's safe atanh (the stored action has no grad)
            return (0.0 - self._tanh_log_det(preimage)) + self._torch_normal_log_prob(loc, scale, preimage), None
        if self.kind in ("normal", "gsde"):  # (a gSDE Gaussian's noise does not enter its log-prob or entropy)
            loc, scale = params[:2]  # scale's uses in torch's order (its gradients are summed in that order)
            log_prob = self._torch_normal_log_prob(loc, scale, action)
            return log_prob, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(scale)).sum(-1)
        if self.kind == "masked_categorical":
            logits = self._normalized(self._masked(params[0], mask))
            return self._masked_log_prob(logits, action), self._masked_entropy(logits, mask)
        logits = self._normalized(params[0])
        log_prob = self._categorical_log_prob(logits, action)  # before the entropy, as the loss calls them
        probs = F.softmax(logits, dim=-1)
        return log_prob, -(torch.clamp(logits, min=torch.finfo(logits.dtype).min) * probs).sum(-1)

    def sample_log_prob(self, params: tuple[torch.Tensor, ...], shape: tuple[int, ...]) -> torch.Tensor:
        """The log-prob of ``shape`` reparameterized draws of the tanh-normal (TorchRL's ``rsample_and_log_prob``,
        what ``ClipPPOLoss`` estimates the entropy with; the draws themselves are not computed: nothing reads
        them)."""
        loc, scale = params
        preimage = self._normal_sample(loc, scale, shape)
        return self._torch_normal_log_prob(loc, scale, preimage) - self._tanh_log_det(preimage)

    @staticmethod
    def _torch_normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """``Independent(Normal(loc, scale), 1).log_prob(value)`` with torch's operations in torch's order: the
        square, then the log (autograd sums the gradients of ``scale``'s several uses in the order they were
        made, so another order changes the last bits once the entropy uses ``scale`` too)."""
        var = scale**2
        log_scale = scale.log()
        return (-((value - loc) ** 2) / (2 * var) - log_scale - _HALF_LOG_2PI).sum(-1)

    @staticmethod
    def _normal_sample(loc: torch.Tensor, scale: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """``Normal.rsample(shape)``: standard normal noise of the extended shape, scaled and shifted."""
        eps = torch.empty((*shape, *loc.shape), dtype=loc.dtype, device=loc.device).normal_()
        return loc + eps * scale

    @staticmethod
    def _tanh_log_det(x: torch.Tensor) -> torch.Tensor:
        """``TanhTransform.log_abs_det_jacobian`` at ``x``, summed over the action's entries."""
        return (2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))).sum(-1)

    @staticmethod
    def _normalized(logits: torch.Tensor) -> torch.Tensor:
        return logits - logits.logsumexp(dim=-1, keepdim=True)

    def _masked(self, logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """A masked categorical's logits with the illegal actions at -inf (``MaskedCategorical._mask_logits``'s
        ``masked_fill`` for a boolean mask); the logits as they are for the other kinds."""
        if self.kind != "masked_categorical":
            return logits
        if mask is None:
            raise ValueError("a masked categorical policy needs the legal-action mask (\"action_mask\")")
        return logits.masked_fill(~mask, float("-inf"))

    @staticmethod
    def _masked_log_prob(logits: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """``MaskedCategorical.log_prob`` (its default cross-entropy form) of ``value`` under the normalized masked
        ``logits``; an illegal action's is -inf."""
        original_shape = None
        if logits.ndim > 2:  # the classes in the second dimension, as cross_entropy takes them
            logits = logits.permute(0, -1, *range(1, logits.ndim - 1))
        elif logits.ndim == 1 and value.ndim >= 1:
            if value.ndim >= 2:
                original_shape = value.shape
                value = value.flatten()
            logits = logits.unsqueeze(0).expand(value.shape + logits.shape)
        result = -F.cross_entropy(logits, value, reduction="none")
        if original_shape is not None:
            result = result.unflatten(0, original_shape)
        return torch.where(torch.isfinite(result), result, float("-inf"))

    @staticmethod
    def _masked_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``MaskedCategorical.entropy``: over the legal actions only, the illegal ones' logits at the dtype's
        smallest number."""
        illegal = (~expand_as_right(mask, logits)) | (~logits.isfinite())
        logits = torch.masked_fill(logits, illegal, torch.finfo(logits.dtype).min)
        # minus the log-sum-exp as the sum with its negation: the same bits and gradients as TorchRL's subtraction,
        # and no exp(a - b) of two of the policy's outputs, which the doctor reads as a PPO ratio whose old
        # log-probs carry gradient (tests/test_checkup.py)
        logits = logits + logits.logsumexp(-1, keepdim=True).neg()
        return -(logits * logits.exp()).sum(-1)

    @staticmethod
    def _categorical_log_prob(logits: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        value, log_pmf = torch.broadcast_tensors(value.long().unsqueeze(-1), logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)


def deterministic_action(dist: D.Distribution) -> torch.Tensor:
    """The action TorchRL's ``ExplorationType.DETERMINISTIC`` takes from ``dist``: its ``deterministic_sample``, else
    the mode of a discrete distribution or the mean (tensordict's fallback for torch's own distributions)."""
    if hasattr(dist, "deterministic_sample"):
        return dist.deterministic_sample
    return dist.mode if dist.has_enumerate_support else dist.mean
