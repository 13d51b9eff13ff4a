"""Item 13 (log-probs): the log-probability of a multi-dimensional continuous action left per dimension. A Normal
(or another univariate continuous distribution of torch) over an action of A dimensions gives one log-prob per
dimension; unless they are summed (``log_prob(action).sum(-1)``, or ``Independent``), the ratio is A ratios per
sample, each clipped alone, and the advantage is spread over them."""

from __future__ import annotations

import os

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import LIBRARIES, called_by_user, caller, callers, calling_frame

_UNIVARIATE = tuple(os.path.join(d, "distributions", f"{name}.py") for d in LIBRARIES for name in (
    "normal", "beta", "laplace", "cauchy", "gumbel", "log_normal", "gamma", "uniform", "studentT"))


class UnsummedLogProb(Detector):
    KINDS = {13: ('silent broadcasting in a loss term', 7)}
    calls = frozenset({torch.Tensor.sub, torch.Tensor.add, torch.Tensor.neg, torch.Tensor.mul, torch.Tensor.div,
                       torch.exp, torch.Tensor.exp})

    def __init__(self) -> None:
        self.per_dimension: dict[int, tuple[object, str]] = {}  # log_prob frame -> (newest node, the user's line)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if func is torch.exp or func is torch.Tensor.exp:
            self._ratio(a, args[0] if args else None)
            return
        frame = calling_frame()
        code = frame.f_code if frame is not None else None
        if code is None or code.co_name != "log_prob" or code.co_filename not in _UNIVARIATE:
            return
        known = self.per_dimension.get(id(frame))
        self.per_dimension[id(frame)] = (result.grad_fn, known[1] if known else callers(2))
        if len(self.per_dimension) > 64:
            self.per_dimension.pop(next(iter(self.per_dimension)))

    def _ratio(self, a: Audit, x) -> None:
        if not torch.is_tensor(x) or x.grad_fn is None or x.dim() < 2 or x.shape[-1] < 2:
            return
        if not type(x.grad_fn).__name__.startswith("SubBackward") or not called_by_user():
            return
        new = x.grad_fn.next_functions[0][0]
        made = next((where for node, where in self.per_dimension.values() if node is new), None)
        if made is None:
            return
        where = caller()
        a.add(13, "log-probs of a multi-dimensional action are not summed: the ratio is one per action dimension",
              f"the ratio at {where} is made from log-probs of shape {list(x.shape)}, one per action dimension "
              f"(made at {made}): each dimension gets its own ratio and clipping, and the advantage is spread over "
              "them, instead of one ratio of the joint action per sample",
              "sum the log-probs over the action dimensions: dist.log_prob(action).sum(-1) (likewise the entropy), "
              "in the rollout and in the update", where, made=made)


DETECTOR = UnsummedLogProb
