"""What a training callback is: when it is called, what it receives, what it may change (docs/callbacks.md).

A callback is a function ``callback(metrics, pipeline)``, called after every iteration, or an object with any of
these methods (subclass :class:`Callback`, or write them on your own class):

- ``on_iteration(metrics, pipeline)``: after every iteration's update. ``metrics`` is the iteration's row (the
  ``metrics.csv`` columns, and the episodes that ended, ``ended_episodes``); a number a callback puts in it is
  logged with the row (a column of ``metrics.csv``, a scalar of every logger, a key of ``TrainResult.history``).
- ``on_evaluation(evaluation, metrics, pipeline)``: after each evaluation during training (``eval_every``),
  before the row is written: ``evaluation`` is its :class:`~ppo_td.training.evaluation.Evaluation`, ``metrics``
  the row, with its ``eval_*`` entries.
- ``on_end(result)``: once the run has ended, however it ended (its budget done, stopped early, interrupted), with
  the :class:`~ppo_td.training.loop.TrainResult` (the final evaluation in it, where one ran).

Raising :class:`StopTraining` from ``on_iteration`` or ``on_evaluation`` ends training after this iteration (the
other callbacks are still called for it, so its row is logged and checkpointed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

IterationHook = Callable[[dict[str, Any], Any], None]


class StopTraining(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a callback to end training cleanly after the current iteration.

    By default the run stops to be continued: its checkpoint is written, no final evaluation runs, and
    ``ppo_td.resume(run_dir)`` (``ppo-td train --resume``) goes on. ``complete=True`` ends it as done (a goal
    reached, the return wanted): the final evaluation runs and a resume says the run is complete; ``reason`` says
    why, in ``TrainResult.ended_early`` and the run's checkpoint.
    """

    def __init__(self, reason: str = "", complete: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.complete = reason, complete


class Callback:
    """A training callback with every hook optional (see the module's text); override the ones you need."""

    def on_iteration(self, metrics: dict[str, Any], pipeline: Any) -> None:
        """After every iteration's update; may add numbers to ``metrics`` (logged with the row) or raise
        :class:`StopTraining`."""

    def on_evaluation(self, evaluation: Any, metrics: dict[str, Any], pipeline: Any) -> None:
        """After each evaluation during training, before the row is written."""

    def on_end(self, result: Any) -> None:
        """Once the run has ended, with its ``TrainResult``."""

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        self.on_iteration(metrics, pipeline)


HOOKS = ("on_iteration", "on_evaluation", "on_end")


def iteration_hook(callback: Any) -> IterationHook | None:
    """What the loop calls after every iteration: ``callback.on_iteration``, the callback itself where it is a
    function (or callable), None for an object with only the other hooks.

    Raises:
        TypeError: neither a callable nor an object with a hook (the message names what a callback is).
    """
    if not any(callable(getattr(callback, hook, None)) for hook in HOOKS) and not callable(callback):
        raise TypeError(f"callbacks: {callback!r} is neither a function callback(metrics, pipeline) nor an object "
                        f"with {', '.join(HOOKS)} methods (ppo_td.training.Callback)")
    method = getattr(callback, "on_iteration", None)
    if callable(method):
        return method
    return callback if callable(callback) else None


def hooks(callbacks: Any, name: str) -> list[Callable[..., None]]:
    """The ``name`` hook (``on_evaluation``, ``on_end``) of each callback that has one, in order."""
    return [method for callback in callbacks if callable(method := getattr(callback, name, None))]
