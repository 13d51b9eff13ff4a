"""Item 14: parameters that get gradients but that no optimizer holds: a network the loss trains is never
stepped (an optimizer built from the actor's parameters only, a critic left out)."""

from __future__ import annotations

import re

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import filename_of, format_line, getlines, neighbours


class Unoptimized(Detector):
    KINDS = {14: ('parameters no optimizer holds', 11)}

    def __init__(self) -> None:
        self.reached: dict[str, str] = {}  # module -> a backward line that reached it

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        for module in record.modules:
            self.reached.setdefault(module, record.where)

    def finish(self, a: Audit) -> None:
        if not a._steps or not a.optimizers:
            return
        held = {id(p) for o in a.optimizers.values() for g in o.param_groups for p in g["params"]}
        for module, where in self.reached.items():
            params = [p for p in a.modules[module].parameters() if p.requires_grad]
            if not params or any(id(p) in held for p in params) or not a.learns(module):
                continue
            made = _creation(a)
            a.add(14, f"{module} gets gradients but no optimizer holds its parameters: it never learns",
                  f"backward at {where} puts gradient on {a.some_params({module})}, but "
                  f"{', '.join(a.optimizers)} step{'s' if len(a.optimizers) == 1 else ''} other parameters only",
                  f"give the optimizer every trained parameter: torch.optim.Adam([*actor.parameters(), "
                  f"*critic.parameters()]) or agent.parameters() (or a second optimizer for {module})",
                  where, made=made, step=a._steps)


def _creation(a: Audit) -> str:
    """The user's line that made an optimizer, read from the source: ``NAME = ...optim...(`` in the file of its
    step (no hook sees an optimizer made)."""
    for name in a.optimizers:
        stepped = next((line for _, line, opt in a._stepped_at.values() if opt == name), "")
        pattern = re.compile(rf"^\s*(self\.)?{re.escape(name.split('#')[0])}\s*=.*optim", re.IGNORECASE)
        for filename in neighbours(filename_of(stepped)):
            for n, text in enumerate(getlines(filename), start=1):
                if pattern.search(text):
                    return format_line(filename, n, text)
    return ""


DETECTOR = Unoptimized
