"""An example env for ppo_td: trading with state-dependent invalid actions, registered with Gymnasium on import.

Not part of the library: ``import examples.trading`` (from the repository folder) registers
it, and Gymnasium's ``module:EnvId`` form does that for you:
``ppo-td train --preset trading`` uses ``examples.trading:ppo_td/Trading-v0``.


Hold (0), buy (1) or sell (2) one asset whose returns have momentum (an AR(1)
process, so recent returns predict the next one). The agent is either all in cash
or all in the asset: buying without cash (already holding) and selling without a
position are invalid. Three registered variants differ only in how invalid actions
are handled:

- ``ppo_td/Trading-v0``: the mask is in the observation, ``{"observation", "action_mask"}``;
- ``ppo_td/TradingInfo-v0``: the mask is in ``info["action_mask"]`` (the other common convention);
- ``ppo_td/TradingPenalty-v0``: no mask; an invalid action costs ``penalty`` and does nothing.

In every variant an invalid action that reaches the env is a no-op counted in
``info["illegal_actions"]`` (with the penalty), so the env stays well-defined.

``state_dict()`` / ``load_state_dict(state)`` give ppo_td the episode's state, so a run on this env resumes
from a checkpoint bit for bit (the env's RNG ppo_td records itself). Any env can do the same.
"""

from __future__ import annotations

from typing import Literal

import gymnasium as gym
import numpy as np

HOLD, BUY, SELL = 0, 1, 2
LAGS = 3


class TradingEnv(gym.Env):
    """See the module docstring. Reward: the asset's return in percent while holding, minus costs."""

    metadata = {"render_modes": []}

    def __init__(self, mask: Literal["observation", "info", "none"] = "observation", episode_length: int = 100,
                 momentum: float = 0.8, volatility: float = 0.01, cost: float = 0.05, penalty: float = 1.0) -> None:
        if mask not in ("observation", "info", "none"):
            raise ValueError(f"mask={mask!r} must be 'observation', 'info' or 'none'")
        self.mask_mode, self.episode_length = mask, episode_length
        self.momentum, self.volatility, self.cost, self.penalty = momentum, volatility, cost, penalty
        features = gym.spaces.Box(-10.0, 10.0, (LAGS + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        if mask == "observation":
            mask_space = gym.spaces.MultiBinary(3)
            self.observation_space = gym.spaces.Dict({"observation": features, "action_mask": mask_space})
        else:
            self.observation_space = features
        self.illegal_actions = 0

    def _mask(self) -> np.ndarray:
        return np.array([1, self.position == 0, self.position == 1], dtype=np.int8)

    def _obs(self):
        features = np.append(np.clip(self.returns * 100, -10, 10), self.position).astype(np.float32)
        return {"observation": features, "action_mask": self._mask()} if self.mask_mode == "observation" else features

    def _info(self) -> dict:
        info = {"illegal_actions": self.illegal_actions}
        if self.mask_mode == "info":
            info["action_mask"] = self._mask()
        return info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.position, self.illegal_actions = 0, 0, 0
        self.returns = np.zeros(LAGS)
        for _ in range(LAGS):  # warm the AR(1) process up so the first observation is informative
            self._advance()
        return self._obs(), self._info()

    def _advance(self) -> float:
        r = self.momentum * self.returns[0] + self.volatility * self.np_random.standard_normal()
        self.returns = np.roll(self.returns, 1)
        self.returns[0] = r
        return r

    def state_dict(self) -> dict:
        """Where the episode is: what a checkpoint records (numbers and numpy arrays)."""
        return {"t": self.t, "position": self.position, "illegal_actions": self.illegal_actions,
                "returns": self.returns.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.t, self.position, self.illegal_actions = state["t"], state["position"], state["illegal_actions"]
        self.returns = np.array(state["returns"], dtype=float)

    def step(self, action):
        action = int(action)
        reward = 0.0
        if not self._mask()[action]:
            self.illegal_actions += 1
            reward -= self.penalty
        elif action in (BUY, SELL):
            self.position = 1 - self.position
            reward -= self.cost
        reward += self.position * self._advance() * 100  # percent return while holding
        self.t += 1
        return self._obs(), float(reward), False, self.t >= self.episode_length, self._info()



def register() -> None:
    """Register the three variants with Gymnasium (idempotent; done when this module is imported)."""
    for env_id, mask in (("ppo_td/Trading-v0", "observation"), ("ppo_td/TradingInfo-v0", "info"),
                         ("ppo_td/TradingPenalty-v0", "none")):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=TradingEnv, kwargs={"mask": mask}, max_episode_steps=100)


register()
