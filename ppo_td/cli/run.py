"""``ppo-td train`` at work: the run folder, the loop under the signal guard, the final checkpoint and evaluation."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ppo_td.cli.report import cap_note, format_evaluation
from ppo_td.cli.signals import exit_code, signal_name, stop_after_iteration
from ppo_td.config import TrainConfig, from_dict

if TYPE_CHECKING:
    from ppo_td.cli.command import TrainCommand
    from ppo_td.persist import RunFolder


def run_training(cmd: TrainCommand) -> int:
    """Train (or resume) as ``cmd`` says, write the run folder, print the evaluation; returns the exit code.

    The run folder is locked while it runs. The final checkpoint is written before the final evaluation, and
    ``--resume`` of a run whose training finished but whose evaluation did not (interrupted, crashed) runs
    the evaluation and writes the summary and plot.
    """
    from ppo_td.persist import RunFolder, load_checkpoint

    if cmd.resume:
        if Path(cmd.resume).is_file():
            raise ValueError(f"--resume takes a run folder; {cmd.resume} is a file (its run folder: "
                             f"{Path(cmd.resume).parent})")
        folder = RunFolder(cmd.resume)
        with folder.locked():
            state = load_checkpoint(folder.path / "checkpoint.pt")
            folder.check_checkpoint(state, folder.path / "checkpoint.pt")
            config = from_dict(state["config"])
            if state["frames"] >= config.num_iterations * config.frames_per_batch:
                return _finish_complete_run(folder.path, _evaluated_as(config, cmd))
            return _train_in(folder, cmd, resume=True)
    c = cmd.config
    _check_device(c)
    _video_recorder(None, cmd, c)  # an env that cannot be recorded is refused before the run folder is made
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = RunFolder(cmd.run_dir or f"runs/{c.env.env_id}-{cmd.preset}-seed{c.seed}-{stamp}")
    with folder.locked():
        folder.create(overwrite=cmd.overwrite)
        folder.record(preset=cmd.preset)  # which defaults the config started from (config.json has the values)
        return _train_in(folder, cmd, resume=False)


def _train_in(folder: RunFolder, cmd: TrainCommand, resume: bool) -> int:
    from ppo_td.cli.progress import Progress
    from ppo_td.collect import WorkerError, shutdown
    from ppo_td.persist import Checkpointer, RunLogger, resume_pipeline
    from ppo_td.training import NonFiniteError, build_pipeline, run

    started = time.perf_counter()
    out = folder.path
    checkpointer = Checkpointer(out, cmd.checkpoint_every, cmd.keep_checkpoints, run_id=folder.run_id)
    elapsed = 0.0
    if resume:
        resumed = resume_pipeline(out / "checkpoint.pt", collector=cmd.collector_changes(), device=cmd.resume_device,
                                  threads=cmd.threads)
        pipeline, frames, iteration, elapsed = resumed.pipeline, resumed.frames, resumed.iteration, resumed.elapsed
        print(f"resuming {out} {resumed.describe()}")
    else:
        try:
            pipeline, frames, iteration = build_pipeline(cmd.config, threads=cmd.threads), 0, 0
        except BaseException:
            folder.abandon()  # nothing ran: the same --run-dir works again once the config is fixed
            raise
    config = pipeline.config
    try:
        folder.record(threads=_set_threads(pipeline))
        folder.write_config(config)  # atomically; on resume, with the collector settings the run now uses
        _record_exactness(folder, pipeline, resumed if resume else None)
        recorded = folder.recorded() if resume else {}  # a resume keeps the run's loggers unless given
        loggers = _run_loggers(folder, cmd.logger or tuple(recorded.get("loggers", ())),
                               cmd.project or recorded.get("project"))
        logger = RunLogger(out, config, tensorboard=cmd.tensorboard, resume_iteration=iteration if resume else None,
                           groups=pipeline.groups, loggers=loggers)
    except BaseException:
        shutdown(pipeline.collector)  # worker processes or a Ray instance may already be running
        raise
    planned = config.num_iterations * config.frames_per_batch
    if not resume and planned != config.total_frames:  # said once, at the start
        print(f"note: total_frames={config.total_frames:,} is not a multiple of frames_per_batch="
              f"{config.frames_per_batch:,}: the run trains {config.num_iterations:,} batches, {planned:,} frames")
    bar = Progress(config.num_iterations * config.frames_per_batch, config.num_iterations, initial=frames,
                   bar=cmd.progress, every=cmd.log_every,
                   label="reward per agent" if config.env.multiagent else "return",
                   info_keys=config.env.info_keys)
    videos = _video_recorder(out, cmd, config, should_stop=lambda: checkpointer.stop_requested,
                             sinks=[logger.log_video] if logger.loggers else [])
    with stop_after_iteration(checkpointer) as received:
        try:  # videos before the checkpointer: a stop asked for during one is the checkpoint of this iteration
            result = run(pipeline, callbacks=[logger, bar, *videos, checkpointer], frames=frames, iteration=iteration,
                         elapsed=elapsed, evaluate_at_end=False)
        except NonFiniteError as err:
            kept = out / "checkpoint.pt"
            print(f"ppo-td train: error: {err}\nlast good checkpoint: "
                  f"{kept if kept.exists() else 'none (use --checkpoint-every)'}", file=sys.stderr)
            return 1
        except WorkerError as err:
            print(f"ppo-td train: error: {err}\ntraining stopped after iteration {err.iteration}", file=sys.stderr)
            checkpointer.save(pipeline, err.frames, err.iteration, err.elapsed)  # the last completed iteration
            print(f"checkpoint: {out / 'checkpoint.pt'}\ncontinue with: ppo-td train --resume {out}", file=sys.stderr)
            return 1
        finally:
            bar.close()
            logger.close()
        last = result.history[-1] if result.history else {"frames": frames, "iteration": iteration, "time": elapsed}
        if result.stopped:
            print(f"stopped by {signal.Signals(received[0]).name} after iteration {last['iteration']}; "
                  f"checkpoint: {out / 'checkpoint.pt'}\ncontinue with: ppo-td train --resume {out}")
            return 128 + received[0]
        checkpointer.save(pipeline, last["frames"], last["iteration"], last["time"])  # before the evaluation
    trained = last["frames"] - frames
    sps = trained / (last["time"] - elapsed) if last["time"] > elapsed else 0.0
    print(f"trained {trained} frames in {last['time'] - elapsed:.1f} s ({sps:.0f} frames/s)")
    return _finish_complete_run(out, _evaluated_as(config, cmd), started)  # Ctrl-C stops it at once


def _set_threads(pipeline) -> int:
    """Set torch's threads for this process (the ``ppo-td`` command's own) to the pipeline's choice
    (:func:`ppo_td.training.threads.choose_threads`, as every entry point chooses), for the final evaluation too.
    Returns the number in force."""
    import torch

    if pipeline.threads is not None:
        torch.set_num_threads(pipeline.threads)
    return torch.get_num_threads()


def _evaluated_as(config: TrainConfig, cmd: TrainCommand) -> TrainConfig:
    """``config`` with the final evaluation's step cap a resume was given (``--resume RUN --eval-max-steps N``)."""
    if cmd.resume_eval_max_steps is None:
        return config
    return dataclasses.replace(config, eval_max_steps=cmd.resume_eval_max_steps)


