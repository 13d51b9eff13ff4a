"""A small cooperative PettingZoo parallel env with per-agent action masks, for the multi-agent tests.

Each of ``n_agents`` agents sees a one-hot target among ``n_actions`` and picks an action; only some actions are
legal at each step (``info["action_mask"]``, Gymnasium's convention; the target is always legal, and an illegal
pick raises). Every agent is rewarded with the team's fraction of correct picks, so the task is cooperative; an
episode lasts ``length`` steps, and agent 0 leaves one step before the others (agents finish at different times).
A random legal policy scores about 0.4 per step; copying the target scores 1.
"""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class MaskedPick(ParallelEnv):
    metadata = {"name": "masked_pick_v0"}

    def __init__(self, n_agents: int = 2, n_actions: int = 4, length: int = 6) -> None:
        self.possible_agents = [f"agent_{i}" for i in range(n_agents)]
        self.n_actions, self.length = n_actions, length
        self.rng = np.random.default_rng()

    @functools.cache  # noqa: B019 - PettingZoo's idiom: one space object per agent
    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (self.n_actions,), np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(self.n_actions)

    def _draw(self) -> tuple[dict, dict]:
        self.targets = {a: int(self.rng.integers(self.n_actions)) for a in self.agents}
        self.masks = {}
        for agent, target in self.targets.items():
            mask = self.rng.random(self.n_actions) < 0.5
            mask[target] = True
            self.masks[agent] = mask.astype(np.int8)
        obs = {a: np.eye(self.n_actions, dtype=np.float32)[t] for a, t in self.targets.items()}
        return obs, {a: {"action_mask": self.masks[a]} for a in self.agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._draw()

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        for agent, action in actions.items():
            if not self.masks[agent][int(action)]:
                raise ValueError(f"{agent} picked the illegal action {action} (mask {self.masks[agent]})")
        correct = np.mean([int(actions[a]) == self.targets[a] for a in actions])
        self.t += 1
        rewards = {a: float(correct) for a in self.agents}
        terminated = {a: self.t >= self.length - (1 if a == "agent_0" else 0) for a in self.agents}
        truncated = {a: False for a in self.agents}
        obs, infos = self._draw()
        return obs, rewards, terminated, truncated, infos


def parallel_env(**kwargs) -> MaskedPick:
    return MaskedPick(**kwargs)
