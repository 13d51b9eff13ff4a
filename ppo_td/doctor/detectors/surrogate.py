"""Item 12 (surrogate): the clipped surrogate ascended instead of descended, or with ``min`` and ``max`` swapped.

The advantage is the factor the user's code multiplies the ratio by (``ratio * adv``, or ``-adv * ratio`` with
the negation seen). The loss must fall as the ratio of an action with a positive advantage rises: the gradient of
the loss with respect to the ratio (``torch.autograd.grad`` onto the ratio's graph edge, the graph kept for the
user's own backward, no ``.grad`` touched) must have the opposite sign of the advantage. And the clipped objective
is pessimistic: of ``adv * ratio`` and ``adv * clip(ratio)`` it keeps the smaller (``torch.min``), or of their
negations the larger (``torch.max``)."""

from __future__ import annotations

import torch
from torch.autograd.graph import GradientEdge

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.origins import origin
from ppo_td.doctor.detectors.ratio import Ratio
from ppo_td.doctor.graph import below

SURROGATE_FIX = ("minimize the negated pessimistic objective: pg_loss = -torch.min(ratio * adv, torch.clamp(ratio, "
                 "1 - eps, 1 + eps) * adv).mean(), or CleanRL's torch.max(-adv * ratio, -adv * torch.clamp(ratio, "
                 "1 - eps, 1 + eps)).mean(); and add it to the loss with a + sign")


class Surrogate(Detector):
    KINDS = {12: ('a sign or min/max of the PPO loss is wrong', 5)}
    calls = frozenset({torch.Tensor.mul, torch.mul, torch.Tensor.neg})
    calls_without_grad = frozenset({torch.Tensor.neg})

    def __init__(self) -> None:
        self.negated: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(-x) -> (-x, x), constants only
        self.factors: dict[int, tuple[torch.Tensor, int, str]] = {}  # ratio node id -> (advantage, sign, line)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if func is torch.Tensor.neg:
            if torch.is_tensor(result) and not result.requires_grad and len(self.negated) < 64:
                self.negated[id(result)] = (result, args[0])
            return
        ratios = {id(s.node) for s in a.detector(Ratio).recent}
        for r, m in ((args[0], args[1]), (args[1], args[0])) if len(args) >= 2 else ():
            node = getattr(r, "grad_fn", None)
            if id(node) in ratios and torch.is_tensor(m) and not m.requires_grad and id(node) not in self.factors:
                negated = self.negated.get(id(m))
                advantage, sign = (negated[1], -1) if negated is not None and negated[0] is m else (m, 1)
                self.factors[id(node)] = (advantage.detach(), sign, origin(a, result.grad_fn))

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        used = [s for s in a.detector(Ratio).used if id(s.node) in self.factors]
        factors, self.factors, self.negated = self.factors, {}, {}
        if not used or len(record.tensors) != 1 or record.tensors[0].numel() != 1:
            return
        grads = torch.autograd.grad(record.tensors[0], [GradientEdge(s.node, 0) for s in used], retain_graph=True,
                                    allow_unused=True)
        loss_line = origin(a, roots[0]) or record.where
        for seen, grad in zip(used, grads, strict=True):
            advantage, sign, mul_line = factors[id(seen.node)]
            if grad is None or grad.shape != advantage.shape:
                continue
            clip = _clipping_node(record, seen)
            surrogate_line = (origin(a, clip) if clip is not None else "") or mul_line
            counted = (advantage.abs() > 1e-8) & (grad != 0)
            ascended = counted & (torch.sign(grad) == torch.sign(advantage))
            if int(counted.sum()) and int(ascended.sum()) * 2 > int(counted.sum()):
                a.add(12, "the clipped surrogate is ascended: the loss rises with the ratio of a good action",
                      f"backward #{record.index}: for {int(ascended.sum())} of {int(counted.sum())} samples the "
                      f"gradient of the loss with respect to the ratio (its log made at {seen.where}) has the sign "
                      "of the advantage: each step makes actions with a positive advantage less likely",
                      SURROGATE_FIX, record.where, made=", ".join(dict.fromkeys(
                          line for line in (surrogate_line, f"summed into the loss at {loss_line}") if line)))
                continue
            if clip is None:
                continue
            keeps_larger = type(clip).__name__.startswith("Maximum")
            if keeps_larger != (sign == -1):  # of the objectives adv * r the smaller, of their negations the larger
                which = "torch.max" if keeps_larger else "torch.min"
                terms = "adv * ratio" if sign == 1 else "-adv * ratio"
                a.add(12, "the clipped surrogate's min and max are swapped: it is optimistic, not pessimistic",
                      f"{which} of {terms} and its clipped twin at {surrogate_line or record.where} keeps "
                      f"{'the larger' if keeps_larger else 'the smaller'}: the clipping then never bounds the "
                      "step, it lets the ratio run off where that looks better",
                      SURROGATE_FIX, record.where, made=surrogate_line)


def _clipping_node(record: Backward, seen) -> object | None:
    """The elementwise min or max above the ratio in the loss's graph (the clipped surrogate's), or None."""
    for node in record.nodes.values():
        if type(node).__name__.startswith(("MaximumBackward", "MinimumBackward")) and below(
                node, {id(seen.node): seen.node}) is not None:
            return node
    return None


DETECTOR = Surrogate
