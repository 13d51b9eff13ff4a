"""Item 12 (entropy): the entropy bonus minimized. The entropy is the output of a distribution's ``entropy()``
(torch's or TorchRL's); before the backward, the gradient of the loss with respect to it (``torch.autograd.grad``
onto its graph edge, the graph kept for the user's own backward, no ``.grad`` touched) must not be positive."""

from __future__ import annotations

import torch
from torch.autograd.graph import GradientEdge

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.origins import DISTRIBUTIONS, origin
from ppo_td.doctor.graph import path
from ppo_td.doctor.lines import call_chain, calling_frame


class EntropySign(Detector):
    KINDS = {12: ('a sign or min/max of the PPO loss is wrong', 5)}
    # the last operation of the entropies of torch's distributions: Categorical's -(p log p).sum(-1), Normal's
    # 0.5 + 0.5 log(2 pi) + log(scale) (a float plus a tensor: Tensor.add), Bernoulli's
    # binary_cross_entropy_with_logits (Independent sums them)
    calls = frozenset({torch.Tensor.neg, torch.Tensor.add, torch.nn.functional.binary_cross_entropy_with_logits})

    def __init__(self) -> None:
        self.entropies: dict[int, tuple[object, str]] = {}  # entropy() frame -> (its newest node, the user's line)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if not torch.is_tensor(result) or result.grad_fn is None:
            return
        frame = _entropy_frame()
        if frame is None or a.in_loss:  # (inside a TorchRL loss, its loss_entropy term is judged: loss_terms)
            return
        known = self.entropies.get(id(frame))
        self.entropies[id(frame)] = (result.grad_fn, known[1] if known else call_chain())

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        found, self.entropies = [e for e in self.entropies.values() if id(e[0]) in record.nodes], {}
        if not found or len(record.tensors) != 1 or record.tensors[0].numel() != 1:
            return
        grads = torch.autograd.grad(record.tensors[0], [GradientEdge(node, 0) for node, _ in found],
                                    retain_graph=True, allow_unused=True)
        for (node, where), grad in zip(found, grads, strict=True):
            if grad is None or not bool(torch.any(grad > 0)) or bool(torch.any(grad < 0)):
                continue
            through = [line for line in dict.fromkeys(origin(a, n) for n in path(roots, node))
                       if line and line not in where][:3]
            made = where + (f"; into the loss through {'; '.join(through)}" if through else "")
            a.add(12, "the entropy bonus is minimized: the loss grows with the entropy",
                  f"the gradient of the loss of backward #{record.index} with respect to the entropy made at "
                  f"{where} is positive (up to {float(grad.max()):.3g}): each step makes the policy less random, "
                  "the opposite of an exploration bonus",
                  "subtract the entropy term: loss = pg_loss - ent_coef * entropy.mean() + vf_coef * v_loss (or "
                  "add ent_coef * entropy_loss with entropy_loss = -entropy.mean())", record.where, made=made)


def _entropy_frame() -> object | None:
    """The ``entropy`` method of a torch or TorchRL distribution that made the call being handled, if one did."""
    frame = calling_frame()
    code = frame.f_code if frame is not None else None
    return frame if code is not None and code.co_name == "entropy" and code.co_filename.startswith(DISTRIBUTIONS) \
        else None


DETECTOR = EntropySign
