"""Mirror images of symmetric tasks, for ``loss.mirror`` (:mod:`ppo_td.training.symmetry`): each maps a batch of
observations (in the env's units, the last dimension the features) and a batch of actions to their mirror images.

- :class:`PendulumMirror` (Pendulum-v1): the pendulum reflected about the vertical, the angle and the angular
  velocity negated (``[cos, sin, w] -> [cos, -sin, -w]``) and the torque negated; the dynamics and the reward are
  unchanged by it.
- :class:`Walker2dMirror` (Walker2d-v5, whose two legs are alike, both feet's friction 1.9 since v5): the right and
  left legs' joint angles, velocities and motors swapped.

``ppo-td train --preset pendulum --loss.mirror ppo_td.envs.mirrors:PendulumMirror --loss.mirror-augment``. Write your
own the same way: any object (or class) with ``observation(obs)`` and ``action(action)``.
"""

from __future__ import annotations

import torch


class PendulumMirror:
    """Pendulum-v1 reflected about the vertical."""

    def observation(self, obs: torch.Tensor) -> torch.Tensor:
        return obs * obs.new_tensor([1.0, -1.0, -1.0])

    def action(self, action: torch.Tensor) -> torch.Tensor:
        return -action


class Walker2dMirror:
    """Walker2d-v5 with its legs swapped. Observation (17): height, torso angle, the right leg's thigh, leg and foot
    angles (2-4), the left's (5-7), the x and z velocities, the torso's angular velocity, the right leg's joint
    velocities (11-13), the left's (14-16). Action (6): the right leg's three motors, then the left's."""

    OBSERVATION = (0, 1, 5, 6, 7, 2, 3, 4, 8, 9, 10, 14, 15, 16, 11, 12, 13)
    ACTION = (3, 4, 5, 0, 1, 2)

    def observation(self, obs: torch.Tensor) -> torch.Tensor:
        return obs[..., list(self.OBSERVATION)]

    def action(self, action: torch.Tensor) -> torch.Tensor:
        return action[..., list(self.ACTION)]