def _video_recorder(out: Path | None, cmd: TrainCommand, config: TrainConfig, should_stop=None, sinks=()) -> list:
    """``--video-every``: the callback recording evaluation episodes into ``<out>/videos``, checked first (an env
    that cannot render, or moviepy missing, is refused before training rather than mid-run); ``out=None`` only
    checks."""
    if cmd.video_every < 0:
        raise ValueError(f"--video-every {cmd.video_every}: give the iterations between videos (>= 1), or 0 for none")
    if not cmd.video_every:
        return []
    if config.env.multiagent:
        raise ValueError(f"--video-every records one-agent runs; env.suite={config.env.suite!r} is multi-agent "
                         "(videos of multi-agent runs are not supported yet): leave --video-every out")
    from ppo_td.deploy.video import VideoRecorder, headless_rendering
    from ppo_td.training import evaluation_seed

    headless_rendering()
    recorder = VideoRecorder(Path(out or ".") / "videos", cmd.video_every, seed=evaluation_seed(config.seed),
                             should_stop=should_stop, sinks=sinks)
    recorder.check(config)
    return [recorder] if out is not None else []


def _record_exactness(folder, pipeline, resumed) -> None:
    """Say in ``run.json`` what a resume of this run will be, and how each resume went (on screen, a resume says
    it as it starts: not every run, most of which are never resumed)."""
    from ppo_td.persist import why_inexact

    why = why_inexact(pipeline)
    entry = None if resumed is None else {"iteration": resumed.iteration, "exact": resumed.exact, "why": resumed.why,
                                          "time": time.time()}
    folder.record(resumed=entry, resume={"exact": why is None, "why": why or ""})


