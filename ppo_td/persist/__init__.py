"""Persistence: checkpoints (atomic, exact resume where possible), run folders and metric logs."""

from ppo_td.persist.checkpoint import (
    Checkpointer,
    Resumed,
    check_compatible,
    checkpoint_config,
    load_actor,
    load_checkpoint,
    restore,
    resume_pipeline,
    save_checkpoint,
)
from ppo_td.persist.runlog import RunLogger, plot_learning_curve, read_episodes
from ppo_td.persist.snapshot import capture, is_exact, restore_snapshot

__all__ = [
    "Checkpointer",
    "Resumed",
    "RunLogger",
    "capture",
    "check_compatible",
    "checkpoint_config",
    "is_exact",
    "load_actor",
    "load_checkpoint",
    "plot_learning_curve",
    "read_episodes",
    "restore",
    "restore_snapshot",
    "resume_pipeline",
    "save_checkpoint",
]
