"""Item 13 (log-probs): the log-probability of a multi-dimensional action left per dimension. A Normal (or another
univariate continuous distribution) over an action of A dimensions gives one log-prob per dimension, and so do
Categoricals over the sub-actions of a factorized discrete action made from one network output; unless they are
summed (``log_prob(action).sum(-1)``, or ``Independent``), the ratio is A ratios per sample, each clipped alone,
and the advantage is spread over them. (An agent group's per-agent log-probs are right: their last dimension is
the agents', not a split of the network's output.)"""

from __future__ import annotations

import os

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import LIBRARIES, called_by_user, caller, callers, calling_frame

_DISTRIBUTIONS = tuple(os.path.join(d, "distributions", "") for d in LIBRARIES) + tuple(
    os.path.join(d, "modules", "distributions", "") for d in LIBRARIES)
_UNIVARIATE = tuple(os.path.join(d, "distributions", f"{name}.py") for d in LIBRARIES for name in (
    "normal", "beta", "laplace", "cauchy", "gumbel", "log_normal", "gamma", "uniform", "studentT"))


class UnsummedLogProb(Detector):
    KINDS = {13: ("silent broadcasting in a loss term", 7)}
    # the last operations of torch's log_prob: Normal's ... - log(sqrt(2 pi)), Categorical's gather(...).squeeze(-1),
    # Bernoulli's -binary_cross_entropy_with_logits
    calls = frozenset({torch.Tensor.sub, torch.Tensor.add, torch.Tensor.neg, torch.Tensor.mul, torch.Tensor.div,
                       torch.Tensor.squeeze, torch.Tensor.gather, torch.exp, torch.Tensor.exp})

    def __init__(self) -> None:
        self.log_probs: dict[int, tuple[object, str, bool]] = {}  # log_prob frame -> (newest node, the user's
        # line, univariate continuous)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if func is torch.exp or func is torch.Tensor.exp:
            self._ratio(a, args[0] if args else None)
            return
        frame = calling_frame()
        code = frame.f_code if frame is not None else None
        if code is None or code.co_name != "log_prob" or not code.co_filename.startswith(_DISTRIBUTIONS):
            return
        known = self.log_probs.get(id(frame))
        self.log_probs[id(frame)] = (result.grad_fn, known[1] if known else callers(2),
                                     code.co_filename in _UNIVARIATE)
        if len(self.log_probs) > 64:
            self.log_probs.pop(next(iter(self.log_probs)))

    def _ratio(self, a: Audit, x) -> None:
        if not torch.is_tensor(x) or x.grad_fn is None or x.dim() < 2 or x.shape[-1] < 2:
            return
        if not type(x.grad_fn).__name__.startswith("SubBackward") or not called_by_user():
            return
        new = x.grad_fn.next_functions[0][0]
        found = next(((line, univariate) for node, line, univariate in self.log_probs.values() if node is new), None)
        if found is None:
            return
        made, univariate = found
        forward = a.forward_below_node(new)
        split = (forward is not None and len(forward.shape) == x.dim() and forward.shape[:-1] == tuple(x.shape[:-1])
                 and forward.shape[-1] % x.shape[-1] == 0)  # one output split into the sub-actions' parameters
        if not (univariate or split):
            return
        where = caller()
        a.add(13, "log-probs of a multi-dimensional action are not summed: the ratio is one per action dimension",
              f"the ratio at {where} is made from log-probs of shape {list(x.shape)}, one per action dimension "
              f"(made at {made}): each dimension gets its own ratio and clipping, and the advantage is spread over "
              "them, instead of one ratio of the joint action per sample",
              "sum the log-probs over the action dimensions: dist.log_prob(action).sum(-1) (likewise the entropy), "
              "in the rollout and in the update", where, made=made)


DETECTOR = UnsummedLogProb
