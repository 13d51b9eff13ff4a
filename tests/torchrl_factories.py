"""TorchRL env factories a user writes (tests/test_torchrl_envs.py)."""

from torchrl.envs import EnvBase, PendulumEnv, SerialEnv


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


class CountedNorm:
    """How many times an ObservationNorm computed its statistics from random steps (``CountedNorm.calls``)."""

    calls = 0


def counted_tutorial():
    """The tutorial's env shape with an ObservationNorm that counts its init_stats calls."""
    from torchrl.envs import Compose, DoubleToFloat, ObservationNorm, StepCounter, TransformedEnv
    from torchrl.envs.libs.gym import GymEnv

    class Norm(ObservationNorm):
        def init_stats(self, *args, **kwargs):
            CountedNorm.calls += 1
            return super().init_stats(*args, **kwargs)

    return TransformedEnv(GymEnv("Pendulum-v1"), Compose(Norm(in_keys=["observation"]), DoubleToFloat(),
                                                         StepCounter()))


BUILT: list[int] = []
"""The batch of each env :func:`batched_pendulums` made."""


def batched_pendulums(num_envs: int, length: float = 1.0) -> EnvBase:
    """A simulator that makes its whole batch (ppo_td passes env.num_envs), annotated to return a TorchRL env."""
    from torchrl.envs.libs.gym import GymEnv

    BUILT.append(num_envs)
    return GymEnv("Pendulum-v1", num_envs=num_envs)


def unannotated_pendulums(num_envs):
    """The same without an annotation: ppo_td makes one (of one copy) to see what it returns."""
    from torchrl.envs.libs.gym import GymEnv

    return GymEnv("Pendulum-v1", num_envs=num_envs)


class ActionsSeen:
    """The actions a TorchRL env received (``ActionsSeen.actions``), recorded by a transform inside it."""

    actions: list = []


def recorded_pendulums(num_envs: int) -> EnvBase:
    """Pendulum whose inner transform records the actions the env gets (after ppo_td's layers)."""
    from torchrl.envs import Transform, TransformedEnv
    from torchrl.envs.libs.gym import GymEnv

    class Record(Transform):
        def __init__(self):
            super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])

        def _inv_apply_transform(self, action):
            ActionsSeen.actions.append(action.clone())
            return action

    return TransformedEnv(GymEnv("Pendulum-v1", num_envs=num_envs), Record())


def grouped_pendulums(noise_std: float = 0.5) -> EnvBase:
    """A TorchRL env with observation groups as Isaac Lab's come through TorchRL: top-level entries ``"policy"``
    (noisy) and ``"critic"`` (the state), from ppo_td's noisy_sensors Pendulum in TorchRL's GymWrapper."""
    from torchrl.envs.libs.gym import GymWrapper

    from ppo_td.envs.partial import noisy_sensors

    return GymWrapper(noisy_sensors(noise_std=noise_std))


def observation_and_critic() -> EnvBase:
    """:func:`grouped_pendulums` with its ``"policy"`` entry named ``"observation"`` (as TorchRL's IsaacLabWrapper
    may name an env's single group)."""
    from torchrl.envs import RenameTransform, TransformedEnv

    return TransformedEnv(grouped_pendulums(), RenameTransform(["policy"], ["observation"]))
