"""Where the user's code made each tensor of a loss (no finding of its own): the other detectors name the line of
a wrong tensor from it. Kept from the first loss operation after an optimizer step to the next step."""

from __future__ import annotations

import linecache

import torch
import torch.nn.functional as F  # noqa: N812

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import format_line, user_call_frame


class Origins(Detector):
    calls = frozenset({torch.Tensor.sub, torch.Tensor.__rsub__, torch.Tensor.add, torch.Tensor.mul, torch.Tensor.div,
                       torch.Tensor.neg, torch.Tensor.mean, torch.Tensor.sum, torch.Tensor.exp, torch.Tensor.clamp,
                       torch.sub, torch.add, torch.mul, torch.div, torch.mean, torch.sum, torch.exp, torch.clamp,
                       torch.max, torch.min, torch.maximum, torch.minimum, F.mse_loss, F.smooth_l1_loss,
                       F.huber_loss})

    def __init__(self) -> None:
        self.made: dict[int, tuple[object, str, int]] = {}  # grad_fn id -> (grad_fn, file, line)

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        node = getattr(result, "grad_fn", None)
        if node is None:
            return
        frame = user_call_frame()
        if frame is not None:
            self.made[id(node)] = (node, frame.f_code.co_filename, frame.f_lineno)

    def line(self, node: object) -> str:
        """The user's line that made the output of ``node`` ("" when unknown)."""
        found = self.made.get(id(node))
        if found is None or found[0] is not node:
            return ""
        return format_line(found[1], found[2], linecache.getline(found[1], found[2]))

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        self.made.clear()  # (the losses of this step are done)


DETECTOR = Origins


def origin(a: Audit, node: object) -> str:
    """The user's line that made the output of ``node`` ("" when unknown)."""
    return a.detector(Origins).line(node)
