"""``ppo-td play RUN``: play a turn-based game against a trained policy in the terminal.

The run's game (:class:`~ppo_td.envs.games.TurnBased`) is made with you in the learner's seat and the policy in the
others (its mode, or ``sampled``). A board of two planes (PettingZoo's classic games: plane 0 the mover's pieces,
plane 1 the other's) is drawn as text, ``X`` for yours and ``O`` for the policy's; moves are typed as numbers
(connect four: a column; tic-tac-toe: a cell, numbered row by row), an illegal or unreadable one is refused and
asked again; the end of input ends the game.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ppo_td.deploy.policy import load_policy
from ppo_td.envs.games import legal_actions, turn_based


class PolicyPlayer:
    """A :class:`~ppo_td.envs.games.Opponent` that plays a trained :class:`~ppo_td.deploy.Policy`'s moves (its mode
    or samples, as the policy was loaded: ``load_policy(..., deterministic=...)``)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        return int(self.policy(observation))


def draw(observation: Any) -> str:
    """The board as text (``X`` yours, ``O`` the other's, ``.`` empty) with the move numbers: column numbers under a
    board whose moves are its columns, each cell's number on a board whose moves are its cells; a board of another
    shape as its legal moves only."""
    board, n = np.asarray(observation["observation"]), len(observation["action_mask"])
    if board.ndim != 3 or board.shape[-1] != 2:
        return f"legal moves: {' '.join(map(str, legal_actions(observation)))}"
    rows, columns = board.shape[:2]
    cells = [["X" if board[r, c, 0] else "O" if board[r, c, 1] else "." for c in range(columns)] for r in range(rows)]
    if n == rows * columns:  # a move per cell: empty cells show their number
        width = len(str(n - 1))
        lines = [" ".join(cell.rjust(width) if cell != "." else str(r * columns + c).rjust(width)
                          for c, cell in enumerate(row)) for r, row in enumerate(cells)]
        return "\n".join(lines)
    return "\n".join([" ".join(row) for row in cells] + [" ".join(str(c) for c in range(columns))])


def play(run: str, *, sampled: bool = False, seed: int | None = None, read: Callable[[str], str] = input,
         write: Callable[[str], None] = print) -> float | None:
    """Play one game of ``run``'s game against its policy; returns your reward, in the run's units (a loss weighed by
    env.negative_reward_scale), None when the input ended first.

    Raises:
        ValueError: the run's env is not a turn-based game.
    """
    policy = load_policy(run, deterministic=not sampled)
    env = policy.make_env()
    try:
        game = turn_based(env, "ppo-td play", run, policy.config.env.env_id)
        game.set_opponent(PolicyPlayer(policy))
        observation, info = env.reset(seed=seed)
        write(f"you play {info['seat']} (X); the policy plays O")
        while True:
            write(draw(observation))
            move = _move(observation, read, write)
            if move is None:
                write("input ended: the game is left unfinished")
                return None
            observation, reward, terminated, truncated, _ = env.step(move)
            if terminated or truncated:
                write(draw(observation))
                write("you won" if reward > 0 else "you lost" if reward < 0 else "a draw")
                return float(reward)
    finally:
        env.close()


def _move(observation: Any, read: Callable[[str], str], write: Callable[[str], None]) -> int | None:
    """Your next legal move, asked until one is given; None at the end of input."""
    legal = [int(a) for a in legal_actions(observation)]
    while True:
        try:
            text = read(f"your move ({', '.join(map(str, legal))}): ")
        except EOFError:
            return None
        try:
            move = int(text.strip())
        except ValueError:
            write(f"{text.strip()!r} is not a move: type one of {legal}")
            continue
        if move not in legal:
            write(f"{move} is not a legal move here: type one of {legal}")
            continue
        return move
