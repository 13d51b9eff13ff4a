"""An env that reports ``info["is_success"]`` at its episodes' end (tests/test_info_keys.py)."""

import gymnasium as gym
import numpy as np


class Reach(gym.Env):
    """Four steps; the episode succeeds when the last action is 1 (is_success in the last step's info only), and
    ``info["note"]`` is a string (not a number ppo_td can record)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {"note": "start"}

    def step(self, action):
        self.t += 1
        done = self.t >= 4
        info = {"is_success": float(action == 1), "note": "end"} if done else {"note": "mid"}
        return np.full(2, self.t / 4, np.float32), float(action), done, False, info


def reach() -> Reach:
    return Reach()


class Varied(gym.Env):
    """Episodes of 2 to 5 steps (copies end at different steps: partial resets); ``is_success`` in the reset's info
    (0.5) and at the last step (the action), nothing between."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(2, 6))
        return np.zeros(2, np.float32), {"is_success": 0.5}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        return np.full(2, self.t / 5, np.float32), float(action), done, False, {"is_success": float(action)} if done \
            else {}


def varied() -> Varied:
    return Varied()


class OddSuccess(Reach):
    """Reach, whose ``is_success`` is a pair (two vehicles' successes, say): not one number per episode."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if "is_success" in info:
            info["is_success"] = (True, False)
        return obs, reward, terminated, truncated, info


def odd_success() -> OddSuccess:
    return OddSuccess()
