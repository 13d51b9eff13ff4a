"""Persistence: checkpoints (atomic, exact resume where possible), run folders and metric logs."""

from ppo_td.persist.checkpoint import (
    BEST,
    Checkpointer,
    ForEvaluation,
    Resumed,
    check_compatible,
    checkpoint_config,
    checkpoint_in,
    load_actor,
    load_checkpoint,
    load_for_evaluation,
    restore,
    resume_pipeline,
    save_checkpoint,
)
from ppo_td.persist.runfolder import RunFolder, RunFolderError, write_atomically
from ppo_td.persist.runlog import RunLogger, plot_learning_curve, read_episodes, read_metrics
from ppo_td.persist.snapshot import capture, is_exact, restore_snapshot, why_inexact

__all__ = [
    "BEST",
    "Checkpointer",
    "ForEvaluation",
    "Resumed",
    "RunFolder",
    "RunFolderError",
    "RunLogger",
    "capture",
    "check_compatible",
    "checkpoint_config",
    "checkpoint_in",
    "is_exact",
    "load_actor",
    "load_checkpoint",
    "load_for_evaluation",
    "plot_learning_curve",
    "read_episodes",
    "read_metrics",
    "restore",
    "restore_snapshot",
    "why_inexact",
    "resume_pipeline",
    "save_checkpoint",
    "write_atomically",
]
