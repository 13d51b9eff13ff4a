"""One run of a built pipeline to its end, the same whichever entry point started it (``ppo-td train``,
``ppo_td.train``, ``ppo_td.resume``, the tuner): the run folder's records, progress, evaluation during training,
Ctrl-C, the final checkpoint and evaluation, and the lines that say them."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppo_td.collect import WorkerError, shutdown
from ppo_td.experiment.ending import TrainingInterrupted, end_hooks, final_stopped
from ppo_td.experiment.evaluator import Best, PeriodicEvaluation
from ppo_td.experiment.finish import FLAG, HOWS, finish_folder, say_evaluations
from ppo_td.experiment.progress import Progress
from ppo_td.experiment.report import evaluation_start
from ppo_td.experiment.signals import stop_after_iteration
from ppo_td.persist import BEST, Checkpointer, Resumed, RunFolder, RunLogger, load_checkpoint, why_inexact
from ppo_td.persist.loggers import make_loggers
from ppo_td.training import (
    COMPILE_PAYS_STEPS,
    NonFiniteError,
    Pipeline,
    StopTraining,
    TrainResult,
    final_evaluations,
    run,
)
from ppo_td.training.callbacks import hooks
from ppo_td.training.ranks import RankError
from ppo_td.training.threads import using_threads


@dataclasses.dataclass
class Session:
    """A built pipeline run to its end (:meth:`run`), in ``folder`` where it has one (None: in memory only)."""

    pipeline: Pipeline
    folder: RunFolder | None = None
    callbacks: Sequence[Any] = ()
    progress: bool | str = True
    """True: a bar where one can show, lines otherwise; 'lines': lines; False: neither."""
    log_every: int | None = None
    checkpoint_every: int = 10
    keep_checkpoints: int = 3
    loggers: Sequence[str] = ()
    """Logger names (``tensorboard``, ``wandb``, ``mlflow``) writing into the run folder."""
    project: str | None = None
    video_every: int = 0
    resumed: Resumed | None = None
    started: float = dataclasses.field(default_factory=time.perf_counter)
    write: Callable[[str], None] = print
    """Where the run's lines go (notes, evaluations): the progress bar's ``write`` once it shows."""
    _ended: bool = dataclasses.field(default=False, init=False)

    def run(self) -> TrainResult:
        """Train to the end of the budget (or a stop), checkpoint, evaluate, summarize; returns the result.

        Raises:
            TrainingInterrupted: SIGINT or SIGTERM stopped it (checkpointed where it has a folder).
            NonFiniteError, WorkerError: training failed (the message names the last checkpoint).
        """
        with using_threads(self.pipeline.threads):  # the final evaluation too, as the command line does
            try:
                if self.pipeline.config.eval_every and not self.pipeline.rebuildable:
                    raise ValueError("eval_every: evaluation during training runs on an env of its own, built from "
                                     "the config; the env is a TorchRL env ppo_td cannot rebuild: pass a factory, or "
                                     "set eval_every=0")
                logger = self._open_records()
            except BaseException:
                shutdown(self.pipeline.collector)  # worker processes or a Ray instance may already be running
                raise
            try:
                return self._finish(self._train(logger), logger)
            except BaseException:
                if logger is not None and not self._ended:  # a failure or an interrupt: the files closed all the same
                    logger.close()
                raise

    def _open_records(self) -> RunLogger | None:
        """The run folder's records (run.json, config.json) and its logger; None without a folder."""
        if self.folder is None or not self.pipeline.main:  # over ranks, rank 0 keeps the records
            return None
        p, folder = self.pipeline, self.folder
        import torch

        folder.record(threads=torch.get_num_threads())  # the run's (set around this call)
        folder.write_config(p.config)  # on resume, with the collector settings the run now uses
        why = why_inexact(p)
        entry = None if self.resumed is None else {"iteration": self.resumed.iteration, "exact": self.resumed.exact,
                                                   "why": self.resumed.why, "time": time.time()}
        folder.record(resumed=entry, resume={"exact": why is None, "why": why or ""})
        recorded = folder.recorded() if self.resumed else {}  # a resume keeps the run's loggers unless given
        names = tuple(self.loggers) or tuple(recorded.get("loggers", ()))
        project = self.project or recorded.get("project")
        folder.record(loggers=list(names), project=project)
        made = make_loggers(names, folder.path, folder.path.name, folder.run_id, project)
        return RunLogger(folder.path, p.config, resume_iteration=self.resumed.iteration if self.resumed else None,
                         groups=p.groups, loggers=made)

    def _train(self, logger: RunLogger | None) -> TrainResult:
        p, config = self.pipeline, self.pipeline.config
        frames, iteration, elapsed = ((self.resumed.frames, self.resumed.iteration, self.resumed.elapsed)
                                      if self.resumed else (0, 0, 0.0))
        planned = config.num_iterations * config.frames_per_batch
        main = p.main  # over ranks: rank 0 shows, evaluates and writes; every rank trains and checkpoints its part
        bar = Progress(planned, config.num_iterations, initial=frames, bar=self.progress if main else False,
                       every=self.log_every, label="reward per agent" if config.env.multiagent else "return",
                       info_keys=config.env.info_keys)
        self.write = bar.write if main else _quiet  # the notes below: once, over ranks too
        if self.resumed is None and planned != config.total_frames:  # said once, at the start
            self.write(f"note: total_frames={config.total_frames:,} is not a multiple of frames_per_batch="
                       f"{config.frames_per_batch:,}: the run trains {config.num_iterations:,} batches, {planned:,} "
                       "frames")
        adaptations = config.optim.update_epochs * config.optim.num_minibatches
        if (self.resumed is None and config.optim.desired_kl is not None and config.optim.kl_lr_every == "minibatch"
                and adaptations > MANY_ADAPTATIONS):
            self.write(f"note: optim.desired_kl adapts the learning rate {adaptations} times an update "
                       f"({config.optim.update_epochs} epochs x {config.optim.num_minibatches} minibatches): rsl_rl's "
                       "rule was made for about 20, and with many it swings between its bounds every update (measured "
                       "on Walker2d: docs/robot-learning.md); fewer, larger minibatches or optim.kl_lr_every='epoch'")
        steps = config.num_iterations * adaptations
        if self.resumed is None and p.compiled and config.compile == "auto":
            self.write(f"note: compile='auto' compiles this run ({steps:,} minibatch steps, past the "
                       f"{COMPILE_PAYS_STEPS:,} where it paid on this project's CPU): the first iteration waits for "
                       "the compilation (6-16 s there); compile=False (--compile False) runs eager: "
                       "docs/performance.md#compile")
        if p.ranks is not None:
            self.write(f"{p.world} ranks: each steps {config.env.num_envs // p.world} of the {config.env.num_envs} env "
                       f"copies and {config.frames_per_batch // p.world:,} frames of each {config.frames_per_batch:,}"
                       f"-frame batch; every minibatch's gradient is averaged over the ranks (docs/scaling.md)")
        out = self.folder.path if self.folder is not None else None
        checkpointer = (Checkpointer(out, self.checkpoint_every, self.keep_checkpoints,
                                     run_id=self.folder.run_id if main else None, write=main)
                        if out is not None else None)
        stop = _Stop()
        self.evaluator = self._evaluator(checkpointer, out) if main else None
        videos = self._videos(out, stop, logger) if main else []
        chain = [*([self.evaluator] if self.evaluator else []), *self.callbacks, bar,
                 *([logger] if logger else []), *videos, *([checkpointer] if checkpointer else []), stop]
        # over ranks, torchrun passes a Ctrl-C on to every rank the terminal gave it to already: one stop
        with stop_after_iteration(stop.request, checkpoint=out is not None and main,
                                  quiet=lambda: not main or stop.failed,
                                  same_within=0.0 if p.ranks is None else REPEATED) as received:
            try:
                result = run(p, callbacks=chain, frames=frames, iteration=iteration, elapsed=elapsed,
                             evaluate_at_end=out is None and not p.rebuildable)  # a TorchRL env: on itself
            except NonFiniteError as err:
                raise NonFiniteError(f"{err}\nlast good checkpoint: {_kept(out)}") from err
            except RankError as err:
                # said at once, by every rank still there: torchrun stops the ranks of a failed run with SIGTERM
                # within a fraction of a second, and may end this process before its caller could say it
                stop.failed = True
                said = RankError(f"{err}\nlast good checkpoint: {_kept(out)}")
                said.said = True
                print(f"error: {said}", file=sys.stderr, flush=True)
                raise said from err
            except WorkerError as err:
                if checkpointer is not None and p.ranks is None:  # the last completed iteration, intact in the
                    # pipeline (over ranks, the others are not there to give their state: the last one stands)
                    checkpointer.save(p, err.frames, err.iteration, err.elapsed)
                    err.checkpoint = out / "checkpoint.pt"
                raise
            finally:
                bar.close()
            result.best = self.evaluator.best if self.evaluator else None
            last = result.history[-1] if result.history else {"frames": frames, "iteration": iteration,
                                                              "time": elapsed}
            if checkpointer is not None and (result.history or result.stopped):
                checkpointer.save(p, last["frames"], last["iteration"], last["time"], ended_early=result.ended_early)
            if received:
                result.stopped = True
                self._end(result, logger, interrupted=True)
                raise TrainingInterrupted(received[0], last["iteration"], result, out)
        trained, seconds = last["frames"] - frames, last["time"] - elapsed
        if result.ended_early:
            self.write(f"ended early: {result.ended_early}")
        self.write(f"trained {trained} frames in {seconds:.1f} s ({trained / seconds if seconds > 0 else 0.0:.0f} "
                   "frames/s)")
        return result

    def _finish(self, result: TrainResult, logger: RunLogger | None) -> TrainResult:
        """The final evaluation (a folder's from its checkpoint; without one, the loop's), its lines, the loggers,
        and the callbacks' ``on_end``."""
        if result.stopped or not self.pipeline.main:  # over ranks, rank 0 evaluates
            self._end(result, logger)
            return result
        config = self.pipeline.config
        if self.folder is not None:
            try:
                finish_folder(self.folder.path, config, self.started, self.write, result)
            except KeyboardInterrupt as err:
                self._end(result, logger, interrupted=True)
                raise final_stopped(err, self.folder.path, result) from None
        else:
            if config.eval_episodes and self.pipeline.rebuildable:
                self.write(evaluation_start(config.env, config.eval_episodes, HOWS, config.eval_max_steps))
                try:
                    result.record_evaluations(*final_evaluations(self.pipeline))
                except KeyboardInterrupt as err:
                    self._end(result, logger, interrupted=True)
                    raise final_stopped(err, None, result) from None
            if result.evaluation is not None:
                say_evaluations([result.evaluation, result.evaluation_sampled], config, FLAG, self.write)
        self._end(result, logger)
        return result

    def _end(self, result: TrainResult, logger: RunLogger | None, interrupted: bool = False) -> None:
        """The final evaluation to the loggers, their files closed, then each callback's ``on_end``: an error in one
        does not keep the others from theirs; it is raised after them, or, on an interrupt, said on stderr (the
        interrupt, saying how to continue, is what the caller raises)."""
        self._ended = True
        if logger is not None:
            if result.evaluation is not None and result.history:
                logger.log_final([result.evaluation, result.evaluation_sampled], int(result.history[-1]["frames"]))
            logger.close()
        end_hooks(self.callbacks, result, interrupted)

    def _evaluator(self, checkpointer: Checkpointer | None, out: Path | None) -> PeriodicEvaluation | None:
        """Evaluation during training (``eval_every``), its best so far read back on a resume."""
        config = self.pipeline.config
        if not config.eval_every:
            return None
        save = None
        if checkpointer is not None:
            def save(pipeline: Pipeline, metrics: dict[str, Any], ev: Any) -> Path:
                numbers = {k: metrics[k] for k in ("eval_return", "eval_return_std", "eval_ended")}
                return checkpointer.save_best(pipeline, metrics, {**numbers, "episodes": ev.episodes})
        best = _best_in(out, self.resumed.iteration, self.write) if self.resumed and out is not None else None
        return PeriodicEvaluation(config.eval_every, hooks(self.callbacks, "on_evaluation"), save,
                                  write=lambda line: self.write(line), best=best)

    def _videos(self, out: Path | None, stop: _Stop, logger: RunLogger | None) -> list:
        """``video_every``: the callback recording an evaluation episode every N iterations into the folder."""
        if not self.video_every or out is None:
            return []
        from ppo_td.deploy.video import VideoRecorder, headless_rendering
        from ppo_td.training import evaluation_seed

        headless_rendering()
        sinks = [logger.log_video] if logger is not None and logger.loggers else []
        return [VideoRecorder(out / "videos", self.video_every, seed=evaluation_seed(self.pipeline.config.seed),
                              should_stop=lambda: stop.requested, sinks=sinks)]


