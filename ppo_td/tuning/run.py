"""A tuning run from start to report: the study folder checked, the study opened and made whole, trials run in
this process or in worker processes, the top trials confirmed on fresh seeds beside the base config, the report.

The study folder holds everything: ``tune.json`` (what the trials run: a continued study must run the same),
``study.log`` (Optuna's journal, readable by ``optuna-dashboard study.log``), ``trials/<n>/seed<k>/`` (each run a
normal ppo_td run folder), ``workers/`` (each worker's output), ``confirm.jsonl`` and ``confirm/`` (the
confirmation runs), ``trials.csv``, ``best_config.json`` (``ppo-td train --config`` runs it), ``report.md`` and the
plots.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, identity_dict
from ppo_td.training.ranks import launched_world
from ppo_td.tuning.confirm import confirm_top
from ppo_td.tuning.report import write_report
from ppo_td.tuning.space import Space, load_space
from ppo_td.tuning.study import (
    PRUNERS,
    SAMPLERS,
    Settings,
    StudySpec,
    check_storage,
    counts,
    make_pruner,
    make_sampler,
    objective_for,
    optimize_here,
    recover,
    run_workers,
)
from ppo_td.tuning.trial import SCORES, Plan, run_trial


@dataclasses.dataclass
class TuneResult:
    """What :func:`tune` returns: the study folder, the winner and the confirmation table."""

    folder: Path
    best_config: TrainConfig | None
    """The config that scored best on the confirmation seeds (None where no trial completed)."""
    best: str | None
    """Its name in the table (``trial 12``; ``base config`` when no tuned config beat the base)."""
    confirmed: list[dict[str, Any]]
    """Per row (the top trials and the base config): its search value, and mean and std over the fresh seeds."""
    counts: dict[str, int]
    seconds: float
    """Wall time of this call."""


def tune(base: TrainConfig, *, train: Callable[..., Any], folder: str | Path | None = None, trials: int = 30,
         seeds: int = 3,
         frames: int | None = None, score: str = "eval", envs: Sequence[str] = (),
         ranges: dict[str, tuple[float, float]] | None = None, space: str | Space | None = None,
         sampler: str = "tpe", pruner: str = "median", workers: int = 1, storage: str | None = None,
         study_name: str | None = None, seed: int | None = 0, confirm: int = 3, confirm_seeds: int = 5,
         timeout: float | None = None, threads: int | None = None,
         say: Callable[[str], None] = print) -> TuneResult:
    """Search ``base``'s hyper-parameters with Optuna; see :mod:`ppo_td.tuning` and ``docs/tuning.md``.

    ``train`` runs one trial's run into a run folder (``ppo_td.train`` with ``run_dir``); ``frames`` per run (default
    the base config's ``total_frames``); ``folder`` the study folder (default ``tune/<env>-<hash of what the trials
    run>``: the same call continues the same study); the other arguments as ``ppo-td tune``'s flags.
    """
    started = time.perf_counter()
    world = launched_world()
    if world > 1:
        raise ValueError(f"tune on {world} ranks (WORLD_SIZE={world}): a study runs its trials in processes of its "
                         "own (workers=N); start it as one process, without torchrun")
    _needs_optuna()
    frames = int(frames if frames is not None else base.total_frames)
    plan, settings = _checked(base, Path(folder or "."), trials, seeds, frames, score, tuple(envs),
                              dict(ranges or {}), sampler, pruner, workers, storage, study_name, seed, confirm,
                              confirm_seeds, timeout, threads)
    space_fn = load_space(space)
    what = _plan_record(plan, settings, space)
    if folder is None:
        plan = dataclasses.replace(plan, folder=default_folder(plan, what))
    check_storage(storage, workers)  # all checked before the study folder records anything
    make_sampler(sampler, seed)
    make_pruner(pruner, frames, seeds, len(plan.env_ids))
    _record(plan, settings, what, say)
    spec = StudySpec(plan.folder, settings, frames, seeds, len(plan.env_ids))
    study = spec.load(0)
    queued = recover(plan.folder, study)
    if queued:
        say(f"continuing the study: trials {', '.join(map(str, queued))} were interrupted; their parameters run "
            "again first")
    done_before = counts(study)["done"]
    if done_before:
        say(f"continuing the study: {done_before} of {trials} trials done")
    run = functools.partial(run_trial, plan=plan, space=space_fn, train=train)
    show = _Progress(study, settings, say)
    if workers == 1:
        optimize_here(study, settings, objective_for(settings, run), after_each=lambda study, trial: show())
    else:
        run_workers(study, spec, settings, run, plan.folder / "workers", show)
    show()
    confirmed, best_name, best_config = confirm_top(study, plan, settings, train, confirm, confirm_seeds, say)
    write_report(study, plan, settings, confirmed, best_name, best_config, say)
    return TuneResult(folder=plan.folder, best_config=best_config, best=best_name, confirmed=confirmed,
                      counts=counts(study), seconds=time.perf_counter() - started)


class _Progress:
    """One line when a trial finishes: trial i of N, the best so far and an estimate of the time left."""

    def __init__(self, study: Any, settings: Settings, say: Callable[[str], None]) -> None:
        self.study, self.settings, self.say = study, settings, say
        self.start = time.monotonic()
        self.first = counts(study)["done"]
        self.last: int | None = None

    def __call__(self) -> None:
        c = counts(self.study)
        if c["done"] == self.last:
            return
        self.last = c["done"]
        elapsed = time.monotonic() - self.start
        new, left = c["done"] - self.first, max(0, self.settings.trials - c["done"])
        eta = f", about {_duration(elapsed / new * left)} left" if new > 0 and left else ""
        best = _best(self.study)
        best_text = f"best {best[1]:.4g} (trial {best[0]})" if best else "no trial completed yet"
        self.say(f"trial {min(c['done'], self.settings.trials)} of {self.settings.trials} finished "
                 f"({c['complete']} complete, {c['pruned']} pruned, {c['fail']} failed): {best_text}; "
                 f"{_duration(elapsed)} so far{eta}")


def _best(study: Any) -> tuple[int, float] | None:
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    top = max(complete, key=lambda t: t.value)
    return top.number, top.value


def _needs_optuna() -> None:
    try:
        import optuna
    except ImportError as err:
        raise ImportError("ppo-td tune needs Optuna: pip install -e '.[tune]' (or pip install 'optuna>=5,<6')") from err
    if int(optuna.__version__.split(".")[0]) < 5:
        raise ImportError(f"ppo-td tune needs Optuna 5 (found {optuna.__version__}): pip install -U 'optuna>=5,<6'")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _checked(base: TrainConfig, folder: Path, trials: int, seeds: int, frames: int, score: str,
             envs: tuple[str, ...], ranges: dict[str, tuple[float, float]], sampler: str, pruner: str, workers: int,
             storage: str | None, study_name: str | None, seed: int | None, confirm: int, confirm_seeds: int,
             timeout: float | None, threads: int | None) -> tuple[Plan, Settings]:
    """The plan and settings, every argument checked with an error naming the flag and the fix."""
    if trials < 1:
        raise ValueError(f"--trials {trials}: give 1 or more")
    if seeds < 1:
        raise ValueError(f"--seeds {seeds}: give 1 or more seeds a trial")
    if frames < base.frames_per_batch:
        raise ValueError(f"--frames {frames}: fewer than one batch of the base config ({base.frames_per_batch}); "
                         "give more frames a run")
    if score not in SCORES:
        raise ValueError(f"--score {score}: choose one of {', '.join(SCORES)}")
    if score == "eval" and base.eval_episodes == 0:
        raise ValueError("--score eval scores a run by its final evaluation, and the base config runs none "
                         "(eval_episodes=0): give --eval-episodes N, or --score last100 or auc")
    if sampler not in SAMPLERS:
        raise ValueError(f"--sampler {sampler}: choose one of {', '.join(SAMPLERS)}")
    if pruner not in PRUNERS:
        raise ValueError(f"--pruner {pruner}: choose one of {', '.join(PRUNERS)}")
    if workers < 1:
        raise ValueError(f"--workers {workers}: give 1 or more processes")
    if confirm < 0 or confirm_seeds < 1:
        raise ValueError(f"--confirm {confirm} --confirm-seeds {confirm_seeds}: give 0 or more trials to confirm "
                         "and 1 or more seeds each")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"--timeout {timeout}: give the seconds after which no new trial starts (> 0)")
    if base.env.multiagent and len(envs) > 1:
        raise ValueError("--envs: several multi-agent envs are not tuned together; tune one at a time")
    if len(envs) > 1:
        missing = [e for e in envs if e not in ranges]
        if missing:
            raise ValueError(f"--envs: tuning {len(envs)} envs together needs each env's score range to normalize "
                             f"it; give --score-range for {', '.join(missing)} (ENV=LOW:HIGH, e.g. a random "
                             "policy's score and a good one's)")
    unknown = [e for e in ranges if e not in (envs or (base.env.env_id,))]
    if unknown:
        raise ValueError(f"--score-range for {', '.join(unknown)}, which is not tuned here (envs: "
                         f"{', '.join(envs or (base.env.env_id,))})")
    for env_id, (low, high) in ranges.items():
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"--score-range {env_id}={low}:{high}: needs LOW < HIGH")
    plan = Plan(base=base, folder=folder, seeds=seeds, frames=frames, score=score, envs=envs, ranges=ranges,
                per_seed_reports=pruner == "wilcoxon", threads=threads if threads is not None else
                (1 if workers > 1 else None))
    settings = Settings(trials=trials, workers=workers, sampler=sampler, pruner=pruner, storage=storage,
                        study_name=study_name or "ppo_td", seed=seed, timeout=timeout)
    return plan, settings


def _plan_record(plan: Plan, settings: Settings, space: Any) -> dict[str, Any]:
    """What the trials run (``tune.json``): a continued study must run the same."""
    named = space if isinstance(space, str) or space is None else \
        f"{getattr(space, '__module__', '?')}:{getattr(space, '__qualname__', type(space).__name__)}"
    return {"base": identity_dict(plan.base), "seeds": plan.seeds, "frames": plan.frames, "score": plan.score,
            "envs": list(plan.env_ids), "ranges": {k: list(v) for k, v in plan.ranges.items()}, "space": named,
            "sampler": settings.sampler, "pruner": settings.pruner, "study_name": settings.study_name,
            "storage": settings.storage}


def default_folder(plan: Plan, what: dict[str, Any]) -> Path:
    """``tune/<env>-<8 hex digits of what the trials run>``: the same command finds its study again, another plan
    gets a folder of its own."""
    import hashlib

    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:8]
    env = "+".join(plan.env_ids).replace("/", "_").replace(":", "_")
    return Path("tune") / f"{env}-{digest}"


def _record(plan: Plan, settings: Settings, what: dict[str, Any], say: Callable[[str], None]) -> None:
    """Write ``tune.json`` (what the trials run), or check a continued study runs the same: a study whose trials
    ran another plan is refused, naming the difference (trials, workers, timeout and confirmation may change)."""
    plan.folder.mkdir(parents=True, exist_ok=True)
    path = plan.folder / "tune.json"
    if path.exists():
        before = json.loads(path.read_text())
        changed = sorted(k for k in what if json.dumps(before.get(k), sort_keys=True) != json.dumps(what[k],
                                                                                                   sort_keys=True))
        if changed:
            raise ValueError(f"{plan.folder} holds a study whose trials ran another plan ({', '.join(changed)} "
                             f"differ; see {path}): continue it with the same flags, or give another --study-dir")
        return
    path.write_text(json.dumps(what, indent=2) + "\n")
    say(f"study folder {plan.folder}: {settings.trials} trials x {plan.seeds} seeds x {len(plan.env_ids)} env(s) of "
        f"{plan.frames} frames; sampler {settings.sampler}, pruner {settings.pruner}, {settings.workers} worker(s)")