def _finish_complete_run(out: Path, config: TrainConfig, started: float | None = None) -> int:
    """The final evaluation, ``summary.json`` and the learning curve of a run whose training is complete."""
    try:  # the checkpoint is written: an interrupt here loses nothing
        return _finish(out, config, time.perf_counter() if started is None else started)
    except KeyboardInterrupt as err:
        print(f"{signal_name(err)}: final evaluation stopped; the trained run is checkpointed. Finish it with: "
              f"ppo-td train --resume {out}", file=sys.stderr)
        return exit_code(err)


def train_in_folder(config: TrainConfig, run_dir: str | Path, *, callbacks=(), checkpoint_every: int = 10,
                    keep_checkpoints: int = 3, overwrite: bool = False, threads: int | None = None,
                    loggers: tuple[str, ...] | list[str] = (), project: str | None = None, **parts):
    """:func:`ppo_td.train` with ``run_dir``: the run folder ``ppo-td train`` writes (config, run.json, metrics,
    episodes, checkpoints, summary, learning curve), resumable with ``ppo-td train --resume`` and evaluable with
    ``ppo-td eval``. Errors raise (nothing is printed but the evaluation lines); an interrupt keeps the last
    periodic checkpoint."""
    from ppo_td.persist import RunFolder
    from ppo_td.persist.loggers import check_loggers
    from ppo_td.training import build_pipeline
    from ppo_td.training.threads import using_threads

    config = _recordable(config, parts)
    _check_device(config)
    check_loggers(loggers)
    started = time.perf_counter()
    folder = RunFolder(run_dir)
    with folder.locked():
        folder.create(overwrite=overwrite)
        try:
            pipeline = build_pipeline(config, threads=threads, **parts)
        except BaseException:
            folder.abandon()  # nothing ran: the same run_dir works again once the parts are fixed
            raise
        with using_threads(pipeline.threads):  # the final evaluation too, as ppo-td train
            return _train_built(folder, pipeline, callbacks, checkpoint_every, keep_checkpoints, started,
                                (tuple(loggers), project))


def _train_built(folder: RunFolder, pipeline, callbacks, checkpoint_every: int, keep_checkpoints: int,
                 started: float, logged: tuple[tuple[str, ...], str | None] = ((), None)):
    """:func:`train_in_folder` once its pipeline is built: record, run, checkpoint, evaluate."""
    import torch

    from ppo_td.collect import shutdown
    from ppo_td.persist import Checkpointer, RunLogger
    from ppo_td.training import run

    try:
        if pipeline.appended:
            raise ValueError(f"run_dir: the env has transforms appended after it was built "
                             f"({', '.join(type(t).__name__ for t in pipeline.appended)}), which the run folder "
                             "cannot record (resume and ppo-td eval rebuild the env from config.json): pass them "
                             "as factories, train(config, transforms=[factory, ...]) or env.transforms")
        if not pipeline.rebuildable:
            raise ValueError("run_dir: the env is a TorchRL env ppo_td cannot rebuild, so its run folder could "
                             "not be resumed or evaluated; pass a factory (a module-level function returning a "
                             "gymnasium.Env), a Gymnasium env, or a ppo_td BuiltEnv")
        folder.record(preset="python", threads=torch.get_num_threads())  # the run's (set around this call)
        folder.write_config(pipeline.config)
        _record_exactness(folder, pipeline, None)
        logger = RunLogger(folder.path, pipeline.config, groups=pipeline.groups, loggers=_run_loggers(folder, *logged))
    except BaseException:
        shutdown(pipeline.collector)
        raise
    checkpointer = Checkpointer(folder.path, checkpoint_every, keep_checkpoints, run_id=folder.run_id)
    try:
        result = run(pipeline, callbacks=[logger, checkpointer, *callbacks], evaluate_at_end=False)
    finally:
        logger.close()
    if not result.history:
        return result
    last = result.history[-1]
    checkpointer.save(pipeline, last["frames"], last["iteration"], last["time"])
    if not result.stopped:
        evaluations = _summarize(folder.path, pipeline.config, started)
        if evaluations:
            result.record_evaluations(*evaluations)
    return result


def _run_loggers(folder: RunFolder, names: tuple[str, ...], project: str | None) -> list:
    """The loggers of a run folder (:mod:`ppo_td.persist.loggers`), recorded in ``run.json`` for ``--resume``."""
    from ppo_td.persist.loggers import make_loggers

    folder.record(loggers=list(names), project=project)
    return make_loggers(names, folder.path, folder.path.name, folder.run_id, project)


