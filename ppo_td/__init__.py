"""ppo_td: Proximal Policy Optimization from TorchRL and TensorDict parts."""

from ppo_td import doctor, speedups
from ppo_td.config import EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.presets import PRESETS, get_preset
from ppo_td.trainer import TrainResult, train

speedups.apply()  # tensordict 0.14 per-call overhead workaround (see ppo_td/speedups.py)

__all__ = [
    "PRESETS",
    "EnvConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "TrainConfig",
    "TrainResult",
    "doctor",
    "get_preset",
    "train",
]
__version__ = "0.1.0"
