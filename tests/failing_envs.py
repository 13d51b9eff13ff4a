"""CartPoles that fail inside collection worker processes (the failure tests); imported by id "failing_envs:...".

Workers are spawned, so they learn these ids by importing this module; the training process's pid
reaches them through the environment, so the learner's own copies never fail.
"""

import os
import signal

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

os.environ.setdefault("PPO_TD_TEST_LEARNER_PID", str(os.getpid()))


class FailingCartPole(CartPoleEnv):
    """Inside a worker, the copy seeded with ``fail_seed`` fails at its 40th step: SIGKILL or an exception."""

    def __init__(self, mode="kill", fail_seed=3, **kwargs):
        super().__init__(**kwargs)
        self.mode, self.fail_seed, self.steps, self.seeded = mode, fail_seed, 0, None

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.seeded = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        in_worker = str(os.getpid()) != os.environ["PPO_TD_TEST_LEARNER_PID"]
        if self.steps == 40 and self.seeded == self.fail_seed and in_worker:
            if self.mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise ValueError("simulator diverged")
        return super().step(action)


gym.register("PpoTdTest/KillWorker-v0", entry_point=FailingCartPole, max_episode_steps=500, kwargs={"mode": "kill"})
gym.register("PpoTdTest/RaiseInWorker-v0", entry_point=FailingCartPole, max_episode_steps=500,
             kwargs={"mode": "raise"})
