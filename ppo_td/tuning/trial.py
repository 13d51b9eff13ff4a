"""One trial: the sampled config trained on K seeds (and each env of a family), each run a normal ppo_td run folder,
scored robustly, reported to Optuna's pruner as it goes.

A seed's score is one of :data:`SCORES`; over several envs each is normalized by its ``(low, high)``
(``(score - low) / (high - low)``) and averaged; the trial's value is the mean over its seeds. The pruner sees, for
the median, Hyperband and successive-halving pruners, each run's mean return of its last 100 episodes about ten
times a run (step: the frames the trial has trained), and after each seed the mean of the seeds' scores so far; for
the Wilcoxon pruner, each seed's score alone (step: the seed's index), as it pairs trials seed by seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from ppo_td.config import TrainConfig, to_dict
from ppo_td.tuning.space import Space, repaired

SCORES = {
    "eval": "the mean return of the final deterministic evaluation (eval_episodes episodes, the policy's mode; an "
            "episode cut at eval_max_steps counts with the reward it had reached, so a policy stuck from some starts "
            "scores what it got there, not the mean of its other episodes)",
    "last100": "the mean return of the last 100 training episodes",
    "auc": "the mean over the run's iterations of their episodes' mean return (the area under the learning curve "
           "over the frames, divided by the frames)",
}
"""What a seed's score is (``--score``)."""

