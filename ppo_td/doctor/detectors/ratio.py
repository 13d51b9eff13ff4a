"""Items 6 and 10: the PPO ratio's old log-probs. A ratio is ``exp(new_log_prob - old_log_prob)`` with the new
log-prob from an audited policy's forward. Wrong are old log-probs that carry gradient (recorded with their
graph), old log-probs recomputed from the current policy (the ratio is exactly 1 in every minibatch, so clipping
never acts), and old log-probs from another policy than the one trained (the ratio is not 1 on the first
minibatch after a rollout)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppo_td.doctor.audit import Audit, Backward, Forward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.origins import made_at, origin
from ppo_td.doctor.lines import call_chain, called_by_user, caller

FIRST_TOLERANCE = 1e-4  # |log ratio| on the first minibatch after a rollout: float rounding of a batched forward


@dataclass
class Seen:
    """One ratio: the exp node, the forward of its new log-prob, where it was made, its largest |log ratio|."""

    node: object
    forward: Forward
    where: str
    worst: float
    step: int
    log_ratio: object = None  # the node of new - old
    detached_at: str = ""


class Ratio(Detector):
    KINDS = {
        6: ('PPO ratio is not 1 on the first minibatch', 15),
        10: ("the ratio's old log-probs are wrong", 2),
        11: ('the clipped surrogate does not reach the policy', 6),
    }
    calls = frozenset({torch.exp, torch.Tensor.exp, torch.Tensor.detach})
    calls_without_grad = frozenset({torch.Tensor.detach})

    def __init__(self) -> None:
        self.rollout_step: int | None = None  # optimizer steps done at the latest forward under no_grad
        self.rollout_where = ""
        self.checked_rollout: int | None = None  # the rollout whose first ratio was checked
        self.after_step: list[Seen] = []  # ratios seen after the policy had been stepped
        self.recent: list[Seen] = []  # ratios since the last backward
        self.used: list[Seen] = []  # the ratios the last backward ran through
        self.carried: set[str] = set()  # ratio lines whose old log-probs carried gradient
        self.first_checked = False

    def forward(self, a: Audit, module: str, output, record: Forward | None) -> None:
        if (record is None and not torch.is_grad_enabled() and self.rollout_step != a._steps
                and a.role(module) == "policy"):  # a policy acting without gradient: a rollout (once per rollout)
            self.rollout_step, self.rollout_where = a._steps, call_chain()

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if func is torch.Tensor.detach:
            node = args[0].grad_fn if args and torch.is_tensor(args[0]) else None
            seen = next((s for s in self.recent if node is not None and s.node is node), None)
            if seen is not None:
                seen.detached_at = seen.detached_at or caller()
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
        seen = Seen(result.grad_fn, forward, origin(a, x.grad_fn) or where, worst, a._steps, x.grad_fn)
        self.recent.append(seen)
        if old is not None and (carrier := a.forward_below_node(old)) is not None:
            a.add(10, "the ratio's old log-probs carry gradient: they were recorded with their graph",
                  f"the denominator of the ratio made at {where} comes from {carrier.module} forward "
                  f"#{carrier.index} at {carrier.where}, which ran with gradients on: the loss then also pushes "
                  "the old log-probs, through a graph that a step makes stale",
                  "record the rollout under torch.no_grad() (or store log_prob.detach()); the old log-probs are "
                  "constants of the update", where, made=_made(a, old, carrier))
            self.carried.add(seen.where)
        stepped = any(id(p) in a._stepped_at for p in a.modules[forward.module].parameters())
        if stepped:
            self.after_step.append(seen)
        if (self.rollout_step is not None and self.rollout_step == a._steps and self.checked_rollout != a._steps
                and old is None):
            self.checked_rollout = a._steps  # the first minibatch after a rollout: the policy that acted
            if worst > FIRST_TOLERANCE and ("modes", forward.module) not in a.notes:
                a.add(6, "PPO ratio is not 1 on the first minibatch of the update",
                      f"max |log ratio| = {worst:.3g} at {where}, before any optimizer step since the rollout "
                      f"(its forwards at {self.rollout_where}): the old log-probs are not the trained policy's "
                      f"({forward.module})",
                      "record the old log-probs with the very network that is trained (not a copy), read them from "
                      "the right key, and recompute nothing between collection and update", where,
                      made=self.rollout_where)

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        recent, self.recent = self.recent, []  # the ratios of this loss: the policy must learn through one
        self.used = [seen for seen in recent if id(seen.node) in record.nodes]
        if self.used:
            return
        for seen in recent:
            if not seen.detached_at and seen.forward.module not in record.modules:
                continue  # (a ratio computed for a log line, say, next to a loss that reaches no policy)
            how = f"it was detached at {seen.detached_at}" if seen.detached_at else "it is not in the loss's graph"
            a.explained.update(id(p) for p in a.modules[seen.forward.module].parameters())
            others = (f"reaches {seen.forward.module} only through other terms (the entropy)"
                      if seen.forward.module in record.modules else f"does not reach {seen.forward.module}")
            a.add(11, "the clipped surrogate does not reach the policy: only other terms train it, if any",
                  f"backward #{record.index} {others}, not through the ratio made at {seen.where}: {how}; the "
                  "advantage-weighted term is a constant",
                  "keep the ratio attached: ratio = (new_log_prob - old_log_prob).exp(), with new_log_prob from "
                  "this minibatch's forward; detach only the advantages and the old log-probs", record.where,
                  made=seen.detached_at or seen.where)
            return

    def finish(self, a: Audit) -> None:
        if (len(self.after_step) >= 2 and all(s.worst == 0.0 for s in self.after_step)
                and self.after_step[0].where not in self.carried):  # (said already: recomputed with its graph)
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


def _made(a: Audit, old: object, carrier: Forward) -> str:
    """Where the old log-probs that carry a graph were made: the user's ``log_prob`` call (or the user's own
    operation) that made them, else the forward of the network below them."""
    return made_at(a, old) or carrier.chain


DETECTOR = Ratio
