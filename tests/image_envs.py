"""A small-image env registered when its module is imported (``image_envs:PpoTdTest/SmallImage-v0``), as a user's
MiniGrid-like env is: a 7x7x3 uint8 image, four actions, rewarded for action 0 (tests/test_cli.py)."""

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
