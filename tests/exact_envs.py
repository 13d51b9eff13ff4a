"""Wrappers and factories for tests/test_exact_envs.py: an importable module, as a user's module of envs is."""

import gymnasium as gym


class ScaledPlain(gym.Wrapper):
    """Scales the reward by an argument it does not record (no RecordConstructorArgs): Gymnasium's spec holds
    kwargs=None for it, so no record can rebuild it."""

    def __init__(self, env, scale=1.0):
        super().__init__(env)
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info


class ScaledRecorded(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """The same wrapper recording its argument: its spec holds it, and ppo_td records it as a KEY=VALUE."""

    def __init__(self, env, scale=1.0):
        gym.utils.RecordConstructorArgs.__init__(self, scale=scale)
        gym.Wrapper.__init__(self, env)
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info


class Bonus(gym.Wrapper):
    """Adds 1 to every reward; takes no argument, so ``Bonus(env)`` rebuilds it without a record of any."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + 1.0, terminated, truncated, info


def make_pendulum(g=10.0, scale=1.0):
    """A module-level factory with keyword arguments."""
    return ScaledRecorded(gym.make("Pendulum-v1", g=g), scale=scale)


class NoisyRescale(gym.wrappers.RescaleAction):
    """A subclass of a recording wrapper with an argument of its own, which its parent's record leaves out."""

    def __init__(self, env, min_action=-1.0, max_action=1.0, noise=0.0):
        super().__init__(env, min_action, max_action)
        self.noise = noise