Score = Literal["eval", "last100", "auc"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every trial of a study runs: the base config, the envs, seeds, frames, score and where runs go."""

    base: TrainConfig
    folder: Path
    seeds: int = 3
    frames: int = 100_000
    score: Score = "eval"
    envs: tuple[str, ...] = ()
    """Envs tuned together (ids); () is the base config's env alone."""
    ranges: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    """``env id -> (low, high)`` normalizing each env's score (required with several envs)."""
    per_seed_reports: bool = False
    """Report each seed's score at step = its index, and nothing within a run (the Wilcoxon pruner)."""
    threads: int | None = None
    """Torch threads in each run (None: as ``ppo-td train`` chooses)."""

    @property
    def env_ids(self) -> tuple[str, ...]:
        return self.envs or (self.base.env.env_id,)

    def normalized(self, env_id: str, value: float) -> float:
        """``value`` of ``env_id`` on the family's common scale (itself for one env without a range)."""
        if env_id not in self.ranges:
            return value
        low, high = self.ranges[env_id]
        return (value - low) / (high - low)


class Pruned(Exception):  # noqa: N818 - a trial's outcome, raised as optuna.TrialPruned by the objective
    """The trial stops here: ``reason`` says why (the pruner, a divergence, a skipped combination)."""


def seed_score(result: Any, score: Score) -> float:
    """One run's score (:data:`SCORES`); NaN where it has none (no episode ended, no evaluation)."""
    if score == "eval":  # its cut episodes too: leaving them out would raise a trial stuck from some starts
        from ppo_td.experiment.evaluator import score as evaluation_score

        return evaluation_score(result.evaluation) if result.evaluation is not None else math.nan
    if score == "last100":
        returns = [e["return"] for e in list(result.episodes)[-100:]]
        return sum(returns) / len(returns) if returns else math.nan
    means = [row["episode_return"] for row in result.history if not math.isnan(row.get("episode_return", math.nan))]
    return sum(means) / len(means) if means else math.nan


class Reporter:
    """A training callback reporting a run's mean return of its last 100 episodes about ten times a run (at the
    trial's frame count), and stopping the run when the pruner says so."""

    def __init__(self, trial: Any, plan: Plan, env_id: str, offset: int) -> None:
        self.trial, self.plan, self.env_id, self.offset = trial, plan, env_id, offset
        self.every = max(1, plan.frames // 10)
        self.next = self.every
        self.recent: list[float] = []
        self.pruned_at: int | None = None

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        from ppo_td.training import StopTraining

        self.recent = (self.recent + [e["return"] for e in metrics.get("ended_episodes", [])])[-100:]
        frames = int(metrics["frames"])
        if frames < self.next or frames >= self.plan.frames or not self.recent:
            return
        step = frames // self.every * self.every  # on a grid every trial shares, whatever its batch size: the
        self.next = step + self.every            # median pruner compares trials at equal steps only
        value = self.plan.normalized(self.env_id, sum(self.recent) / len(self.recent))
        self.trial.report(value, self.offset + step)
        if self.trial.should_prune():
            self.pruned_at = frames
            raise StopTraining


def run_dir(plan: Plan, number: int, env_id: str, seed: int) -> Path:
    """Where a trial's run of ``env_id`` and ``seed`` goes: ``<study>/trials/<number>/[<env>-]seed<seed>``."""
    name = f"seed{seed}" if len(plan.env_ids) == 1 else f"{env_id.replace('/', '_').replace(':', '_')}-seed{seed}"
    return plan.folder / "trials" / f"{number:04d}" / name


def run_trial(trial: Any, plan: Plan, space: Space, train: Callable[..., Any]) -> float:
    """The trial's value: its sampled config trained on ``plan.seeds`` seeds (and each env), scored. ``train`` is
    ``ppo_td.train`` with a run folder (``train(config, run_dir=..., callbacks=..., threads=...)``), given by the
    caller: this layer sits below the command line that writes run folders.

    Raises:
        Pruned: the pruner stopped it, a run diverged (a NaN/inf loss, gradient or parameter), no episode ended to
            score, or the config refused the sampled combination after repair (skipped; the reason is its error).
    """
    from ppo_td.training import NonFiniteError

    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())
    try:
        values = space(trial, plan.base)
        config, notes = repaired(plan.base, values, plan.frames)
    except (ValueError, TypeError, ZeroDivisionError) as err:  # the config's checks, a value of the wrong type
        trial.set_user_attr("skipped", str(err))
        raise Pruned(f"skipped: {err}") from err
    if notes:
        trial.set_user_attr("repaired", notes)
    trial.set_user_attr("config", to_dict(config))  # what ran: the confirmation and best_config.json read it
    scores: list[float] = []
    envs = plan.env_ids
    for k in range(plan.seeds):
        seed = plan.base.seed + k
        per_env = []
        for e, env_id in enumerate(envs):
            run = dataclasses.replace(config, seed=seed, env=dataclasses.replace(config.env, env_id=env_id))
            offset = (k * len(envs) + e) * plan.frames
            reporter = None if plan.per_seed_reports else Reporter(trial, plan, env_id, offset)
            folder = run_dir(plan, trial.number, env_id, seed)
            try:
                with output_to(folder.parent / "output.log"):
                    result = train(run, run_dir=str(folder), callbacks=[reporter] if reporter else [],
                                   threads=plan.threads)
            except NonFiniteError as err:
                trial.set_user_attr("diverged", f"{env_id} seed {seed}: {err}")
                raise Pruned(f"diverged: {env_id} seed {seed}: {err}") from err
            if reporter is not None and reporter.pruned_at is not None:
                raise Pruned(f"pruned by the pruner at {offset + reporter.pruned_at} frames ({env_id} seed {seed})")
            value = seed_score(result, plan.score)
            if math.isnan(value):
                trial.set_user_attr("unscored", f"{env_id} seed {seed}")
                raise Pruned(f"no score: {env_id} seed {seed} ended no episode to score ({plan.score})")
            per_env.append(plan.normalized(env_id, value))
        scores.append(sum(per_env) / len(per_env))
        trial.set_user_attr("seed_scores", scores)
        if plan.per_seed_reports:
            trial.report(scores[-1], k)
        else:
            trial.report(sum(scores) / len(scores), (k + 1) * len(envs) * plan.frames)
        if k + 1 < plan.seeds and trial.should_prune():
            raise Pruned(f"pruned by the pruner after {k + 1} of {plan.seeds} seeds")
    return sum(scores) / len(scores)


@contextlib.contextmanager
def output_to(path: Path) -> Any:
    """The runs' own lines (their evaluations, notes) into ``path``, appended: the study's terminal keeps its
    progress line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        yield
    sys.stdout.flush()


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and (population) standard deviation."""
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
