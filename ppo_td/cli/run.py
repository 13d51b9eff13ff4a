"""``ppo-td train`` at work: the command's flags handed to the one run layer (:mod:`ppo_td.experiment`, the code
``ppo_td.train`` and ``ppo_td.resume`` run), and how it ended said as an exit code."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppo_td.cli.command import TrainCommand


def run_training(cmd: TrainCommand) -> int:
    """Train (or resume) as ``cmd`` says, in its run folder; returns the exit code (0 done, 1 training failed,
    128 + the signal's number for SIGINT or SIGTERM, after the checkpoint)."""
    from ppo_td.collect import WorkerError
    from ppo_td.experiment import TrainingInterrupted, exit_on, resume, train
    from ppo_td.training import NonFiniteError
    from ppo_td.training.ranks import RankError

    # --no-progress: a line every --log-every iterations, as when piped
    shown = {"progress": True if cmd.progress else "lines", "log_every": cmd.log_every, "threads": cmd.threads,
             "loggers": [*cmd.logger, *(["tensorboard"] if cmd.tensorboard else [])], "project": cmd.project,
             "checkpoint_every": cmd.checkpoint_every, "keep_checkpoints": cmd.keep_checkpoints,
             "video_every": cmd.video_every}
    try:
        if cmd.resume:
            resume(cmd.resume, collector=cmd.collector_changes(), device=cmd.resume_device,
                   eval_max_steps=cmd.resume_eval_max_steps, **shown)
        else:
            c = cmd.config
            stamp = time.strftime("%Y%m%d-%H%M%S")
            run_dir = cmd.run_dir or f"runs/{run_name(c.env.env_id)}-{cmd.preset}-seed{c.seed}-{stamp}"
            train(c, run_dir=run_dir, overwrite=cmd.overwrite, preset=cmd.preset, **shown)
    except (TrainingInterrupted, NonFiniteError, WorkerError, RankError) as err:
        if isinstance(err, TrainingInterrupted) and os.environ.get("RANK", "0") not in ("", "0"):
            return 128 + err.signum  # over ranks, rank 0 says where the checkpoint is and how to continue
        return exit_on(err, "ppo-td train")
    return 0


def run_name(env_id: str) -> str:
    """The env part of a default run folder's name: the id, or for a factory in a script ``<script>:<name>``."""
    module, sep, name = env_id.rpartition(":")
    return f"{Path(module).stem}:{name}" if sep and module.endswith(".py") else env_id
