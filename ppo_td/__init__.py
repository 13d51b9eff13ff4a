"""ppo_td: Proximal Policy Optimization from TorchRL and TensorDict parts.

Layers, each importing only the ones below it (``docs/architecture.md``)::

    cli                 ppo-td train / eval / doctor
    doctor | persist    the autograd audit | checkpoints, run folders, logs
    train               objective (GAE + ClipPPOLoss), pipeline, the one loop, evaluation
    collect             the fast in-process collector, worker processes, Ray
    models              networks, actor and critic, distributions
    envs                Gymnasium id -> batched TorchRL env + transforms, and its description
    presets, config, keys

Importing ppo_td changes nothing outside it: no patches, no env registrations.
"""

from ppo_td.config import CollectorConfig, EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.presets import PRESETS, get_preset
from ppo_td.train import TrainResult, train

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
