"""The Optuna study a tuning run shares with its workers: storage, sampler and pruner from their names, the worker
processes, a worker that dies, and a study stopped and continued.

- Storage: a journal file (Optuna's ``JournalFileBackend``) in the study folder by default, which several processes
  on one machine share; ``storage=URL`` an RDB database other machines can join (the storage is what distributes the
  work). SQLite with several workers is refused with Optuna's own reason.
- Workers: ``workers`` processes (never threads), each running trials until the study has ``trials`` finished ones
  (complete or pruned). A worker that dies (a signal, the machine's out-of-memory killer) leaves its trial failed,
  named so, and another takes its place; an error in a trial (an exception) stops the study and names it.
- Stopped and continued: Ctrl-C fails the running trials as interrupted (Optuna fails a trial on ``SIGINT``; a
  trial of a process that is gone is failed here); the same command loads the study and runs each interrupted
  trial's parameters again first, then goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import multiprocessing
import os
import socket
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppo_td.persist.runfolder import process_alive

SAMPLERS = {
    "tpe": "Optuna's TPESampler, multivariate (RL Zoo's choice), after 10 random trials (the default)",
    "random": "RandomSampler",
    "cmaes": "CmaEsSampler (pip install cmaes)",
    "gp": "GPSampler, a Gaussian process (scipy; torch is there already)",
    "qmc": "QMCSampler, Sobol points (scipy)",
}
PRUNERS = {
    "median": "MedianPruner: stops a trial whose value is below the median of earlier trials at the same step "
              "(after 5 trials and the first third of a run; the default)",
    "hyperband": "HyperbandPruner over the frames a trial trains",
    "halving": "SuccessiveHalvingPruner over the frames a trial trains",
    "wilcoxon": "WilcoxonPruner between seeds: a signed-rank test of the trial's seeds against the best trial's "
                "same seeds (scipy; --seeds 5 or more)",
    "none": "NopPruner: every trial runs all its seeds",
}

SQLITE_REASON = ("Optuna: \"We would never recommend SQLite3 for parallel optimization\": SQLite does not support "
                 "the SELECT ... FOR UPDATE that concurrent trials need, and it gives 'database is locked' errors "
                 "under concurrent writers (Optuna's FAQ, sqlite_concurrency)")

INTERRUPTED = "interrupted"
"""A failed trial's user attribute: the trial was stopped (Ctrl-C, its process gone) and is run again."""

WORKER_ERROR = 3
"""A worker's exit code when a trial raised an error (not a pruning, a divergence or an interrupt)."""


class StudyError(RuntimeError):
    """A trial raised an error: the study stops, naming it and the worker's log."""


def storage_for(folder: Path, storage: str | None, workers: int) -> Any:
    """The study's storage: a journal file (``folder/study.log``, or ``storage`` ending ``.log``) or an RDB URL.

    Raises:
        ValueError: SQLite with several workers (Optuna's reason quoted), or a storage that is neither.
    """
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    check_storage(storage, workers)
    if storage is None or storage.endswith((".log", ".journal")):
        path = folder / "study.log" if storage is None else Path(storage)
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    return storage


def check_storage(storage: str | None, workers: int) -> None:
    """``--storage`` as :func:`storage_for` takes it (a journal file or an RDB URL; no SQLite with several workers),
    checked before anything is written."""
    if storage is None or storage.endswith((".log", ".journal")):
        return
    if "://" not in storage:
        raise ValueError(f"--storage {storage}: give a journal file (a path ending .log) or an RDB URL "
                         "(postgresql://user:password@host/db, mysql://..., sqlite:///file.db)")
    if storage.startswith("sqlite") and workers > 1:
        raise ValueError(f"--storage {storage} with --workers {workers}: {SQLITE_REASON}. Leave --storage out (a "
                         "journal file in the study folder, which processes on one machine share) or give a "
                         "PostgreSQL or MySQL URL for several machines")


