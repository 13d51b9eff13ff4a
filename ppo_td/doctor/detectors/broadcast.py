"""Item 13: silent broadcasting in a loss term: an elementwise step of the user's code whose result has more
elements than either input (a value ``[B, 1]`` against returns ``[B]`` gives ``[B, B]``; log-probs of a
multi-dimensional action left unsummed ``[B, 1]`` against old log-probs ``[B]``), so the loss averages every
prediction against every target."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import called_by_user, caller

_OPS = {torch.Tensor.sub: "-", torch.Tensor.__rsub__: "-", torch.Tensor.add: "+", torch.Tensor.mul: "*",
        torch.Tensor.div: "/", torch.sub: "-", torch.add: "+", torch.mul: "*", torch.div: "/",
        torch.maximum: "maximum", torch.minimum: "minimum", torch.max: "max", torch.min: "min",
        F.mse_loss: "mse_loss", F.smooth_l1_loss: "smooth_l1_loss", F.huber_loss: "huber_loss",
        F.l1_loss: "l1_loss"}


class Broadcast(Detector):
    KINDS = {13: ('silent broadcasting in a loss term', 7)}
    calls = frozenset(_OPS)

    def __init__(self) -> None:
        self.pending: list[tuple[str, str]] = []  # the broadcasts since the last backward: (what, where)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        if len(args) < 2 or not torch.is_grad_enabled():
            return
        x, y = args[0], args[1]
        if not (torch.is_tensor(x) and torch.is_tensor(y)) or x.dim() == 0 or y.dim() == 0:
            return
        if not (x.requires_grad or y.requires_grad) or x.shape == y.shape:
            return
        try:
            shape = torch.broadcast_shapes(x.shape, y.shape)
        except RuntimeError:
            return  # torch raises on its own
        if math.prod(shape) <= max(x.numel(), y.numel()) or not called_by_user():
            return
        self.pending.append((f"{_OPS[func]} of {list(x.shape)} and {list(y.shape)} makes {list(shape)}", caller()))

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        pending, self.pending = self.pending, []  # one mistake (a value of the wrong shape) may broadcast often
        if not pending:
            return
        (what, where), more = pending[0], list(dict.fromkeys(line for _, line in pending[1:] if line != pending[0][1]))
        also = f"; the same in {len(more)} more step(s) of this loss, first at {more[0]}" if more else ""
        a.add(13, "silent broadcasting in a loss term: the result has more elements than either side",
              f"{what} at {where}: every row of one side meets every row of the other, and the mean over them is "
              f"no per-sample loss{also}",
              "give both sides the same shape before the loss: value.view(-1) (or .squeeze(-1)) against returns of "
              "shape [B]; log-probs of a multi-dimensional action summed over its dimensions "
              "(dist.log_prob(action).sum(-1)) against old log-probs of shape [B]", record.where, made=where)


DETECTOR = Broadcast