MANY_ADAPTATIONS = 50
"""More KL-adaptive steps an update than this is said at the start: rsl_rl's configs make 20 (5 epochs x 4), CleanRL's
MuJoCo shape 320, where the rate swung from floor to cap every update (docs/robot-learning.md)."""
REPEATED = 2.0
"""Over ranks: seconds within which a second SIGINT or SIGTERM is the first one again (torchrun passes the terminal's
Ctrl-C on to ranks that had it already), not a second ask to stop at once."""


def _quiet(line: str) -> None:
    """Where the lines of a rank other than 0 go: rank 0 says them."""


def _kept(out: Path | None) -> Path | str:
    """The checkpoint a failed run leaves, or why there is none."""
    kept = out / "checkpoint.pt" if out is not None else None
    return (kept if kept is not None and kept.exists() else
            "none (checkpoint_every=N, --checkpoint-every N)" if out is not None else
            "none (train with run_dir=... to keep checkpoints)")


class _Stop:
    """The last callback: after a stop was asked for (a signal), ends training at the end of this iteration."""

    def __init__(self) -> None:
        self.requested = False
        self.failed = False
        """The run failed (a rank is gone): a signal now is a launcher stopping it, not a request to say."""

    def request(self) -> None:
        self.requested = True

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        if self.requested:
            raise StopTraining("interrupted")


def _best_in(out: Path, iteration: int, write: Callable[[str], None]) -> Best | None:
    """The best evaluation so far of a run folder (its ``best.pt``), for a resume from ``iteration`` to go on from.
    A ``best.pt`` of a later iteration (a crash after it, the resume from an earlier checkpoint) is of a history the
    resume drops, as it drops those rows of metrics.csv: it is removed, and said so."""
    if not (out / BEST).is_file():
        return None
    state = load_checkpoint(out / BEST)
    numbers = state.get("evaluation") or {}
    if int(state["iteration"]) > iteration:
        (out / BEST).unlink()
        write(f"note: {BEST} of iteration {state['iteration']} is after the checkpoint resumed (iteration "
              f"{iteration}): removed with the rest of that history; the evaluations from here keep a new one")
        return None
    if "eval_return" not in numbers:
        return None
    return Best(float(numbers["eval_return"]), None, int(state["frames"]), int(state["iteration"]), out / BEST)
