"""``ppo-td train``'s flags (:class:`TrainCommand`), read by the command line (:mod:`ppo_td.cli.main`) and run by
:mod:`ppo_td.cli.run`: a module of its own so neither imports the other."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

import tyro

from ppo_td.config import TrainConfig, with_info_keys
from ppo_td.presets import DEFAULT_PRESET, PRESETS


@dataclasses.dataclass(frozen=True)
class TrainCommand:
    """Train PPO and write a run folder (config, metrics CSV, learning curve, checkpoints)."""

    config: Annotated[TrainConfig, tyro.conf.arg(name="")]
    preset: Annotated[str, tyro.conf.arg(help=(
        f"Preset to start from: {', '.join(PRESETS)}. Without it, --env.env-id X starts from the preset made for "
        "X, else from generic (SB3's PPO defaults)."))] = DEFAULT_PRESET
    run_dir: str | None = None
    """Run folder to write; default runs/<env>-<preset>-seed<seed>-<time>."""
    resume: str | None = None
    """Run folder to continue from its checkpoint.pt (config, weights, RNG and counters come from it)."""
    checkpoint_every: int = 10
    """Write a checkpoint every N iterations (0: only at the end and on interruption)."""
    keep_checkpoints: int = 3
    """How many periodic checkpoints to keep in <run_dir>/checkpoints."""
    tensorboard: bool = False
    """Also write TensorBoard events to <run_dir>/tensorboard (as --logger tensorboard)."""
    logger: tuple[str, ...] = ()
    """Experiment loggers beside the run folder's CSVs (TorchRL's torchrl.record.loggers): tensorboard, wandb
    (offline into <run_dir>/wandb unless WANDB_MODE is set; --resume continues the same W&B run), mlflow (a local
    store in <run_dir>/mlruns unless MLFLOW_TRACKING_URI is set); csv is the run folder's own. Each gets the config
    as hyper-parameters and every iteration's metrics. A resume keeps the run's loggers unless given."""
    project: str | None = None
    """The W&B project or MLflow experiment the loggers write to (default ppo_td)."""
    log_info: tuple[str, ...] = ()
    """Shorthand for --env.info-keys: info entries recorded per episode (their value at its last step), e.g.
    --log-info is_success."""
    progress: bool = True
    """On a terminal, show a live progress bar; piped, to a file, or with --no-progress, print a summary line
    every --log-every iterations instead."""
    log_every: int | None = None
    """Iterations between summary lines when there is no progress bar (default: about 20 lines per run)."""
    collector: Literal["inprocess", "process", "ray"] | None = None
    """Shorthand for --collector.backend: where collection runs."""
    workers: int | None = None
    """Shorthand for --collector.num-workers."""
    ray_address: str | None = None
    """Shorthand for --collector.ray-address: 'local' (start Ray here), 'auto' (running cluster) or host:port."""
    from_zoo: str | None = None
    """An RL Zoo hyper-parameter file (hyperparams/ppo.yml): start from its entry for --env.env-id, mapped onto
    ppo_td's config over --preset (default generic); keys it cannot map are printed. Flags given still win."""
    from_rl_games: str | None = None
    """An rl_games PPO config (YAML, as Isaac Lab tasks ship): start from it, mapped onto ppo_td's config over
    --preset (default generic), for --env.env-id or the env its env_config names; settings whose meaning differs
    are printed, what ppo_td cannot train is refused (ppo_td/rlgames.py). Flags given still win."""
    threads: int | None = None
    """Torch threads for the run (default: 1 for vector observations, whose small networks only lose from more: an
    update of LunarLander took 5x as long with 2 threads as with 1 on a busy 2-core machine; torch's own default
    for images, where convolutions use them)."""
    video_every: int = 0
    """Record a video of one evaluation episode (the policy's mode) every N iterations into <run_dir>/videos
    (0: none). Needs an env that renders rgb_array frames and the video extra (moviepy)."""
    overwrite: bool = False
    """Replace the run that --run-dir already holds (without it, a folder holding a run is refused)."""
    resume_device: tyro.conf.Suppress[str | None] = None
    """--device given with --resume: where the resumed run's networks go (set from the flag, not a flag)."""
    resume_eval_max_steps: tyro.conf.Suppress[int | None] = None
    """--eval-max-steps given with --resume: the step cap of its final evaluation (set from the flag)."""

    def collector_changes(self) -> dict[str, Any]:
        """The collector fields the shorthand flags set (only those given)."""
        shorthand = {"backend": self.collector, "num_workers": self.workers, "ray_address": self.ray_address}
        changes = {k: v for k, v in shorthand.items() if v is not None}
        if self.collector is not None and self.workers is None:
            changes["num_workers"] = None  # the backend's default (1 in-process, else 2)
        return changes

    def resolved_config(self) -> TrainConfig:
        """The config with the shorthand flags applied (the collector's, --log-info)."""
        config = with_info_keys(self.config, self.log_info)
        changes = self.collector_changes()
        if not changes:
            return config
        return dataclasses.replace(config, collector=dataclasses.replace(config.collector, **changes))


# what --resume may change: where collection runs, how the run is watched and checkpointed; never the config
RESUME_FLAGS = {"--resume", "--collector", "--workers", "--ray-address", "--checkpoint-every", "--keep-checkpoints",
                "--tensorboard", "--no-tensorboard", "--logger", "--project", "--progress", "--no-progress",
                "--log-every", "--device", "--video-every", "--eval-max-steps", "--threads"}
