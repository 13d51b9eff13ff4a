"""Numpy-vectorized Gymnasium envs presented the way TorchRL steps batched envs.

Gymnasium 1.x ships a numpy-vectorized CartPole (``CartPoleVectorEnv``): all copies
step in a handful of array operations, millions of steps per second. It auto-resets
in ``NEXT_STEP`` mode, which TorchRL's ``GymWrapper`` refuses: TorchRL resets the
finished copies itself and needs the true final observation of each episode.
:class:`PartialResetCartPole` gives it that: no auto-reset, and
``reset(options={"reset_mask": mask})`` re-draws the masked copies only
(``AutoresetMode.DISABLED`` semantics), with the same initial-state distribution as
the env's own reset.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode


class PartialResetCartPole(gym.vector.VectorWrapper):
    """``CartPoleVectorEnv`` with ``AutoresetMode.DISABLED`` semantics (see module docstring)."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        if not isinstance(env.unwrapped, CartPoleVectorEnv):
            raise TypeError(f"PartialResetCartPole wraps gymnasium's CartPoleVectorEnv, got {type(env.unwrapped)}")
        super().__init__(env)
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.DISABLED}
        self.autoreset_mode = AutoresetMode.DISABLED

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        mask = (options or {}).get("reset_mask")
        if mask is None or seed is not None:
            return self.env.reset(seed=seed, options={k: v for k, v in (options or {}).items() if k != "reset_mask"})
        cart = self.env.unwrapped
        mask = np.asarray(mask, dtype=bool)
        cart.state[:, mask] = cart.np_random.uniform(low=cart.low, high=cart.high, size=(4, int(mask.sum())))
        cart.steps[mask] = 0
        cart.prev_done[mask] = False
        return cart.state.T.astype(np.float32), {}

    def step(self, actions):
        cart = self.env.unwrapped
        if cart.prev_done.any():  # TorchRL resets every finished copy before the next step
            raise RuntimeError("PartialResetCartPole stepped with finished copies that were not reset; "
                               "reset them with reset(options={'reset_mask': done})")
        return self.env.step(actions)


def numpy_vectorized(env_id: str) -> bool:
    """True when Gymnasium has a numpy-vectorized implementation of ``env_id`` that ppo_td can step."""
    spec = gym.spec(env_id.rpartition(":")[2])  # without a module: prefix
    return spec.vector_entry_point is not None and str(spec.vector_entry_point).endswith(":CartPoleVectorEnv")
