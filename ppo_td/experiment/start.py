"""Starting a run: :func:`train` (a new one, from a config and any parts) and :func:`resume` (a run folder's, from
its checkpoint), each the one path under ``ppo_td.train``, ``ppo_td.resume``, ``ppo-td train`` and the tuner."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, from_dict, with_info_keys
from ppo_td.envs.scripts import refuse_training_on_import
from ppo_td.experiment.ending import finish_only
from ppo_td.experiment.parts import check_reopenable, recordable
from ppo_td.experiment.session import Session
from ppo_td.training import TrainResult


def train(config: TrainConfig, *, run_dir: str | Path | None = None, callbacks: Any = (),
          progress: bool | str = True,
          log_every: int | None = None, threads: int | None = None, loggers: Any = (), project: str | None = None,
          info_keys: Any = (), checkpoint_every: int = 10, keep_checkpoints: int = 3, overwrite: bool = False,
          video_every: int = 0, preset: str = "python", **parts: Any) -> TrainResult:
    """Train PPO with ``config`` (see :func:`ppo_td.train`, whose text this is the body of); returns the result.

    Raises:
        TrainingInterrupted: Ctrl-C or SIGTERM stopped it at the end of an iteration (checkpointed in ``run_dir``).
        ValueError, TypeError: a bad part or setting, refused before anything trains (nothing is left behind).
    """
    refuse_training_on_import("ppo_td.train")
    started = time.perf_counter()
    from ppo_td.training.ranks import launched

    ranks = launched()  # the ranks torchrun started (docs/scaling.md), or None
    main = ranks is None or ranks.main
    if ranks is not None:  # a default folder's name has the time in it: rank 0's is the run's
        run_dir = ranks.from_main(None if run_dir is None else str(run_dir), "naming the run folder")
    config = with_info_keys(config, [info_keys] if isinstance(info_keys, str) else info_keys)
    names, objects = _loggers(loggers, run_dir)
    callbacks = _callbacks(callbacks, objects)
    _check_display(progress, log_every, video_every, run_dir)
    from ppo_td.training import build_pipeline

    if run_dir is None:
        pipeline = build_pipeline(config, threads=threads, ranks=ranks, **parts)
        return Session(pipeline, callbacks=callbacks, progress=progress, log_every=log_every,
                       started=started).run()
    from ppo_td.persist import RunFolder
    from ppo_td.training.ranks import together

    folder = RunFolder(run_dir)
    with contextlib.ExitStack() as held:
        with together(ranks, "making the run folder"):  # rank 0 makes it; a refusal there stops every rank
            config = recordable(config, parts)
            check_device(config)
            check_videos(video_every, config)  # an env that cannot be recorded is refused before the folder is made
            if main:
                held.enter_context(folder.locked())
                folder.create(overwrite=overwrite)
                folder.record(preset=preset, ranks=1 if ranks is None else ranks.world)  # the defaults the config
                # started from (config.json has the values), and the ranks it runs on
        try:
            pipeline = build_pipeline(config, threads=threads, ranks=ranks, **parts)
        except BaseException:
            if main:
                folder.abandon()  # nothing ran: the same run_dir works again once the config or the parts are fixed
            raise
        try:
            check_reopenable(pipeline)
        except BaseException:
            from ppo_td.collect import shutdown

            shutdown(pipeline.collector)
            if main:
                folder.abandon()
            raise
        return Session(pipeline, folder, callbacks, progress, log_every, checkpoint_every, keep_checkpoints, names,
                       project, video_every, started=started).run()


def resume(run_dir: str | Path, *, callbacks: Any = (), progress: bool | str = True, log_every: int | None = None,
           threads: int | None = None, loggers: Any = (), project: str | None = None, checkpoint_every: int = 10,
           keep_checkpoints: int = 3, collector: dict[str, Any] | None = None, device: str | None = None,
           eval_max_steps: int | None = None, video_every: int = 0) -> TrainResult:
    """Continue the run in ``run_dir`` from its checkpoint (see :func:`ppo_td.resume`); a run whose training is
    complete but whose final evaluation did not run (interrupted, crashed) gets it (the result's ``critic`` and
    ``pipeline`` are None then)."""
    refuse_training_on_import("ppo_td.resume")
    started = time.perf_counter()
    names, objects = _loggers(loggers, run_dir)
    callbacks = _callbacks(callbacks, objects)
    _check_display(progress, log_every, video_every, run_dir)
    from ppo_td.persist import RunFolder, load_checkpoint, resume_pipeline
    from ppo_td.training.ranks import launched, together

    ranks = launched()  # resumed on the ranks torchrun started: exactly on as many as it ran on
    main = ranks is None or ranks.main
    folder = RunFolder(run_dir)
    with contextlib.ExitStack() as held:
        with together(ranks, "opening the run folder"):
            if Path(run_dir).is_file():
                raise ValueError(f"resume takes a run folder; {run_dir} is a file (its run folder: "
                                 f"{Path(run_dir).parent})")
            if main:
                held.enter_context(folder.locked())
            state = load_checkpoint(folder.path / "checkpoint.pt")
            folder.check_checkpoint(state, folder.path / "checkpoint.pt")
        config = from_dict(state["config"])
        if eval_max_steps is not None:
            config = dataclasses.replace(config, eval_max_steps=eval_max_steps)
        if state["frames"] >= config.num_iterations * config.frames_per_batch or state.get("ended_early"):
            if not main:  # rank 0 evaluates; the others have nothing left to do
                return TrainResult(actor=None, critic=None, pipeline=None)
            return finish_only(folder, config, callbacks, names, project, started)
        resumed = resume_pipeline(folder.path / "checkpoint.pt", collector=collector, device=device, threads=threads)
        if eval_max_steps is not None:
            resumed.pipeline.config = dataclasses.replace(resumed.pipeline.config, eval_max_steps=eval_max_steps)
        if main:
            print(f"resuming {folder.path} {resumed.describe()}")
        return Session(resumed.pipeline, folder, callbacks, progress, log_every, checkpoint_every, keep_checkpoints,
                       names, project, video_every, resumed=resumed, started=started).run()


def _loggers(loggers: Any, run_dir: Any) -> tuple[list[str], list[Any]]:
    """Logger names (writing into the run folder) and TorchRL Logger objects of the user's."""
    from ppo_td.persist.loggers import check_loggers

    if isinstance(loggers, (str, bytes)) or not isinstance(loggers, (list, tuple)):
        raise TypeError(f"loggers must be a list of logger names or torchrl Logger objects, got {loggers!r}")
    names = [lg for lg in loggers if isinstance(lg, str)]
    if names and run_dir is None:
        raise ValueError(f"loggers={names}: loggers by name write into the run folder: pass run_dir=..., or "
                         "torchrl.record.loggers Logger objects you made")
    check_loggers(names)  # an unknown name, or its library missing: before anything is built
    return names, [lg for lg in loggers if not isinstance(lg, str)]


