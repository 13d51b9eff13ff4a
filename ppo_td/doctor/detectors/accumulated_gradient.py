"""Item 9: gradients that are not cleared between optimizer steps. A backward after a step adds onto the gradient
that step already used (``zero_grad`` missing, or called on another optimizer or module); or ``zero_grad`` runs
between the backward and the step, which then steps with no gradient."""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import filename_of, format_line, getline, line_number

ZERO_GRAD_FIX = ("call zero_grad() on the optimizer that steps these parameters once per minibatch, before the "
                 "backward: optimizer.zero_grad(); loss.backward(); optimizer.step()")


class AccumulatedGradient(Detector):
    KINDS = {9: ('gradients accumulate across optimizer steps', 4)}

    def __init__(self) -> None:
        self.checked: dict[int, int] = {}  # param id -> the step after which its gradient was checked
        self.pending: dict[int, tuple[Backward, tuple, list]] = {}  # param id -> (backward that added onto the
        # gradient of its last step, that step, the parameters zero_grad did clear)
        self.reached: dict[int, set[int]] = {}  # optimizer id -> parameters a backward reached since its step
        self.stepped_with_grad: set[int] = set()  # parameters whose last step had a gradient to apply

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        by_id = {id(p): p for p in a.params()} if any(pid in a._stepped_at for pid in record.params) else {}
        fresh, cleared = [], []
        for pid in record.params:
            param, stepped = by_id.get(pid), a._stepped_at.get(pid)
            if param is None or stepped is None or pid not in self.stepped_with_grad:
                continue
            holds = param.grad is not None and not param.grad.is_sparse and bool(torch.any(param.grad))
            if not holds:
                self.pending.pop(pid, None)  # cleared before this backward: what was added earlier is gone
                if self.checked.get(pid) != stepped[0]:
                    cleared.append(param)
            elif self.checked.get(pid) != stepped[0]:
                fresh.append(pid)  # the first backward since the step that used this gradient adds onto it
            self.checked[pid] = stepped[0]
        for pid in fresh:
            self.pending[pid] = (record, a._stepped_at[pid], cleared)
        for opt in a.optimizers.values():
            held = {id(p) for g in opt.param_groups for p in g["params"]}
            self.reached.setdefault(id(opt), set()).update(record.params & held)

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        for p in params:
            if a.grad_norm(p):
                self.stepped_with_grad.add(id(p))
            else:
                self.stepped_with_grad.discard(id(p))
        stale = [(p, self.pending.pop(id(p))) for p in params if id(p) in self.pending]
        if stale:
            record, (step, line, earlier), cleared = stale[0][1]
            names = ", ".join(a.named(p) for p, _ in stale[:4]) + (f" (+{len(stale) - 4} more)" if len(stale) > 4
                                                                    else "")
            other = (f"; zero_grad cleared other parameters ({', '.join(a.named(p) for p in cleared[:3])}), not "
                     "these: it ran on another optimizer or module" if cleared else "")
            a.add(9, "gradients accumulate across optimizer steps: nothing clears them before the backward",
                  f"backward #{record.index} added onto the gradient {earlier} had stepped at {line} (step #{step}), "
                  f"and {name} steps {names} with the sum at {where}{other}. Every step then follows the sum of "
                  "all earlier gradients", ZERO_GRAD_FIX, record.where, made=record.where)
        reached = self.reached.pop(id(opt), set())
        lost = [p for p in params if id(p) in reached and (p.grad is None or (
            a.grad_norm(p) == 0 and _zero_grad_line(where, a, p)))]
        if not lost:
            return
        a.explained.update(id(p) for p in lost)
        last = next((b for b in reversed(a._backwards) if b.params & {id(p) for p in lost}), None)
        a.add(9, "zero_grad between backward and step: the step has no gradient",
              f"{name} steps at {where}, but the gradient that backward #{last.index if last else '?'} "
              f"{'at ' + last.where + ' ' if last else ''}put on {', '.join(a.named(p) for p in lost[:4])} was "
              "cleared before it", ZERO_GRAD_FIX, where, made=_zero_grad_line(where, a, lost[0]))


def _zero_grad_line(step_line: str, a: Audit, param: torch.Tensor) -> str:
    """The user's ``zero_grad`` call between the last backward that reached ``param`` and the step, read from the
    source (no hook sees it); "" when there is none."""
    last = next((b for b in reversed(a._backwards) if id(param) in b.params), None)
    if last is None:
        return ""
    filename, start, end = filename_of(last.where), line_number(last.where), line_number(step_line)
    if start is None or end is None or filename_of(step_line) != filename:
        return ""
    for n in range(start + 1, end):
        text = getline(filename, n)
        if "zero_grad" in text:
            return format_line(filename, n, text)
    return ""


DETECTOR = AccumulatedGradient
