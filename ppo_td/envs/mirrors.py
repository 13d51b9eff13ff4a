"""Mirror images of symmetric tasks, for ``loss.mirror`` (:mod:`ppo_td.training.symmetry`): each maps a batch of
observations (in the env's units, the last dimension the features) and a batch of actions to their mirror images.

- :class:`PendulumMirror` (Pendulum-v1): the pendulum reflected about the vertical, the angle and the angular
  velocity negated (``[cos, sin, w] -> [cos, -sin, -w]``) and the torque negated; the dynamics and the reward are
  unchanged by it.
- :class:`Walker2dMirror` (Walker2d-v5, whose two legs are alike, both feet's friction 1.9 since v5): the right and
  left legs' joint angles, velocities and motors swapped.

- :class:`TicTacToeSymmetries` (PettingZoo's ``tictactoe_v3``): the board's 7 other symmetries (3 rotations, 4
  reflections), each moving the cells and the moves alike: 7 images of every state (AlphaGo Zero's augmentation of a
  board by its 8 symmetries, Silver et al. 2017). The legal-move masks follow from the moves' permutation.
- :class:`ConnectFourMirror` (``connect_four_v3``): the board and its columns reflected left to right.

``ppo-td train --preset pendulum --loss.mirror ppo_td.envs.mirrors:PendulumMirror --loss.mirror-augment``. Write your
own the same way: any object (or class) with ``observation(obs)`` and ``action(action)``, each returning the image
of the batch, or k images of it one after the other (k times its rows).
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


def _board_images(obs: torch.Tensor, orders: torch.Tensor, rows: int, columns: int, name: str) -> torch.Tensor:
    """The images of a batch of ``rows`` x ``columns`` x planes boards, image ``i``'s cell ``j`` the original's cell
    ``orders[i, j]``, one image after the other."""
    if tuple(obs.shape[-3:-1]) != (rows, columns):
        raise ValueError(f"{name} reads boards of {rows} x {columns} cells x planes; the networks read "
                         f"{tuple(obs.shape)}: it is made for another game")
    cells = obs.reshape(*obs.shape[:-3], rows * columns, obs.shape[-1])
    return torch.cat([cells[..., order.to(obs.device), :].reshape(obs.shape) for order in orders], 0)


def _moves_images(action: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """The moves of a batch in each image (``images[i, a]``: move ``a``'s cell in image ``i``), one image after the
    other; float actions (a mean) are refused, the moves being cells."""
    if action.is_floating_point():
        raise ValueError(f"a board mirror maps moves (integer cells or columns), not {action.dtype} actions (a mean "
                         "action: the mirror loss is for Gaussian policies; use loss.mirror_augment alone)")
    table = images.to(action.device)
    return torch.cat([one[action.long()].to(action.dtype) for one in table], 0)


class TicTacToeSymmetries:
    """Tic-tac-toe's board (PettingZoo's ``tictactoe_v3``: 3 x 3 cells x 2 planes, move ``3 * row + column``) under
    its 7 symmetries other than the identity: rotations by 90, 180 and 270 degrees, and reflections about the
    middle row, the middle column and the two diagonals. ``observation`` returns the 7 images of a batch, one after
    the other; ``action`` the moves' cells in each."""

    def __init__(self) -> None:
        maps = (lambda r, c: (c, 2 - r), lambda r, c: (2 - r, 2 - c), lambda r, c: (2 - c, r),  # rotations
                lambda r, c: (2 - r, c), lambda r, c: (r, 2 - c), lambda r, c: (c, r), lambda r, c: (2 - c, 2 - r))
        to = [[3 * m(r, c)[0] + m(r, c)[1] for r in range(3) for c in range(3)] for m in maps]
        self.images = torch.tensor(to)
        """``images[i, a]``: the cell move ``a`` plays in image ``i``."""
        self.orders = self.images.argsort(-1)
        """Image ``i``'s cell ``j`` holds the original's cell ``orders[i, j]``."""

    def observation(self, obs: torch.Tensor) -> torch.Tensor:
        return _board_images(obs, self.orders, 3, 3, "TicTacToeSymmetries")

    def action(self, action: torch.Tensor) -> torch.Tensor:
        return _moves_images(action, self.images)


class ConnectFourMirror:
    """Connect four's board (PettingZoo's ``connect_four_v3``: 6 rows x 7 columns x 2 planes, a move a column)
    reflected left to right: column ``c`` becomes ``6 - c``."""

    def __init__(self) -> None:
        self.images = torch.arange(6, -1, -1).unsqueeze(0)
        self.orders = torch.tensor([[7 * r + 6 - c for r in range(6) for c in range(7)]])

    def observation(self, obs: torch.Tensor) -> torch.Tensor:
        return _board_images(obs, self.orders, 6, 7, "ConnectFourMirror")

    def action(self, action: torch.Tensor) -> torch.Tensor:
        return _moves_images(action, self.images)
