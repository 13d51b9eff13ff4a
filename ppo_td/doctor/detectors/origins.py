"""Where the user's code made each tensor of a loss (no finding of its own): the other detectors name the line of
a wrong tensor from it.

Two records: the user's line of each operation the user's code made itself (``x - y``, ``torch.clamp``...), and the
user's call chain of each ``log_prob`` of a torch or TorchRL distribution (``logp = dist.log_prob(a)``), whose last
operations run inside the distribution. The lines are kept until the next optimizer step; the log-probs (the
newest few thousand) across steps, since a rollout's may serve several."""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F  # noqa: N812

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.graph import below
from ppo_td.doctor.lines import LIBRARIES, call_chain, calling_frame, format_line, getline, internal

DISTRIBUTIONS = tuple(os.path.join(d, "distributions", "") for d in LIBRARIES) + tuple(
    os.path.join(d, "modules", "distributions", "") for d in LIBRARIES)
_UNIVARIATE = tuple(os.path.join(d, "distributions", f"{name}.py") for d in LIBRARIES for name in (
    "normal", "beta", "laplace", "cauchy", "gumbel", "log_normal", "gamma", "uniform", "studentT"))
MAX_LOG_PROBS = 4096  # log_prob calls remembered (the newest)
_LOG_PROB_DEPTH = 4  # frames of a distribution searched for its log_prob (Independent sums in a helper)
_MAX_LINES = 6  # lines of one expression shown


class Origins(Detector):
    # the user's arithmetic, and the last operations of torch's log_prob: Normal's ... - log(sqrt(2 pi)),
    # Categorical's gather(...).squeeze(-1), Bernoulli's -binary_cross_entropy_with_logits, Independent's sum
    calls = frozenset({torch.Tensor.sub, torch.Tensor.__rsub__, torch.Tensor.add, torch.Tensor.mul, torch.Tensor.div,
                       torch.Tensor.neg, torch.Tensor.mean, torch.Tensor.sum, torch.Tensor.exp, torch.Tensor.clamp,
                       torch.Tensor.squeeze, torch.Tensor.gather, torch.sub, torch.add, torch.mul, torch.div,
                       torch.mean, torch.sum, torch.exp, torch.clamp, torch.max, torch.min, torch.maximum,
                       torch.minimum, F.mse_loss, F.smooth_l1_loss, F.huber_loss})

    def __init__(self) -> None:
        self.made: dict[int, tuple[object, str, int, int]] = {}  # grad_fn id -> (grad_fn, file, line, last line)
        self.log_probs: dict[int, tuple[object, str, bool]] = {}  # grad_fn id -> (grad_fn, the user's call chain
        # of the log_prob that made it, whether a univariate continuous distribution's)
        self._current: tuple | None = None  # the log_prob running: (frame, chain, univariate, its newest node id)
        self._positions: dict[object, list] = {}  # code object -> the last line of each of its instructions

    def call(self, a: Audit, func, args: tuple, kwargs: dict, result) -> None:
        node = getattr(result, "grad_fn", None)
        if node is None:
            return
        frame = calling_frame()
        if frame is None:
            return
        if not internal(frame.f_code.co_filename):
            self.made[id(node)] = (node, frame.f_code.co_filename, frame.f_lineno, self._end_line(frame))
            return
        log_prob = _log_prob_frame(frame)
        if log_prob is None:
            return
        current = self._current
        if current is not None and current[0] is log_prob:
            self.log_probs.pop(current[3], None)  # (only a log_prob's last operation is kept: what it returns)
        else:
            current = (log_prob, call_chain(), log_prob.f_code.co_filename in _UNIVARIATE)
        self._current = (*current[:3], id(node))
        self.log_probs[id(node)] = (node, current[1], current[2])
        if len(self.log_probs) > MAX_LOG_PROBS:
            self.log_probs.pop(next(iter(self.log_probs)))

    def _end_line(self, frame) -> int:
        """The last line of the expression the frame is running (``a\\n + b\\n - c`` spans three lines: the
        operation ``- c`` starts at ``a``), from the code's positions (PEP 657)."""
        positions = self._positions.get(frame.f_code)
        if positions is None:
            positions = self._positions[frame.f_code] = [end for _, end, _, _ in frame.f_code.co_positions()]
        index = frame.f_lasti // 2
        end = positions[index] if 0 <= index < len(positions) else None
        return end if isinstance(end, int) and end >= frame.f_lineno else frame.f_lineno

    def line(self, node: object) -> str:
        """The user's line that made the output of ``node`` ("" when unknown)."""
        found = self.made.get(id(node))
        if found is None or found[0] is not node:
            return ""
        _, filename, first, last = found
        text = " ".join(getline(filename, n).strip() for n in range(first, min(last, first + _MAX_LINES - 1) + 1))
        return format_line(filename, first, text)

    def log_prob(self, node: object) -> tuple[str, bool] | None:
        """The user's call chain of the ``log_prob`` whose result ``node`` made, and whether the distribution is a
        univariate continuous one (None: not a distribution's log-prob)."""
        found = self.log_probs.get(id(node))
        return (found[1], found[2]) if found is not None and found[0] is node else None

    def log_prob_below(self, node: object, limit: int = 64) -> str:
        """The user's call chain of the first distribution's ``log_prob`` at or below ``node`` (the log-probs a
        ``torch.stack`` of them, say, is made of), looking at no more than ``limit`` nodes ("" when none)."""
        found = below(node, self.log_probs, limit)
        return found[1] if found is not None else ""

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        self.made.clear()  # (the losses of this step are done; log-probs of a rollout may serve several steps)
        self._current = None


def _log_prob_frame(frame) -> object | None:
    """The ``log_prob`` method of a torch or TorchRL distribution among the frames from ``frame`` out (a few)."""
    for _ in range(_LOG_PROB_DEPTH):
        if frame is None or not frame.f_code.co_filename.startswith(DISTRIBUTIONS):
            return None
        if frame.f_code.co_name == "log_prob":
            return frame
        frame = frame.f_back
    return None


DETECTOR = Origins


def origin(a: Audit, node: object) -> str:
    """The user's line that made the output of ``node`` ("" when unknown)."""
    return a.detector(Origins).line(node)


def made_at(a: Audit, node: object) -> str:
    """Where the user's code made ``node``'s output: the ``log_prob`` call at or below it, else the user's own
    operation that made it ("" when unknown)."""
    return a.detector(Origins).log_prob_below(node) or origin(a, node)


def log_prob_origin(a: Audit, node: object) -> tuple[str, bool] | None:
    """The user's call chain of the distribution's ``log_prob`` that made ``node``'s output (see
    :meth:`Origins.log_prob`)."""
    return a.detector(Origins).log_prob(node)
