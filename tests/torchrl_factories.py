"""TorchRL env factories a user writes (tests/test_torchrl_envs.py)."""

from torchrl.envs import PendulumEnv, SerialEnv


def three_pendulums() -> SerialEnv:
    return SerialEnv(3, PendulumEnv)
