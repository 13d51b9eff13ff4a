"""Small-image envs registered when their module is imported (``image_envs:PpoTdTest/SmallImage-v0``), as a user's
MiniGrid-like env is: a 7x7x3 uint8 image (or 10x10x4 bool, as MinAtar's), four actions, rewarded for action 0
(tests/test_cli.py)."""

import gymnasium as gym
import numpy as np


class SmallImage(gym.Env):
    observation_space = gym.spaces.Box(0, 10, (7, 7, 3), np.uint8)
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), float(action == 0), False, False, {}


gym.register("PpoTdTest/SmallImage-v0", entry_point=SmallImage, max_episode_steps=20)


class BoolGrid(SmallImage):
    """MinAtar's kind of observation: channels of bool, 10x10x4."""

    observation_space = gym.spaces.Box(0, 1, (10, 10, 4), bool)


gym.register("PpoTdTest/BoolGrid-v0", entry_point=BoolGrid, max_episode_steps=20)
