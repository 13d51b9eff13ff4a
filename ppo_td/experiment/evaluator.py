"""Evaluation during training (``eval_every``): deterministic episodes on a separate env every N frames, logged
with the iteration's row, the best policy kept, and the run ended once it reaches ``eval_stop_return``
(Stable-Baselines3's ``EvalCallback`` and ``StopTrainingOnRewardThreshold``)."""

from __future__ import annotations

import copy
import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppo_td.training import Evaluation, Pipeline, StopTraining, evaluate_pipeline


def score(ev: Evaluation) -> float:
    """An evaluation's mean return, an episode cut at the step cap counting with the reward it had reached (so a
    policy stuck forever from some starts scores what it got there, never the mean of the others alone)."""
    values = [*ev.returns, *ev.cut]
    return statistics.fmean(values)


def spread(ev: Evaluation) -> float:
    """The standard deviation of what :func:`score` averages."""
    values = [*ev.returns, *ev.cut]
    return statistics.pstdev(values) if len(values) > 1 else 0.0


@dataclasses.dataclass
class Best:
    """The best evaluation during training and where its policy is."""

    score: float
    """Its :func:`score`."""
    evaluation: Evaluation | None
    frames: int
    iteration: int
    path: Path | None = None
    """``best.pt`` in the run folder (a checkpoint: ``ppo-td eval``, ``load_policy(run, which="best")``)."""
    actor: Any = None
    """A copy of the actor as it was then (a run without a folder)."""


class PeriodicEvaluation:
    """Training callback: every ``config.eval_every`` frames (at the end of the first iteration past each multiple),
    ``config.eval_episodes`` deterministic episodes of the current policy on a separate env, seeded as the final
    evaluation (:func:`~ppo_td.training.evaluation_seed`): nothing of training's envs or random streams is touched,
    so a run trains the same with or without it.

    Adds ``eval_return`` (:func:`score`), ``eval_return_std`` and ``eval_ended`` (episodes that ended) to the
    iteration's row, calls the other callbacks' ``on_evaluation`` hooks, keeps the best policy (``save(pipeline,
    metrics, evaluation)`` writes ``best.pt`` in a run folder and returns its path; without it a copy of the actor
    is kept), writes a line, and raises ``StopTraining(complete=True)`` once the score reaches
    ``config.eval_stop_return``.
    """

    def __init__(self, every: int, on_evaluation: Sequence[Callable[..., None]] = (),
                 save: Callable[[Pipeline, dict[str, Any], Evaluation], Path] | None = None,
                 write: Callable[[str], None] = print, best: Best | None = None) -> None:
        if every < 1:
            raise ValueError(f"eval_every={every} must be >= 1 frame")
        self.every, self.on_evaluation, self.save, self.write = every, list(on_evaluation), save, write
        self.best = best
        """The best so far (from ``best.pt`` on a resume)."""

    def due(self, frames: int, batch: int) -> bool:
        """Whether the iteration that ended at ``frames`` (``batch`` frames long) passed a multiple of ``every``."""
        return frames // self.every > (frames - batch) // self.every

    def __call__(self, metrics: dict[str, Any], pipeline: Pipeline) -> None:
        config = pipeline.config
        if not self.due(int(metrics["frames"]), config.frames_per_batch):
            return
        ev = evaluate_pipeline(pipeline)  # seeded as the final evaluation, on envs of its own
        value = score(ev)
        metrics.update(eval_return=value, eval_return_std=spread(ev), eval_ended=len(ev.returns))
        stop = None
        for hook in self.on_evaluation:  # a hook's stop waits until this evaluation's best is kept and said
            try:
                hook(ev, metrics, pipeline)
            except StopTraining as err:
                stop = stop or err
        better = self.best is None or value > self.best.score
        if better:
            self.best = Best(value, ev, int(metrics["frames"]), int(metrics["iteration"]))
            if self.save is not None:
                self.best.path = self.save(pipeline, metrics, ev)
            else:
                self.best.actor = copy.deepcopy(pipeline.actor)
        self.write(_line(metrics, ev, value, better, self.best))
        goal = config.eval_stop_return
        if stop is None and goal is not None and value >= goal:
            stop = StopTraining(f"the evaluation at {int(metrics['frames']):,} frames scored {value:.4g}, reaching "
                                f"eval_stop_return={goal:g}", complete=True)
        if stop is not None:
            raise stop


def _line(metrics: dict[str, Any], ev: Evaluation, value: float, better: bool, best: Best) -> str:
    ended = f"{len(ev.returns)} of {ev.episodes} episodes ended" if ev.cut else f"{ev.episodes} episodes"
    kept = (f"; new best{f', kept in {best.path.name}' if best.path is not None else ''}" if better
            else f"; best {best.score:.1f} at {best.frames:,} frames")
    return (f"evaluation at iteration {int(metrics['iteration'])} ({int(metrics['frames']):,} frames): "
            f"{value:.1f} +- {metrics['eval_return_std']:.1f} over {ended}{kept}")
