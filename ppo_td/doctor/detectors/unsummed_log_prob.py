"""Item 13 (log-probs): the log-probability of a multi-dimensional action left per dimension. A Normal (or another
univariate continuous distribution) over an action of A dimensions gives one log-prob per dimension, and so do
Categoricals over the sub-actions of a factorized discrete action made from one network output; unless they are
summed (``log_prob(action).sum(-1)``, or ``Independent``), the ratio is A ratios per sample, each clipped alone,
and the advantage is spread over them. (An agent group's per-agent log-probs are right: their last dimension is
the agents', not a split of the network's output.)"""

from __future__ import annotations

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.origins import log_prob_origin
from ppo_td.doctor.lines import called_by_user, caller


class UnsummedLogProb(Detector):
    KINDS = {13: ("silent broadcasting in a loss term", 7)}
    calls = frozenset({torch.exp, torch.Tensor.exp})

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        self._ratio(a, args[0] if args else None)

    def _ratio(self, a: Audit, x) -> None:
        if not torch.is_tensor(x) or x.grad_fn is None or x.dim() < 2 or x.shape[-1] < 2:
            return
        if not type(x.grad_fn).__name__.startswith("SubBackward") or not called_by_user():
            return
        new = x.grad_fn.next_functions[0][0]
        found = log_prob_origin(a, new)
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