def make_sampler(name: str, seed: int | None) -> Any:
    import optuna

    samplers = {
        "tpe": lambda: optuna.samplers.TPESampler(multivariate=True, n_startup_trials=10, seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "cmaes": lambda: optuna.samplers.CmaEsSampler(seed=seed),
        "gp": lambda: optuna.samplers.GPSampler(seed=seed),
        "qmc": lambda: optuna.samplers.QMCSampler(seed=seed),
    }
    if name not in samplers:
        raise ValueError(f"--sampler {name}: choose one of {', '.join(SAMPLERS)}")
    if name == "cmaes":
        _needs("cmaes", "--sampler cmaes", "pip install cmaes")
    if name in ("gp", "qmc"):
        _needs("scipy", f"--sampler {name}", "pip install scipy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # QMC's
        return samplers[name]()


def make_pruner(name: str, frames: int, seeds: int, runs_per_seed: int) -> Any:
    """The pruner: trials are measured in frames trained (``seeds`` x ``runs_per_seed`` runs of ``frames``)."""
    import optuna

    total = frames * seeds * runs_per_seed
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=frames // 3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, frames // 10), max_resource=total)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, frames // 10))
    if name == "wilcoxon":
        _needs("scipy", "--pruner wilcoxon", "pip install scipy")
        if seeds < 5:  # its smallest one-sided p with n pairs is 2**-n: 4 pairs before the last seed reach 0.0625
            raise ValueError(f"--pruner wilcoxon --seeds {seeds}: the pruner pairs a trial's seeds with the best "
                             "trial's and stops it below p = 0.1, which needs 4 pairs before the last seed: give "
                             "--seeds 5 or more (or --pruner median)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=2)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ValueError(f"--pruner {name}: choose one of {', '.join(PRUNERS)}")


def _needs(module: str, what: str, install: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ValueError(f"{what} needs {module}: {install}")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the study runs (what the trials run is the :class:`~ppo_td.tuning.trial.Plan`)."""

    trials: int = 30
    workers: int = 1
    sampler: str = "tpe"
    pruner: str = "median"
    storage: str | None = None
    study_name: str = "ppo_td"
    seed: int | None = 0
    """The sampler's seed (each worker adds its index); None for an unseeded sampler."""
    timeout: float | None = None
    """Seconds after which no new trial starts (the running ones finish)."""


def counts(study: Any) -> dict[str, int]:
    """Trials by state; ``done`` is the finished ones that count toward the budget (complete and pruned). A trial
    that started when the budget was spent (several workers at once) is no trial of the study and is not counted."""
    from optuna.trial import TrialState

    trials = [t for t in study.get_trials(deepcopy=False) if not t.user_attrs.get("over_budget")]
    out = {state.name.lower(): sum(t.state == state for t in trials) for state in TrialState}
    out["done"] = out["complete"] + out["pruned"]
    return out


FAILURES = "failures.jsonl"
"""The study folder's record of trials failed by the study itself (a worker that died, a process gone): one JSON line
each, ``{"trial": n, "why": ..., "retry": bool}``. Optuna's public API fails a trial (``Study.tell``) but cannot say
why; this file does, and :func:`recover` reads it."""


def failures(folder: Path) -> dict[int, dict[str, Any]]:
    """The trials the study failed itself, by number (a truncated last line, from a kill mid-write, is skipped)."""
    path = folder / FAILURES
    out: dict[int, dict[str, Any]] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            out[int(row["trial"])] = row
        except (ValueError, KeyError, TypeError):
            continue
    return out


def fail(folder: Path, study: Any, number: int, why: str, retry: bool) -> None:
    """Fail trial ``number`` (if still RUNNING) and record why, and whether it is to run again (:func:`recover`)."""
    from optuna.trial import TrialState

    study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
    with (folder / FAILURES).open("a") as out:
        out.write(json.dumps({"trial": number, "why": why, "retry": retry}) + "\n")


def recover(folder: Path, study: Any) -> list[int]:
    """Make a study that was stopped whole again: a RUNNING trial of a process of this machine that is gone (this
    process's own pid included: a command just started runs no trial yet) fails as interrupted; each trial failed
    by an interrupt (Ctrl-C, a process gone) is queued once with its parameters. A trial whose worker was killed
    while it ran (out of memory?) is not run again: it would likely be killed again. Returns the numbers queued."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid = t.user_attrs.get("pid")
        gone = pid == os.getpid() or not isinstance(pid, int) or not process_alive(pid)
        if t.user_attrs.get("host") == host and gone:
            fail(folder, study, t.number, "its process is gone (the study was stopped)", retry=True)
    recorded = failures(folder)
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials
               if t.state != TrialState.FAIL or not t.user_attrs.get("over_budget")}
    queued = []
    for t in trials:
        if t.state != TrialState.FAIL or t.number in retried or not t.params or "retry_of" in t.user_attrs:
            continue  # each original trial runs again once at most
        if t.user_attrs.get(INTERRUPTED) or recorded.get(t.number, {}).get("retry"):
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
            queued.append(t.number)
    return queued


@contextlib.contextmanager
def quiet_optuna() -> Any:
    """Optuna's INFO lines (one per trial) off: the study prints its own progress."""
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(level)


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """What a process needs to open the study (picklable: each worker opens it itself)."""

    folder: Path
    settings: Settings
    frames: int
    seeds: int
    runs_per_seed: int

    def storage(self) -> Any:
        """The storage object (:func:`storage_for`; an RDB URL through Optuna's ``get_storage``)."""
        from optuna.storages import get_storage

        found = storage_for(self.folder, self.settings.storage, self.settings.workers)
        return get_storage(found) if isinstance(found, str) else found

    def load(self, index: int = 0) -> Any:
        """The study, created if it is not there yet (several processes may race to: Optuna takes that). Its
        sampler's seed mixes the settings' seed with ``index`` (the worker's), this machine's name and the trials the
        study has already: workers, machines and a continued study do not sample the same parameters again, and the
        same command on the same study state samples the same."""
        import optuna

        s = self.settings
        storage = self.storage()
        pruner = make_pruner(s.pruner, self.frames, self.seeds, self.runs_per_seed)
        with quiet_optuna():
            study = optuna.create_study(study_name=s.study_name, storage=storage, direction="maximize",
                                        load_if_exists=True, sampler=make_sampler(s.sampler, None), pruner=pruner)
            if s.seed is None:
                return study
            mixed = zlib.crc32(f"{s.seed}/{index}/{socket.gethostname()}/{len(study.trials)}".encode())
            return optuna.load_study(study_name=s.study_name, storage=storage, sampler=make_sampler(s.sampler, mixed),
                                     pruner=pruner)


class OverBudget(Exception):  # noqa: N818 - a trial that found the study's budget spent when it started
    """Raised at a trial's start when the study already has its trials (several workers started at once)."""


def objective_for(settings: Settings, run: Callable[[Any], float]) -> Callable[[Any], float]:
    """``run(trial)`` with the study's rules around it: the budget checked at the start, a pruning reason kept, an
    interrupt marked so the trial is run again."""
    import optuna
    from optuna.trial import TrialState

    from ppo_td.tuning.trial import Pruned

    def objective(trial: Any) -> float:
        ahead = [t for t in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED,
                                                                         TrialState.RUNNING))
                 if (t.state != TrialState.RUNNING or t.number < trial.number) and not t.user_attrs.get("over_budget")]
        if len(ahead) >= settings.trials:  # trials that started before this one fill the budget
            trial.set_user_attr("over_budget", True)
            trial.study.stop()
            raise OverBudget
        try:
            return run(trial)
        except Pruned as err:
            trial.set_user_attr("pruned", str(err))
            raise optuna.TrialPruned(str(err)) from err
        except KeyboardInterrupt:
            trial.set_user_attr(INTERRUPTED, "Ctrl-C")
            raise

    return objective


def optimize_here(study: Any, settings: Settings, objective: Callable[[Any], float],
                  after_each: Callable[[Any, Any], None] | None = None) -> None:
    """Run trials in this process until the study has ``settings.trials`` finished ones (or the timeout);
    ``after_each(study, trial)`` after each."""
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    if counts(study)["done"] >= settings.trials:
        return
    with quiet_optuna():
        study.optimize(objective, timeout=settings.timeout, catch=(OverBudget,),
                       callbacks=[MaxTrialsCallback(settings.trials, states=(TrialState.COMPLETE, TrialState.PRUNED)),
                                  *([after_each] if after_each else [])])


def worker_main(spec: StudySpec, settings: Settings, run: Callable[[Any], float], index: int, log: str) -> None:
    """A worker process: its output into ``log``; trials until the budget is spent. An error in a trial exits
    with :data:`WORKER_ERROR`, its traceback at the end of the log."""

    with open(log, "a") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        logging.basicConfig(stream=out, level=logging.WARNING, force=True)
        try:
            study = spec.load(index)
            optimize_here(study, settings, objective_for(settings, run))
        except KeyboardInterrupt:
            out.write("worker stopped by an interrupt\n")
            out.flush()
            raise SystemExit(130) from None  # the process's exit code
        except Exception:  # noqa: BLE001 - an error in a trial: said in the log, and by the exit code
            out.write(traceback.format_exc())
            out.flush()
            raise SystemExit(WORKER_ERROR) from None


def run_workers(study: Any, spec: StudySpec, settings: Settings, run: Callable[[Any], float], logs: Path,
                progress: Callable[[], None], poll: float = 2.0) -> None:
    """``settings.workers`` processes running trials until the budget is spent; a worker that dies is replaced
    (its trial failed, named so in ``failures.jsonl``) up to 3 times a worker, then the study stops
    (:class:`StudyError`); an error in a trial stops the study too. ``progress()`` is called each ``poll`` seconds.
    Ctrl-C stops the workers (each fails its trial as interrupted) and re-raises."""
    import pickle

    try:
        pickle.dumps((spec, settings, run))
    except Exception as err:  # noqa: BLE001 - pickle raises several kinds; all mean the same here
        raise ValueError(f"--workers {settings.workers}: the worker processes cannot receive the study's parts "
                         f"({err}); give the search space and any part as importable module-level functions "
                         "(module:function), not lambdas or functions of __main__") from err
    context = multiprocessing.get_context("spawn")
    logs.mkdir(parents=True, exist_ok=True)
    started, restarts = 0, 0
    workers: dict[int, Any] = {}

    def start() -> None:
        nonlocal started
        log = logs / f"worker-{started}.log"
        process = context.Process(target=worker_main, args=(spec, settings, run, started, str(log)))
        process.start()
        workers[started] = process
        started += 1

    try:
        for _ in range(settings.workers):
            start()
        while workers:
            time.sleep(poll)
            progress()
            for index, process in list(workers.items()):
                if process.is_alive():
                    continue
                process.join(timeout=5)
                del workers[index]
                code = process.exitcode
                if code == 0:
                    continue
                log = logs / f"worker-{index}.log"
                if code == WORKER_ERROR:
                    raise StudyError(f"a trial raised an error (worker {index}): {_last_line(log)}; the traceback "
                                     f"is at the end of {log}")
                _fail_trials_of(spec.folder, study, process.pid,
                                f"its worker process ended with exit code {code} (killed? out of memory?)", False)
                if counts(study)["done"] >= settings.trials:
                    continue
                if restarts >= 3 * settings.workers:
                    raise StudyError(f"worker processes died {restarts + 1} times (the last: exit code {code}; its "
                                     f"output: {log}); the study stops. Check the machine's memory, or run fewer "
                                     "--workers")
                restarts += 1
                start()
    except BaseException:
        stop_processes(list(workers.values()))
        for process in workers.values():
            _fail_trials_of(spec.folder, study, process.pid, "stopped with the study", True)
        raise


def _fail_trials_of(folder: Path, study: Any, pid: int | None, why: str, retry: bool) -> None:
    from optuna.trial import TrialState

    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if t.user_attrs.get("pid") == pid and t.user_attrs.get("host") == host:
            fail(folder, study, t.number, why, retry)


def stop_processes(processes: list[Any], wait: float = 60.0) -> None:
    """Stop ``processes``: Ctrl-C reached them too (one terminal, one process group); each still alive after a few
    seconds gets ``SIGINT``, and is killed after ``wait`` seconds in all."""
    import signal

    deadline = time.monotonic() + wait
    for process in processes:
        process.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGINT)
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text().splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
