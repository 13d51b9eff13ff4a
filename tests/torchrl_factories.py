"""TorchRL env factories a user writes (tests/test_torchrl_envs.py)."""

from torchrl.envs import PendulumEnv, SerialEnv


def three_pendulums() -> SerialEnv:
    return SerialEnv(3, PendulumEnv)


def tutorial_pendulum():
    """TorchRL's PPO tutorial's env shape (its ObservationNorm needs init_stats), on a cheap Gymnasium env."""
    from torchrl.envs import Compose, DoubleToFloat, ObservationNorm, StepCounter, TransformedEnv
    from torchrl.envs.libs.gym import GymEnv

    return TransformedEnv(GymEnv("Pendulum-v1"), Compose(ObservationNorm(in_keys=["observation"]), DoubleToFloat(),
                                                         StepCounter()))


def gym_pendulum():
    """An unbatched TorchRL GymEnv: ppo_td makes the copies."""
    from torchrl.envs.libs.gym import GymEnv

    return GymEnv("Pendulum-v1")
