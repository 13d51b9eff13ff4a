"""Item 5: a non-finite loss before its backward; non-finite or exploding gradients before a step."""

from __future__ import annotations

import math

import torch

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector


class NonFinite(Detector):
    KINDS = {5: ('non-finite or exploding values', 1)}

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        if any(not torch.isfinite(t.detach()).all() for t in record.tensors):
            a.add(5, "non-finite loss", f"the loss passed to backward #{record.index} is not finite",
                  "look for log(0), division by a zero std (add eps), exp of a large log-ratio; "
                  "check observations and rewards for NaN/inf", record.where)

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        norms = [(p, a.grad_norm(p)) for p in params if a.grad_norm(p) is not None]
        bad = [a.named(p) for p, n in norms if not math.isfinite(n)]
        if bad:
            a.add(5, "non-finite gradients", f"{', '.join(bad[:4])} before {name}'s step",
                  "find the NaN/inf source in the loss (log of 0, std of a 1-element batch); "
                  "clip_grad_norm_ does not repair NaN", where)
            return
        norm = math.sqrt(sum(n * n for _, n in norms))
        if norm > a.explode_threshold:
            a.add(5, "exploding gradient norm", f"global grad norm {norm:.3g} before {name}'s step",
                  "clip with torch.nn.utils.clip_grad_norm_(params, 0.5), normalize advantages and "
                  "observations, lower the learning rate", where)


DETECTOR = NonFinite
