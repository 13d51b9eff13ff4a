"""Distributions ppo_td's policies use that torch and TorchRL lack."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import distributions as D
from torchrl.modules import MaskedCategorical

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