def _check_device(config: TrainConfig) -> None:
    """Refuse a device this machine lacks (the networks' or the simulator's) before the run folder is created
    (``auto`` always resolves)."""
    from ppo_td.envs.sources.vmas import env_device
    from ppo_td.models import resolve_device

    resolve_device(config.device)
    env_device(config.env)


def _recordable(config: TrainConfig, parts: dict) -> TrainConfig:
    """``config`` with ``parts["encoder"]`` recorded as its import path (popped from ``parts``): a run folder is
    resumed and evaluated from its config alone, so parts it cannot record are refused, naming the way out."""
    from ppo_td.envs.custom import unrecorded as objects_of
    from ppo_td.envs.rebuild import NotRebuildable, from_python, import_path

    unrecorded = sorted(name for name in ("actor", "critic", "loss", "optimizer") if parts.get(name) is not None)
    if unrecorded:
        raise ValueError(f"run_dir: {', '.join(unrecorded)} passed from Python cannot be rebuilt from the run folder "
                         "(resume and ppo-td eval rebuild every part from config.json): give the networks through "
                         "encoder= or model.encoder=module:function and the settings through the config, or "
                         "train without run_dir")
    for setting in ("transforms", "train_transforms"):
        items = parts.get(setting)
        objects = objects_of(from_python(items, setting == "transforms", setting)) if items is not None else []
        if objects:
            raise ValueError(f"run_dir: the {setting} {objects} cannot be rebuilt from the run folder (resume and "
                             "ppo-td eval rebuild the env from config.json): pass a factory instead, a module-level "
                             "function or class returning the transform (a functools.partial of one for its "
                             "arguments), or train without run_dir")
    encoder = parts.pop("encoder", None)
    if encoder is None:
        return config
    try:
        path = import_path(encoder, "encoder", "define it at module level of an importable module, or train without "
                                               "run_dir")
    except NotRebuildable as err:
        raise ValueError(f"run_dir: the encoder cannot be recorded for resume and ppo-td eval: {err}") from err
    return dataclasses.replace(config, model=dataclasses.replace(config.model, encoder=path))


def _finish(out: Path, config: TrainConfig, started: float) -> int:
    _summarize(out, config, started)
    return 0


def _summarize(out: Path, config: TrainConfig, started: float) -> list:
    """Evaluate the run's checkpoint, write ``summary.json`` and the learning curve, print the evaluations;
    returns them (deterministic, sampled; none with ``eval_episodes=0``)."""
    from ppo_td.persist import load_for_evaluation, plot_learning_curve, read_episodes, read_metrics
    from ppo_td.training import evaluate, evaluation_seed

    if (out / "summary.json").exists():
        raise ValueError(f"{out}: the run is complete (summary.json is written), nothing to resume; evaluate it "
                         f"with `ppo-td eval {out}`")
    _, actor, obs_stats, transform_states = load_for_evaluation(out / "checkpoint.pt")
    evaluations = []
    if config.eval_episodes:
        note = cap_note(config.env, config.eval_max_steps, "--eval-max-steps")
        if note:
            print(note)
        evaluations = [evaluate(actor, config.env, config.eval_episodes, seed=evaluation_seed(config.seed),
                                obs_stats=obs_stats, sampled=s, max_steps=config.eval_max_steps,
                                transform_states=transform_states) for s in (False, True)]
    plot_learning_curve(read_episodes(out), out / "learning_curve.png", f"{config.env.env_id}")
    last = read_metrics(out)[-1]
    summary = {"train_seconds": float(last["time"]), "finish_seconds": time.perf_counter() - started,
               "frames": int(last["frames"]), "eval_returns": [], "eval_returns_sampled": []}
    for ev, suffix in zip(evaluations, ("", "_sampled"), strict=False):
        summary[f"eval_returns{suffix}"] = ev.returns  # the episodes that ended
        if ev.groups:  # several agent groups: each one's reward per agent in those episodes
            summary[f"eval_group_returns{suffix}"] = ev.groups
        if ev.cut:  # still running at the cap: their reward so far, apart
            summary.update({f"eval_cut{suffix}": ev.cut, "eval_max_steps": ev.max_steps})
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for ev, how in zip(evaluations, ("deterministic", "sampled"), strict=False):
        print(format_evaluation(ev, how, per_agent=config.env.multiagent))
    print(f"run folder: {out}")
    return evaluations
