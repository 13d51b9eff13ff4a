"""Transforms a user writes (tests/test_user_transforms.py): factories ppo_td records as module:factory."""

from __future__ import annotations

import torch
from torchrl.envs import Transform


class ScaleObservation(Transform):
    """Observation times ``factor`` (an observation-side transform: TorchRL's offline forward runs it too)."""

    def __init__(self, factor: float = 0.5) -> None:
        super().__init__(in_keys=["observation"], out_keys=["observation"])
        self.factor = factor
        self.calls = 0

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return obs * self.factor


class RewardBonus(Transform):
    """Reward plus ``bonus`` on every step (reward shaping: a training-only transform)."""

    def __init__(self, bonus: float = 1.0) -> None:
        super().__init__(in_keys=["reward"], out_keys=["reward"])
        self.bonus = bonus
        self.calls = 0

    def _step(self, tensordict, next_tensordict):
        self.calls += 1
        return next_tensordict.set("reward", next_tensordict["reward"] + self.bonus)


class CountingShift(Transform):
    """Stateful: counts the steps it saw in a buffer and shifts the observation by ``shift`` (the state evaluation
    and checkpoints must carry)."""

    def __init__(self, shift: float = 0.0) -> None:
        super().__init__(in_keys=["observation"], out_keys=["observation"])
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))
        self.register_buffer("shift", torch.tensor(float(shift)))

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        self.seen += 1
        return obs + self.shift


def scale_observation(factor: float = 0.5) -> ScaleObservation:
    return ScaleObservation(factor)


def not_a_transform() -> int:
    return 3
