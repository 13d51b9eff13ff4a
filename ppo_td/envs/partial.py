"""Partially observed tasks that need memory, as env factories (nothing is registered with Gymnasium).

ppo_td's ``module:function`` env form builds them: ``ppo-td train --env.env-id
ppo_td.envs.partial:cartpole_no_velocity``, or the ``cartpole-novel`` and ``pendulum-novel`` presets;
``--env.kwargs length=12`` passes keyword arguments.

- ``cartpole_no_velocity``: CartPole-v1 (500 steps) showing the cart position and pole angle only, as RL Zoo's
  ``CartPoleNoVel-v1`` (sb3-contrib's recurrent PPO benchmark): the velocities must be inferred from
  successive observations.
- ``pendulum_no_velocity``: Pendulum-v1 (200 steps) showing cos and sin of the angle only (RL Zoo's
  ``PendulumNoVel-v1``).
- ``noisy_sensors``: any Box-observation Gymnasium env (Pendulum-v1 by default) with a Dict observation of two
  groups, named as Isaac Lab's: ``"policy"``, the observation with Gaussian noise of ``noise_std`` (a robot's
  sensors), and ``"critic"``, the observation as the simulator has it (privileged: only in training). The task of
  the asymmetric actor-critic (``--model.actor-keys policy --model.critic-keys critic``).
- ``CueRecall``: a cue (+1 or -1) is shown at the first step only; at the last step of ``length`` the agent must
  name it (+1 reward when right, -1 when wrong). The best a memoryless policy can expect is 0.
- ``masked_cue_recall``: the same with three actions and ``info["action_mask"]``: "wait" is the only legal action
  before the last step and illegal at it; an illegal action raises. Needs memory and masking.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv, PendulumEnv


class KeepEntries(gym.ObservationWrapper):
    """A ``Box`` observation reduced to the entries at ``indices``."""

    def __init__(self, env: gym.Env, indices: tuple[int, ...]) -> None:
        super().__init__(env)
        self.indices = np.asarray(indices)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[self.indices], space.high[self.indices],
                                                dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.indices]


def cartpole_no_velocity(**kwargs: Any) -> gym.Env:
    """CartPole with the cart position and the pole angle only (the velocities, entries 1 and 3, removed), cut at
    500 steps as CartPole-v1."""
    return gym.wrappers.TimeLimit(KeepEntries(CartPoleEnv(**kwargs), (0, 2)), 500)


def pendulum_no_velocity(**kwargs: Any) -> gym.Env:
    """Pendulum with cos and sin of the angle only (the angular velocity, entry 2, removed), cut at 200 steps as
    Pendulum-v1."""
    return gym.wrappers.TimeLimit(KeepEntries(PendulumEnv(**kwargs), (0, 1)), 200)


class NoisySensors(gym.ObservationWrapper):
    """A ``Box`` observation as a Dict of ``"policy"`` (with Gaussian noise of std ``noise_std``, drawn from the env's
    own generator, so a seeded env draws the same noise) and ``"critic"`` (the observation as it is)."""

    def __init__(self, env: gym.Env, noise_std: float) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"NoisySensors needs a Box observation; {env} has {space}")
        if noise_std < 0:
            raise ValueError(f"noise_std={noise_std} must be >= 0")
        self.noise_std = float(noise_std)
        noisy = gym.spaces.Box(-np.inf, np.inf, space.shape, np.float32)
        self.observation_space = gym.spaces.Dict({"policy": noisy, "critic": space})

    def observation(self, observation: np.ndarray) -> dict:
        noise = self.env.unwrapped.np_random.normal(0.0, self.noise_std, np.shape(observation))
        return {"policy": (observation + noise).astype(np.float32), "critic": observation}

    def state_dict(self) -> dict:
        """Nothing of its own to keep: its noise comes from the env's generator, which ppo_td records (an exact
        resume)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def noisy_sensors(env_id: str = "Pendulum-v1", noise_std: float = 0.5, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, **kwargs)`` with :class:`NoisySensors` (its time limit under it, as registered)."""
    return NoisySensors(gym.make(env_id, **kwargs), noise_std)


class CueRecall(gym.Env):
    """See the module docstring. Observation: ``[cue at the first step else 0, 1 at the last step else 0]``."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 8, masked: bool = False) -> None:
        if length < 2:
            raise ValueError(f"length={length} must be >= 2 (a cue step and a recall step)")
        self.length, self.masked = length, masked
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(3 if masked else 2)
        self.t, self.cue = 0, 1

    def _obs(self) -> np.ndarray:
        return np.array([self.cue if self.t == 0 else 0.0, float(self.t == self.length - 1)], dtype=np.float32)

    def _info(self) -> dict:
        if not self.masked:
            return {}
        last = self.t == self.length - 1
        return {"action_mask": np.array([last, last, not last], dtype=np.int8)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.cue = 0, int(self.np_random.choice((-1, 1)))
        return self._obs(), self._info()

    def step(self, action: Any):
        action = int(action)
        if self.masked and not self._info()["action_mask"][action]:
            raise ValueError(f"illegal action {action} at step {self.t} of MaskedCueRecall (the mask was ignored)")
        reward = 0.0
        if self.t == self.length - 1:
            reward = 1.0 if action == int(self.cue > 0) else -1.0
            self.t += 1
            return self._obs(), reward, True, False, self._info()
        self.t += 1
        return self._obs(), reward, False, False, self._info()

    def state_dict(self) -> dict:
        """The episode's state, for an exact resume (the env's RNG ppo_td records itself)."""
        return {"t": self.t, "cue": self.cue}

    def load_state_dict(self, state: dict) -> None:
        self.t, self.cue = int(state["t"]), int(state["cue"])


def masked_cue_recall(length: int = 8) -> CueRecall:
    """:class:`CueRecall` with the wait action and its mask."""
    return CueRecall(length, masked=True)
