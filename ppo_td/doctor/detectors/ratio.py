"""Items 6 and 10: the PPO ratio's old log-probs. A ratio is ``exp(new_log_prob - old_log_prob)`` with the new
log-prob from an audited policy's forward. Wrong are old log-probs that carry gradient (recorded with their
graph), old log-probs recomputed from the current policy (the ratio is exactly 1 in every minibatch, so clipping
never acts), and old log-probs from another policy than the one trained (the ratio is not 1 on the first
minibatch after a rollout)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.autograd.graph import GradientEdge

from ppo_td.doctor.audit import Audit, Backward, Forward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import called_by_user, caller

FIRST_TOLERANCE = 1e-4  # |log ratio| on the first minibatch after a rollout: float rounding of a batched forward


@dataclass
class Seen:
    """One ratio: the exp node, the forward of its new log-prob, where it was made, its largest |log ratio|."""

    node: object
    forward: Forward
    where: str
    worst: float
    step: int
    ratio: torch.Tensor | None = None  # its values (detached)
    detached_at: str = ""
    bounds: tuple[float, float] | None = None  # the clip range it was clamped to


class Ratio(Detector):
    ITEM = 10
    calls = frozenset({torch.exp, torch.Tensor.exp, torch.Tensor.detach, torch.clamp, torch.Tensor.clamp, torch.clip,
                       torch.Tensor.clip})

    def __init__(self) -> None:
        self.rollout_step: int | None = None  # optimizer steps done at the latest forward under no_grad
        self.rollout_where = ""
        self.checked_rollout: int | None = None  # the rollout whose first ratio was checked
        self.after_step: list[Seen] = []  # ratios seen after the policy had been stepped
        self.recent: list[Seen] = []  # ratios since the last backward
        self.first_checked = False

    def forward(self, a: Audit, module: str, output, record: Forward | None) -> None:
        if record is None and not torch.is_grad_enabled() and self.rollout_step != a._steps:
            self.rollout_step, self.rollout_where = a._steps, caller()  # a rollout's forward (once per rollout)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if func is not torch.exp and func is not torch.Tensor.exp:
            node = args[0].grad_fn if args and torch.is_tensor(args[0]) else None
            seen = next((s for s in self.recent if node is not None and s.node is node), None)
            if seen is not None and func is torch.Tensor.detach:
                seen.detached_at = seen.detached_at or caller()
            elif seen is not None:
                low, high = (list(args[1:3]) + [None, None])[:2]
                low, high = kwargs.get("min", low), kwargs.get("max", high)
                if isinstance(low, (int, float)) and isinstance(high, (int, float)):
                    seen.bounds = (float(low), float(high))
            return
        x = args[0] if args else None
        if not torch.is_tensor(result) or result.grad_fn is None or not torch.is_tensor(x) or x.grad_fn is None:
            return
        if not type(x.grad_fn).__name__.startswith("SubBackward") or not called_by_user():
            return  # (an exp inside a distribution, TorchRL's loss ...: not the user's ratio)
        new, old = (n for n, _ in x.grad_fn.next_functions[:2])
        forward = a.forward_below_node(new)
        if forward is None or a.role(forward.module) != "policy":
            return
        where = caller()
        worst = float(x.detach().abs().max()) if x.numel() else 0.0
        seen = Seen(result.grad_fn, forward, where, worst, a._steps, result.detach())
        self.recent.append(seen)
        if old is not None and (carrier := a.forward_below_node(old)) is not None:
            a.add(10, "the ratio's old log-probs carry gradient: they were recorded with their graph",
                  f"the denominator of the ratio made at {where} comes from {carrier.module} forward "
                  f"#{carrier.index} at {carrier.where}, which ran with gradients on: the loss then also pushes "
                  "the old log-probs, through a graph that a step makes stale",
                  "record the rollout under torch.no_grad() (or store log_prob.detach()); the old log-probs are "
                  "constants of the update", where, made=carrier.chain or carrier.where)
        stepped = any(id(p) in a._stepped_at for p in a.modules[forward.module].parameters())
        if stepped:
            self.after_step.append(seen)
        if (self.rollout_step is not None and self.rollout_step == a._steps and self.checked_rollout != a._steps
                and old is None):
            self.checked_rollout = a._steps  # the first minibatch after a rollout: the policy that acted
            if worst > FIRST_TOLERANCE:
                a.add(6, "PPO ratio is not 1 on the first minibatch of the update",
                      f"max |log ratio| = {worst:.3g} at {where}, before any optimizer step since the rollout "
                      f"(its forwards at {self.rollout_where}): the old log-probs are not the trained policy's "
                      f"({forward.module})",
                      "record the old log-probs with the very network that is trained (not a copy), read them from "
                      "the right key, and recompute nothing between collection and update", where,
                      made=self.rollout_where)

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        recent, self.recent = self.recent, []  # the ratios of this loss: the policy must learn through one
        used = [seen for seen in recent if id(seen.node) in record.nodes]
        if used:
            _check_clipping(a, record, [seen for seen in used if seen.bounds is not None])
            return
        for seen in recent:
            if seen.forward.module not in record.modules:
                continue
            how = f"it was detached at {seen.detached_at}" if seen.detached_at else "it is not in the loss's graph"
            a.add(11, "the clipped surrogate does not reach the policy: only other terms train it",
                  f"backward #{record.index} reaches {seen.forward.module} (the entropy or another term), but not "
                  f"through the ratio made at {seen.where}: {how}; the advantage-weighted term is a constant",
                  "keep the ratio attached: ratio = (new_log_prob - old_log_prob).exp(), with new_log_prob from "
                  "this minibatch's forward; detach only the advantages and the old log-probs", record.where,
                  made=seen.detached_at or seen.where)
            return

    def finish(self, a: Audit) -> None:
        if len(self.after_step) >= 2 and all(s.worst == 0.0 for s in self.after_step):
            first = self.after_step[0]
            a.add(10, "the ratio is exactly 1 in every minibatch: its old log-probs are the current policy's",
                  f"all {len(self.after_step)} ratios made at {first.where} after the policy had been stepped "
                  f"have log ratio 0: new and old log-probs both come from {first.forward.module}'s forward of "
                  "this minibatch, so clipping never acts and PPO is a plain policy gradient",
                  "store the log-probs of the actions when they are taken (the rollout, under torch.no_grad()) and "
                  "use those as the old log-probs: ratio = (new_log_prob - rollout_log_prob).exp()",
                  first.where, made=first.where, step=a._steps)

    def check_first(self, a: Audit, log_ratio: torch.Tensor, tolerance: float, where: str) -> None:
        """:meth:`Audit.check_ratio`: the first minibatch's log ratio, given by the caller, must be 0."""
        if self.first_checked or a._steps:
            return
        self.first_checked = True
        worst = float(log_ratio.detach().abs().max())
        if worst > tolerance:
            a.add(6, "PPO ratio is not 1 on the first minibatch of the update",
                  f"max |log ratio| = {worst:.3g} before any optimizer step",
                  "the stored old log-probs are not the current policy's: record them with the same network "
                  "that is trained (not a stale copy), read them from the right key "
                  "(loss.tensor_keys.sample_log_prob), and recompute nothing between collection and update", where)