def _callbacks(callbacks: Any, objects: list[Any]) -> list[Any]:
    """The user's callbacks checked (:func:`~ppo_td.training.callbacks.iteration_hook`), then the loggers'."""
    from ppo_td.training.callbacks import iteration_hook

    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks must be a list of callbacks, got {type(callbacks).__name__}")
    for callback in callbacks:
        iteration_hook(callback)
    if objects:
        from ppo_td.persist.loggers import ToLoggers

        return [*callbacks, ToLoggers(objects)]
    return list(callbacks)


def _check_display(progress: Any, log_every: int | None, video_every: int, run_dir: Any) -> None:
    if progress not in (True, False, "lines") or isinstance(progress, (int, float)) and not isinstance(progress, bool):
        raise TypeError(f"progress={progress!r}: True (a bar on a terminal or in a notebook, lines when piped), "
                        "'lines' (lines always, as ppo-td train --no-progress) or False (neither)")
    if log_every is not None and (isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1):
        raise ValueError(f"log_every={log_every!r}: iterations between progress lines (>= 1), or None (about 20 a run)")
    if not isinstance(video_every, int) or video_every < 0:
        raise ValueError(f"video_every={video_every!r}: the iterations between videos (>= 1), or 0 for none")
    if video_every and run_dir is None:
        raise ValueError("video_every: videos are written into the run folder: pass run_dir=...")


def check_device(config: TrainConfig) -> None:
    """Refuse a device this machine lacks (the networks' or the simulator's), and CUDA graphs off CUDA where that is
    known already (``auto`` on a machine with a GPU resolves when the env is built), before the run folder is created
    (``auto`` always resolves)."""
    import torch

    from ppo_td.envs.sources.vmas import env_device
    from ppo_td.models import resolve_device
    from ppo_td.training.pipeline import check_cudagraphs

    device = resolve_device(config.device)
    if config.device != "auto" or not torch.cuda.is_available():
        check_cudagraphs(config, device)
    env_device(config.env)


def check_videos(video_every: int, config: TrainConfig) -> None:
    """``video_every``: an env that cannot render, or moviepy missing, refused before training rather than mid-run."""
    if not video_every:
        return
    if config.env.multiagent:
        raise ValueError(f"video_every records one-agent runs; env.suite={config.env.suite!r} is multi-agent "
                         "(videos of multi-agent runs are not supported yet): leave --video-every out")
    from ppo_td.deploy.video import VideoRecorder, headless_rendering

    headless_rendering()
    VideoRecorder(Path("."), video_every).check(config)
