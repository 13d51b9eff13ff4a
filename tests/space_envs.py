"""Envs with every observation space ppo_td encodes, for the fast collector's bit-for-bit tests (test_fast.py)."""

import gymnasium as gym
import numpy as np


class Seek(gym.Env):
    """Find the goal cell on a grid. The observation mixes every kind: a uint8 image, a Discrete cell, a
    MultiDiscrete pair, and a Tuple of a MultiBinary and a float64 Box (cast to float32 inside the Dict)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.observation_space = gym.spaces.Dict({
            "grid": gym.spaces.Box(0, 255, (size, size, 1), np.uint8),
            "cell": gym.spaces.Discrete(size * size),
            "pair": gym.spaces.MultiDiscrete([size, size]),
            "extra": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Box(-1, 1, (2,), np.float64))),
        })
        self.action_space = gym.spaces.Discrete(4)

    def _obs(self) -> dict:
        grid = np.zeros((self.size, self.size, 1), np.uint8)
        grid[divmod(self.goal, self.size)] = 255
        row, col = divmod(self.cell, self.size)
        return {"grid": grid, "cell": self.cell, "pair": np.array([row, col]),
                "extra": (self.np_random.integers(0, 2, 2, dtype=np.int8), self.np_random.uniform(-1, 1, 2))}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cell, self.goal = (int(x) for x in self.np_random.choice(self.size * self.size, 2, replace=False))
        return self._obs(), {}

    def step(self, action):
        row, col = divmod(self.cell, self.size)
        row, col = [(row - 1, col), (row + 1, col), (row, col - 1), (row, col + 1)][int(action)]
        if 0 <= row < self.size and 0 <= col < self.size:
            self.cell = row * self.size + col
        found = self.cell == self.goal
        return self._obs(), float(found) - 0.01, found, False, {}


def seek(size: int = 4) -> Seek:
    return Seek(size)


class Shop(gym.Env):
    """A user's env with a Dict + MultiDiscrete observation: a float position and an inventory of counts."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
            "inventory": gym.spaces.MultiDiscrete([4, 4]),
        })
        self.action_space = gym.spaces.Discrete(3)

    def _obs(self) -> dict:
        return {"position": self.position.copy(), "inventory": self.inventory.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        self.inventory = np.zeros(2, dtype=np.int64)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.position = np.clip(self.position + self.np_random.normal(0, 0.1, 3), -1, 1).astype(np.float32)
        if action < 2:
            self.inventory[action] = min(self.inventory[action] + 1, 3)
        reward = float(self.inventory.sum()) / 6.0 - float(abs(self.position).sum()) / 3.0
        return self._obs(), reward, False, self.t >= 50, {}


def shop() -> Shop:
    return Shop()


class Counts(gym.Env):
    """A uint8 vector observation (as Atari's RAM, or MiniGrid's flattened grid): counters that grow at different
    rates and wrap, so their means and spreads differ; a reward for matching the counters' parity."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (4,), np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, 256, 4).astype(np.int64)
        self.t = 0
        return self.state.astype(np.uint8), {}

    def step(self, action):
        self.t += 1
        self.state = (self.state + np.array([1, 3, 17, 101]) + action) % 256
        reward = float(int(action) == int(self.state[0] % 2))
        return self.state.astype(np.uint8), reward, False, self.t >= 15, {}


def counts() -> Counts:
    return Counts()
