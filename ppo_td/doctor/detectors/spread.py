"""Item 16: advantages normalized over one sample (the standard deviation of one number is NaN) or over samples
that are all equal (zero spread: ``(x - mean) / (std + eps)`` divides by eps)."""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import called_by_user, caller


class Spread(Detector):
    KINDS = {16: ('advantages normalized over one sample or zero spread', 9)}
    calls = calls_without_grad = frozenset({torch.std, torch.Tensor.std})

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        x = args[0] if args else None
        if not torch.is_grad_enabled() or not torch.is_tensor(x) or not torch.is_tensor(result) or x.numel() == 0:
            return
        per = x.numel() // max(result.numel(), 1)  # samples behind each standard deviation
        if per <= 1:
            why = "the standard deviation of one sample is NaN (0 with correction=0): the advantages become NaN or 0"
        elif not bool(torch.any(result.detach() != 0)) and bool(torch.isfinite(result.detach()).all()):
            why = f"all {per} samples are equal (zero spread): (x - mean) / (std + eps) divides by eps"
        else:
            return
        if not called_by_user():
            return
        where = caller()
        a.add(16, "advantages normalized over one sample or with zero spread",
              f"std of a tensor of shape {list(x.shape)} at {where}: {why}",
              "normalize advantages over a minibatch of at least 2 samples (or the whole batch), and skip the "
              "normalization when the spread is 0: adv = (adv - adv.mean()) / (adv.std() + 1e-8) only if "
              "adv.numel() > 1", where, made=where)


DETECTOR = Spread