def _check_clipping(a: Audit, record: Backward, clamped: list[Seen]) -> None:
    """Item 12 (surrogate): the clipped objective -min(r A, clip(r) A) gives a ratio r above the clip range no
    negative gradient and one below it no positive one, whatever the advantage A. A surrogate ascended instead of
    descended, or with min and max swapped, does: found from d loss / d r (``torch.autograd.grad`` onto the
    ratio's graph edge, the graph kept for the user's backward)."""
    if not clamped or len(record.tensors) != 1 or record.tensors[0].numel() != 1:
        return
    grads = torch.autograd.grad(record.tensors[0], [GradientEdge(s.node, 0) for s in clamped], retain_graph=True,
                                allow_unused=True)
    for seen, grad in zip(clamped, grads, strict=True):
        if grad is None or grad.shape != seen.ratio.shape:
            continue
        low, high = seen.bounds
        wrong = ((seen.ratio > high) & (grad < 0)) | ((seen.ratio < low) & (grad > 0))
        if bool(torch.any(wrong)):
            a.add(12, "the clipped surrogate is ascended, or its min and max are swapped",
                  f"backward #{record.index}: {int(wrong.sum())} sample(s) with the ratio made at {seen.where} "
                  f"outside the clip range [{low:g}, {high:g}] still get a gradient pushing it further out: the "
                  "loss rewards moving the policy past the clip range instead of ignoring those samples",
                  "minimize the negated pessimistic objective: pg_loss = -torch.min(ratio * adv, "
                  "torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean(), or CleanRL's "
                  "torch.max(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps, 1 + eps)).mean(); add it to the loss "
                  "with a + sign", record.where, made=seen.where)


DETECTOR = Ratio
