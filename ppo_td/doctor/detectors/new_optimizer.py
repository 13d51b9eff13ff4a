"""Item 8: an optimizer created anew in every update (Adam's state restarts): a new optimizer of the same kind
stepping exactly the parameters another one stepped."""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector


class NewOptimizer(Detector):
    KINDS = {8: ('an optimizer created anew during training', 13)}

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, type, frozenset]] = {}  # optimizer id -> (name, kind, parameter ids)

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        if id(opt) in self.seen:
            return
        ids = frozenset(id(p) for p in params)
        earlier = [n for n, kind, held in self.seen.values() if kind is type(opt) and held == ids]
        self.seen[id(opt)] = (name, type(opt), ids)
        if earlier and any(i in a._stepped_at for i in ids):
            a.add(8, "an optimizer created anew for parameters another one already trained",
                  f"{name} ({type(opt).__name__}) first steps at {where} the very parameters {earlier[-1]} stepped "
                  f"before: its state (Adam's moment estimates, step counts) starts from zero again",
                  "create each optimizer once, before the training loop, and reuse it in every update", where)


DETECTOR = NewOptimizer
