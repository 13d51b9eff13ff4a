"""Item 4: a network that should learn gets no gradient (no loss since the optimizer's last step reached it, its
``.grad`` is None, or all-zero at every step), or is stepped again with the gradient of an earlier loss."""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.value_gradient import NO_GRADIENT_FIX


class NoGradient(Detector):
    KINDS = {4: ('parameters that should learn get no gradient', 10)}

    def __init__(self) -> None:
        self.last_backward: dict[int, int] = {}  # optimizer id -> backward calls seen at its last step
        self.nonzero: dict[int, list] = {}  # param id -> [param, steps with a gradient, steps with grad != 0]

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        since = a._backwards[self.last_backward.get(id(opt), 0):]
        self.last_backward[id(opt)] = len(a._backwards)
        reached = set().union(*(b.modules for b in since))
        ids = {id(p) for p in params}
        starving = [m for m in a.modules if m not in reached
                    and any(id(p) in ids for p in a.modules[m].parameters() if p.requires_grad)
                    and not all(id(p) in a.explained for p in a.modules[m].parameters() if p.requires_grad)]
        covered: set[int] = set()
        for module in starving:
            mine = [p for p in a.modules[module].parameters() if p.requires_grad]
            covered |= {id(p) for p in mine}
            last = since[-1] if since else None
            what = (f"the last one, backward #{last.index}, reaches "
                    f"{', '.join(sorted(last.modules)) or 'no audited parameter'}" if last else "no backward ran")
            stale = any(p.grad is not None and bool(torch.any(p.grad)) for p in mine)
            title = (f"{module} is stepped again with the gradient of an earlier loss" if stale else
                     f"{module} gets no gradient")
            fix = ("call zero_grad() before each backward, and step once after the backward calls of one update "
                   "(or sum the losses)") if stale else NO_GRADIENT_FIX
            a.add(4, title, f"{name} steps {module} at {where}, but no loss since its previous step reaches "
                            f"{module}'s parameters ({what}){'' if stale else a.cut_of(module)}",
                  fix, last.where if last else where)
        missing = [a.named(p) for p in params if p.grad is None and id(p) not in covered | a.explained]
        if missing:
            a.add(4, "parameters that should learn got no gradient",
                  f"no gradient before {name}'s step: {', '.join(missing[:4])}", NO_GRADIENT_FIX, where)
        for p in params:  # all-zero is judged over the whole audit: one clipped minibatch may be all-zero
            counts = self.nonzero.setdefault(id(p), [p, 0, 0])
            counts[1] += int(p.grad is not None)
            counts[2] += int(bool(a.grad_norm(p)))

    def finish(self, a: Audit) -> None:
        zero = [a.named(p) for p, present, nonzero in self.nonzero.values()
                if present and not nonzero and id(p) not in a.explained]
        if zero:
            a.add(4, "parameters that should learn got no gradient",
                  f"all-zero gradient at every one of {a._steps} optimizer step(s): {', '.join(zero[:4])}",
                  NO_GRADIENT_FIX, step=a._steps)


DETECTOR = NoGradient
