"""Items 12 and 17 for TorchRL's loss modules (``ClipPPOLoss``, ``KLPENPPOLoss``, any ``LossModule``): their
``loss_*`` terms carry their own signs and coefficients, and the loss to minimize is their sum. Before each
backward, the gradient of the loss with respect to each term it holds (``torch.autograd.grad`` onto the term's
graph edge, the graph kept for the user's backward) must be positive: a negative one means the term is subtracted
(``- loss_vals["loss_entropy"]`` minimizes the entropy, whatever the distribution and however TorchRL estimates its
entropy). A term that no backward reaches while the loss's other terms are trained was dropped."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.autograd.graph import get_gradient_edge

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.origins import origin
from ppo_td.doctor.graph import graph, leaves, path

TERM_FIX = ("add the loss's terms as they come: loss = loss_vals['loss_objective'] + loss_vals['loss_critic'] + "
            "loss_vals['loss_entropy'] (or sum(v for k, v in loss_vals.items() if k.startswith('loss_'))); TorchRL's "
            "terms carry their signs and coefficients already (loss_entropy = -entropy_coeff * entropy)")
_SUBTRACTED = {
    "loss_entropy": "the entropy bonus is minimized: TorchRL's loss_entropy is subtracted",
    "loss_objective": "the clipped surrogate is ascended: TorchRL's loss_objective is subtracted",
    "loss_critic": "the value loss is maximized: TorchRL's loss_critic is subtracted",
}
_WHAT = {"loss_entropy": "each step makes the policy less random, the opposite of an exploration bonus",
         "loss_objective": "each step makes the advantageous actions less likely",
         "loss_critic": "each step pushes the value predictions away from their targets"}


@dataclass
class LossForward:
    """One forward of a loss module with gradients on: its terms (key -> graph node) and which a backward used."""

    loss: str
    where: str
    terms: dict[str, torch.Tensor]
    backwards: int  # backward calls before it
    used: set[str] = field(default_factory=set)
    combined: str = ""  # the user's line that made the loss a backward trained (the terms' sum)
    judged: set[str] = field(default_factory=set)


class LossTerms(Detector):
    KINDS = {12: ("a sign or min/max of the PPO loss is wrong", 5),
             17: ("a term of a TorchRL loss is left out", 6.5)}

    def __init__(self) -> None:
        self.open: dict[int, LossForward] = {}  # id of a loss module -> its latest forward with gradients

    def loss(self, a: Audit, name: str, module, batch, output, where: str) -> None:
        if not hasattr(output, "keys") or not torch.is_grad_enabled():
            return
        terms = {key if isinstance(key, str) else ".".join(key): value
                 for key, value in output.items(True, True)
                 if (key if isinstance(key, str) else key[-1]).startswith("loss_") and torch.is_tensor(value)
                 and value.grad_fn is not None}
        if id(module) in self.open:  # (the loss's previous minibatch is done: its terms were all trained, or not)
            self._judge(a, self.open.pop(id(module)))
        if terms:
            self.open[id(module)] = LossForward(name, where, terms, len(a._backwards))

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        found = [(forward, key, value) for forward in self.open.values() for key, value in forward.terms.items()
                 if id(value.grad_fn) in record.nodes]
        for forward, key, _ in found:
            forward.used.add(key)
            forward.combined = forward.combined or origin(a, roots[0])
        if not found or len(record.tensors) != 1 or record.tensors[0].numel() != 1:
            return
        grads = torch.autograd.grad(record.tensors[0], [get_gradient_edge(value) for _, _, value in found],
                                    retain_graph=True, allow_unused=True)
        for (forward, key, value), grad in zip(found, grads, strict=True):
            if grad is None or not bool(torch.all(grad < 0)):
                continue
            short = key.rsplit(".", 1)[-1]
            combined = next((line for n in reversed(path(roots, value.grad_fn)[:-1]) if (line := origin(a, n))), "")
            a.add(12, _SUBTRACTED.get(short, f"TorchRL's {short} is subtracted: the loss maximizes it"),
                  f"the gradient of the loss of backward #{record.index} with respect to {forward.loss}'s {key} "
                  f"(made at {forward.where}) is {float(grad.max()):.3g}: the term is subtracted, so "
                  f"{_WHAT.get(short, 'each step makes it larger')}", TERM_FIX, record.where,
                  made=combined or forward.where)

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        """A term left out is judged at the first step of the parameters it should train (a second optimizer may
        yet step a term trained by a later backward): its parameters then get no gradient from it."""
        stepped = {id(p) for p in params}
        for forward in self.open.values():
            if not forward.used:
                continue
            for key in forward.terms.keys() - forward.used - forward.judged:
                below = leaves(graph([forward.terms[key].grad_fn])[0]) & stepped
                if below and self._report(a, forward, key):
                    a.explained.update(below)  # (item 4 would say these get no gradient: this is why)

    def finish(self, a: Audit) -> None:
        if not a.stopped and a.error is None:  # (stopped between two backward calls, a term may be yet to come)
            for forward in self.open.values():
                self._judge(a, forward)
        self.open = {}

    def _judge(self, a: Audit, forward: LossForward) -> None:
        """Terms of a trained forward (one term at least reached a backward) that no backward reached."""
        if not forward.used:
            return  # (a forward for a log line, or never trained: not a dropped term)
        for key in forward.terms.keys() - forward.used - forward.judged:
            self._report(a, forward, key)

    def _report(self, a: Audit, forward: LossForward, key: str) -> bool:
        """Report ``key`` of ``forward`` as left out (unless it is 0); returns whether it was reported."""
        forward.judged.add(key)
        if not bool(forward.terms[key].detach().any()):
            return False  # (a term that is 0 whatever the weights, entropy_coeff=0 say: leaving it out changes nothing)
        a.add(17, f"{forward.loss}'s {key} is left out of the loss: that part never trains",
              f"{forward.loss} at {forward.where} returned {key} with a graph, and the backward that trained "
              f"its {', '.join(sorted(forward.used))} did not run through it"
              + (": the critic is never fitted, so the advantages rest on an untrained baseline"
                 if key.endswith("loss_critic") else ""),
              f"add {key} to the loss (loss = sum of every loss_* term), or build the loss without it "
              "(entropy_bonus=False, critic_coeff=None) if leaving it out is meant",
              a._backwards[-1].where if a._backwards else forward.where, made=forward.combined or forward.where)
        return True


DETECTOR = LossTerms
