"""Envs whose episodes never end (no termination, no time limit): a user's first custom env, often. Imported by
factory id ("endless_envs:endless"), also by ``ppo-td`` processes the tests start (tests/ on PYTHONPATH)."""

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class Endless(gym.Env):
    """Reward 1 for action 1, 0 for action 0, forever; ``end_at`` (steps) ends an episode there for the copies whose
    reset seed is even (some episodes end, some do not)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end_at: int | None = None) -> None:
        self.end_at, self.steps, self.ends = end_at, 0, False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.ends = self.end_at is not None and seed % 2 == 0
        self.steps = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.steps += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(action), self.ends and self.steps >= self.end_at, False, {}


class Truncating(Endless):
    """Truncates its own episodes at 30 steps, as many users' envs do, without Gymnasium's TimeLimit."""

    def step(self, action):
        obs, reward, terminated, _, info = super().step(action)
        return obs, reward, terminated, self.steps >= 30, info


def truncating() -> gym.Env:
    return Truncating()


def endless(end_at: int | None = None) -> gym.Env:
    return Endless(end_at)


def endless_pendulum(render_mode: str | None = None) -> gym.Env:
    """Gymnasium's Pendulum without its 200-step limit: renders ``rgb_array`` frames, never ends."""
    return PendulumEnv(render_mode=render_mode)


class HalfStuck(gym.Env):
    """From an even reset seed the episode ends at step 5 with reward 1; from an odd one it never ends, earning 0:
    a policy stuck forever from some starts (a failure a score must not leave out)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.steps, self.ends = 0, True

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.ends = seed % 2 == 0
        self.steps = 0
        return np.array([float(self.ends), 0.0], np.float32), {}

    def step(self, action):
        self.steps += 1
        done = self.ends and self.steps >= 5
        return np.array([float(self.ends), 0.0], np.float32), float(done), done, False, {}


def half_stuck() -> gym.Env:
    return HalfStuck()
