"""How a run ends other than at its budget's end: an interrupt (:class:`TrainingInterrupted`, the exit code the command
line gives it), the callbacks' ``on_end``, and a resume that only has the final evaluation left."""

from __future__ import annotations

import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppo_td.collect import WorkerError
from ppo_td.experiment.finish import finish_folder
from ppo_td.persist import RunFolder
from ppo_td.persist.loggers import make_loggers
from ppo_td.training import TrainResult
from ppo_td.training.callbacks import hooks


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C, a notebook's interrupt) or SIGTERM stopped training at the end of an iteration. A run folder's
    checkpoint of that iteration is written; the message says how to continue. A ``KeyboardInterrupt``, as Python
    reports Ctrl-C, carrying what was trained: ``result`` (a :class:`~ppo_td.training.TrainResult` without a final
    evaluation), ``checkpoint`` (None without a run folder), ``iteration`` and ``signum``."""

    def __init__(self, signum: int, iteration: int, result: TrainResult, run_dir: Path | None,
                 during: str = "training") -> None:
        self.signum, self.iteration, self.result, self.run_dir, self.during = signum, iteration, result, run_dir, during
        self.checkpoint = run_dir / "checkpoint.pt" if run_dir is not None else None
        name = signal.Signals(signum).name
        if run_dir is None and during != "training":
            text = (f"{name}: the {during} stopped; training is complete, and with no run_dir nothing was saved: the "
                    "TrainResult, trained but not evaluated, is this exception's .result")
        elif run_dir is None:
            text = (f"stopped by {name} after iteration {iteration}; no run_dir, so nothing was saved: the "
                    "TrainResult so far is this exception's .result (train with run_dir=... to continue a run later)")
        elif during == "training":
            text = (f"stopped by {name} after iteration {iteration}; checkpoint: {self.checkpoint}; continue with "
                    f"ppo_td.resume({str(run_dir)!r}) or `ppo-td train --resume {shlex.quote(str(run_dir))}`")
        else:
            text = (f"{name}: the {during} stopped; training is complete and checkpointed ({self.checkpoint}). "
                    f"Finish it (evaluation, summary.json) with ppo_td.resume({str(run_dir)!r}) or `ppo-td train "
                    f"--resume {shlex.quote(str(run_dir))}`")
        super().__init__(text)


def end_hooks(callbacks: Sequence[Any], result: TrainResult, interrupted: bool = False) -> None:
    """Each callback's ``on_end(result)``, every one called whatever another raised; the first error raised after
    them, or with ``interrupted`` said on stderr (the interrupt is what goes up)."""
    errors = []
    for hook in hooks(callbacks, "on_end"):
        try:
            hook(result)
        except Exception as err:  # noqa: BLE001 - a user's hook: the others still get the result
            errors.append((hook, err))
    for hook, err in errors if interrupted else ():
        print(f"a callback's on_end ({getattr(hook, '__qualname__', hook)}) raised {type(err).__name__}: {err}",
              file=sys.stderr)
    if errors and not interrupted:
        raise errors[0][1]


def final_stopped(err: BaseException, out: Path | None, result: TrainResult) -> TrainingInterrupted:
    """A Ctrl-C during the final evaluation: training is checkpointed, the evaluation is to finish."""
    last = int(result.history[-1]["iteration"]) if result.history else 0
    return TrainingInterrupted(getattr(err, "signum", signal.SIGINT), last, result, out, during="final evaluation")


def exit_on(err: BaseException, command: str) -> int:
    """What ``ppo-td train`` says of a run that ended with ``err`` (the lines, on stdout or stderr), and its exit
    code."""
    if isinstance(err, TrainingInterrupted):
        if err.checkpoint is not None and err.during == "training":
            print(f"stopped by {signal.Signals(err.signum).name} after iteration {err.iteration}; checkpoint: "
                  f"{err.checkpoint}\ncontinue with: ppo-td train --resume {shlex.quote(str(err.run_dir))}")
        else:
            print(f"{command}: {err}", file=sys.stderr)
        return 128 + err.signum
    if isinstance(err, WorkerError):
        print(f"{command}: error: {err}\ntraining stopped after iteration {err.iteration}", file=sys.stderr)
        if getattr(err, "checkpoint", None) is not None:
            folder = shlex.quote(str(err.checkpoint.parent))
            print(f"checkpoint: {err.checkpoint}\ncontinue with: ppo-td train --resume {folder}", file=sys.stderr)
        return 1
    if not getattr(err, "said", False):
        print(f"{command}: error: {err}", file=sys.stderr)
    return 1


def finish_only(folder: RunFolder, config: Any, callbacks: Sequence[Any], loggers: Sequence[str],
                project: str | None, started: float) -> TrainResult:
    """A run whose training is complete but whose final evaluation did not run (interrupted, crashed): the
    evaluation, summary and curve, the evaluation to the run's loggers (those recorded, unless ``loggers``), the
    callbacks' ``on_end``. The result holds the trained actor and the history read back (no critic, no pipeline)."""
    from ppo_td.persist import load_for_evaluation, read_metrics
    from ppo_td.persist.loggers import close_loggers, log_final

    rows = [{k: _read(v) for k, v in row.items()} for row in read_metrics(folder.path)]
    result = TrainResult(actor=load_for_evaluation(folder.path / "checkpoint.pt").actor, critic=None, pipeline=None,
                         history=rows)
    recorded = folder.recorded()
    made = make_loggers(tuple(loggers) or tuple(recorded.get("loggers", ())), folder.path, folder.path.name,
                        folder.run_id, project or recorded.get("project"))
    try:
        evaluations = finish_folder(folder.path, config, started, result=result)
        if evaluations and rows:
            log_final(made, evaluations, int(rows[-1]["frames"]))
    except KeyboardInterrupt as err:
        close_loggers(made)
        end_hooks(callbacks, result, interrupted=True)
        raise final_stopped(err, folder.path, result) from None
    except BaseException:
        close_loggers(made)
        raise
    close_loggers(made)
    end_hooks(callbacks, result)
    return result


def _read(text: str) -> Any:
    """A metrics.csv cell read back: an int, a float (``nan`` too), else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except (TypeError, ValueError):
            continue
    return text
