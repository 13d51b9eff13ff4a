"""ppo_td: Proximal Policy Optimization from TorchRL and TensorDict parts.

Layers, each importing only the ones below it (``docs/architecture.md``)::

    cli                 ppo-td train / eval / doctor
    doctor | persist    the autograd audit | checkpoints, run folders, logs
    training            objective (GAE + ClipPPOLoss), pipeline, the one loop, evaluation
    collect             the fast in-process collector, worker processes, Ray
    models              networks, actor and critic, distributions
    envs                Gymnasium id -> batched TorchRL env + transforms, and its description
    presets, config, keys

Importing ppo_td changes nothing outside it: no patches, no env registrations.
"""

from typing import Any

from ppo_td.config import CollectorConfig, EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.presets import PRESETS, get_preset


def __getattr__(name: str) -> Any:
    """``ppo_td.train`` and ``ppo_td.TrainResult`` load the training layer (and TorchRL) on first use, so
    ``import ppo_td.doctor`` or ``ppo_td.config`` stays light."""
    if name in ("train", "TrainResult"):
        from ppo_td import training

        return getattr(training, name)
    raise AttributeError(f"module 'ppo_td' has no attribute {name!r}")

__all__ = [
    "PRESETS",
    "CollectorConfig",
    "EnvConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
    "TrainResult",
    "get_preset",
    "train",
]
__version__ = "0.2.0"
