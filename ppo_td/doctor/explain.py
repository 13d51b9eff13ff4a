"""Turn the autograd RuntimeErrors of hand-written PPO into explanations, without an audit."""

from __future__ import annotations

import re
from dataclasses import dataclass

RETAIN_GRAPH_IS_WRONG = (
    "retain_graph=True is the wrong fix: it keeps the stale graph alive, so gradient flows into values "
    "computed by an older network, and the next optimizer.step() turns the error into 'modified by an "
    "inplace operation'"
)


class DoctorError(RuntimeError):
    """A ``RuntimeError`` from ``backward()`` with the doctor's explanation appended."""


@dataclass(frozen=True)
class Explanation:
    """What an autograd error means in a PPO update, and the fix."""

    item: int | None
    title: str
    cause: str
    fix: str

    def message(self, original: str) -> str:
        return f"{original}\n\nppo_td doctor: {self}"

    def __str__(self) -> str:
        item = f"[{self.item}] " if self.item else ""
        return f"{item}{self.title}\n    cause: {self.cause}\n    fix: {self.fix}"


_SECOND_TIME = Explanation(
    3, "backward through a graph that an earlier backward already freed",
    "a tensor computed once is used by two losses: values or log-probs stored during the rollout with "
    "gradients on, an advantage computed from the critic without .detach(), or a loss reused across "
    "epochs/minibatches. The first backward() frees the graph; the second one needs it.",
    "collect under torch.no_grad(), compute advantages/returns under torch.no_grad(), and recompute "
    "log-probs and values from stored observations inside every minibatch loss; " + RETAIN_GRAPH_IS_WRONG,
)

_INPLACE = Explanation(
    3, "backward needs a tensor that was modified in place after the forward",
    "the loss uses outputs computed before an optimizer.step() (which updates parameters in place) or "
    "before an in-place op (x += ..., x[idx] = ..., relu_(...)) on a tensor the graph saved.",
    "order each minibatch as forward -> loss -> zero_grad -> backward -> step, recompute the forward after "
    "every step, and replace in-place ops on graph tensors with out-of-place ones; " + RETAIN_GRAPH_IS_WRONG,
)

_NO_GRAD_FN = Explanation(
    4, "the loss has no autograd graph: no parameter can learn",
    "the graph was cut before the loss: .item(), .numpy(), argmax, a stray .detach(), sampling an action "
    "without its log-prob, or computing the loss under torch.no_grad().",
    "compute the loss from network outputs of this minibatch: dist = policy(obs); "
    "log_prob = dist.log_prob(stored_action); keep everything in torch tensors",
)

_UNKNOWN = Explanation(
    None, "not one of the PPO autograd mistakes the doctor knows",
    "see the original message",
    "run the update inside ppo_td.doctor.audit(...) for a full check",
)


def explain(error: BaseException | str) -> Explanation:
    """Explain an autograd ``RuntimeError`` (or its message) in PPO terms.

    Example:
        >>> try:
        ...     loss.backward()
        ... except RuntimeError as err:
        ...     print(explain(err))
    """
    text = str(error)
    if "backward through the graph a second time" in text:
        return _SECOND_TIME
    if "modified by an inplace operation" in text:
        return _INPLACE
    if "does not require grad and does not have a grad_fn" in text:
        return _NO_GRAD_FN
    return _UNKNOWN


def parse_inplace_error(text: str) -> tuple[list[int] | None, int | None]:
    """Shape and current version of the tensor named in an in-place RuntimeError."""
    shape = re.search(r"\[torch\.\w+ \[([\d, ]*)\]\]", text)
    version = re.search(r"is at version (\d+)", text)
    dims = [int(d) for d in shape.group(1).split(",") if d.strip()] if shape else None
    return dims, int(version.group(1)) if version else None
