"""TorchRL envs as a TorchRL user writes them, for ppo_td's docs, notebook and benchmarks.

``tutorial_env`` is the env of TorchRL's PPO tutorial (``coding_ppo.py``): InvertedDoublePendulum-v5 through
TorchRL's ``GymEnv``, with ``ObservationNorm`` (whose statistics the tutorial computes by hand with
``init_stats``; ppo_td does it for you from random steps), ``DoubleToFloat`` and ``StepCounter``. ``gym_env`` is the
bare ``GymEnv``. Train either with ``ppo-td train --env.env-id examples.torchrl_envs:tutorial_env`` or
``ppo_td.train(config, env=tutorial_env)``; ppo_td makes ``env.num_envs`` copies and steps them in its own loop.
"""

from __future__ import annotations

from torchrl.envs import Compose, DoubleToFloat, ObservationNorm, StepCounter, TransformedEnv
from torchrl.envs.libs.gym import GymEnv


def tutorial_env(env_name: str = "InvertedDoublePendulum-v5") -> TransformedEnv:
    """TorchRL's PPO tutorial's env (``ObservationNorm`` left uninitialized, as it is before ``init_stats``)."""
    return TransformedEnv(GymEnv(env_name), Compose(ObservationNorm(in_keys=["observation"]), DoubleToFloat(),
                                                    StepCounter()))


def gym_env(env_name: str = "InvertedDoublePendulum-v5") -> GymEnv:
    """A bare TorchRL ``GymEnv`` (unbatched: ppo_td makes the copies)."""
    return GymEnv(env_name)
