"""Item 5: a non-finite loss before its backward; non-finite or exploding gradients before a step."""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector


class NonFinite(Detector):
    ITEM = 5

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        if any(not torch.isfinite(t.detach()).all() for t in record.tensors):
            a.add(5, "non-finite loss", f"the loss passed to backward #{record.index} is not finite",
                  "look for log(0), division by a zero std (add eps), exp of a large log-ratio; "
                  "check observations and rewards for NaN/inf", record.where)

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        dense = [p for p in params if p.grad is not None and not p.grad.is_sparse]
        if not dense:
            return
        bad = [a.named(p) for p in dense if not torch.isfinite(p.grad).all()]
        if bad:
            a.add(5, "non-finite gradients", f"{', '.join(bad[:4])} before {name}'s step",
                  "find the NaN/inf source in the loss (log of 0, std of a 1-element batch); "
                  "clip_grad_norm_ does not repair NaN", where)
            return
        norm = sum(float(torch.linalg.vector_norm(p.grad)) ** 2 for p in dense) ** 0.5  # (one float per gradient:
        if norm > a.explode_threshold:  # parameters may sit on several devices)
            a.add(5, "exploding gradient norm", f"global grad norm {norm:.3g} before {name}'s step",
                  "clip with torch.nn.utils.clip_grad_norm_(params, 0.5), normalize advantages and "
                  "observations, lower the learning rate", where)


DETECTOR = NonFinite
