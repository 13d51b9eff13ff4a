"""What a source hands :func:`ppo_td.envs.build_env`: the batched TorchRL env it built, before ppo_td's standard
layers (:mod:`ppo_td.envs.layers`), and what those layers need to know of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from torchrl.envs import EnvBase, Transform


@dataclasses.dataclass
class Base:
    """A source's env, batched ``[env.num_envs]`` (agents grouped inside), and its own first transforms."""

    env: EnvBase
    close: Callable[[], None]
    """Frees what the source made (its copies, an ``AsyncVectorEnv``'s processes) when a later layer fails."""
    first: list[Transform] = dataclasses.field(default_factory=list)
    """The source's adapters and checks, first in the stack (observation entries, masks, casts, the finite check)."""
    vector: gym.vector.VectorEnv | None = None
    """The Gymnasium vector env under ``env``, which ppo_td steps itself (the fast collector)."""
    simulator: Any = None
    """A VMAS simulator under ``env`` (what ``AgentsCollector`` steps)."""
    limit: int | None = None
    """Steps after which ``StepCounter`` truncates (a source whose env has no time limit of its own)."""
    users_first: bool = False
    """The normalizers after ``RewardSum`` and the user's transforms even when there are none (the order a TorchRL
    env's stack always had; the checkpoints it wrote index their transforms so)."""
    notes: list[str] = dataclasses.field(default_factory=list)
