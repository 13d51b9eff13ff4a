"""A small PettingZoo parallel env for the agent-group tests: ``alice`` (no ``_<number>`` suffix: a group of her own,
named as she is) and ``bob_0``, ``bob_1`` (group ``bob``), with different observation and action spaces; each agent
is rewarded for picking the action equal to its step count (mod its choices). Ends after ``max_cycles`` steps."""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Pick(ParallelEnv):
    metadata = {"name": "pick_v0"}

    def __init__(self, max_cycles: int = 5) -> None:
        self.possible_agents = ["alice", "bob_0", "bob_1"]
        self.max_cycles = max_cycles
        self.t = 0

    @functools.cache  # noqa: B019 - PettingZoo's pattern: one space object per agent
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (3,) if agent == "alice" else (2,), np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(4 if agent == "alice" else 2)

    def _observe(self, agent: str) -> np.ndarray:
        size = self.observation_space(agent).shape[0]
        return np.full(size, (self.t % 4) / 4, np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict):
        rewards = {a: float(int(actions[a]) == self.t % self.action_space(a).n) for a in self.agents}
        self.t += 1
        over = self.t >= self.max_cycles
        observations = {a: self._observe(a) for a in self.agents}
        terminations = {a: False for a in self.agents}
        truncations = {a: over for a in self.agents}
        infos = {a: {} for a in self.agents}
        if over:
            self.agents = []
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs) -> Pick:
    return Pick(**kwargs)
