"""Turn-based games (PettingZoo AEC envs: connect four, tic-tac-toe, ...) as the Gymnasium env of one player.

``ppo-td train --env.env-id pettingzoo.classic.connect_four_v3:env`` trains on it as it is: a factory returning a
PettingZoo ``AECEnv`` is played through :class:`TurnBased` (:mod:`ppo_td.envs.sources.gymnasium`), each of the
``env.num_envs`` copies one game.

The learner takes a seat each game (drawn from the env's generator: every seat, alike often) and the other seats
are played by an :class:`Opponent` (a uniformly random legal move by default). One step of the learner's env is its
move and every move after it until its turn comes again or the game ends: the reward is what the game gave the
learner over them (PettingZoo's cumulative reward at its turn, :meth:`pettingzoo.AECEnv.last`), so a game the
opponent wins on its move reaches the learner's last move as the loss. Observations are the game's own for the
learner's seat (PettingZoo's classic games show the board from the player's side: one policy plays every seat), its
``action_mask`` entry ppo_td's masking (:mod:`ppo_td.envs.masking`); ``info["seat"]`` names the seat.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

MASK = "action_mask"


class Opponent(Protocol):
    """Who plays the seats that are not the learner's: ``act(observation, seat, rng)`` returns a legal action
    (``observation`` as the game gives it to ``seat``, its ``action_mask`` included), drawing any randomness from
    ``rng`` (the env's generator, so a seeded env plays the same games)."""

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int: ...


class RandomOpponent:
    """A uniformly random legal move: the legal ones from the observation's ``action_mask``, any of the ``n``
    actions without one (:class:`TurnBased` gives its own an ``n``)."""

    def __init__(self, n: int | None = None) -> None:
        self.n = n

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        return int(rng.choice(legal_actions(observation, self.n)))


class ConnectFourWinOrBlock:
    """Connect four's one-move heuristic (an anchor of the issue's arena): a move that wins at once, else one that
    stops the other player's win at its next move, else a random legal move; read from PettingZoo's
    ``connect_four_v3`` observation (a 6 x 7 board, plane 0 the mover's pieces, plane 1 the other's)."""

    def check(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Refuse a game other than connect four's shape (a 6 x 7 x 2 board, 7 columns to play)."""
        _check_board("connect-four-heuristic", "connect four", (6, 7, 2), 7, observation_space, action_space)

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        board, legal = np.asarray(observation["observation"]), legal_actions(observation)
        for plane in (0, 1):  # win, else block
            for column in legal:
                if _connects(board, plane, column):
                    return int(column)
        return int(rng.choice(legal))


class TicTacToeWinOrBlock:
    """Tic-tac-toe's one-move heuristic: a move that completes three in a row, else one that stops the other
    player's three at its next move, else a random legal move; read from PettingZoo's ``tictactoe_v3`` observation
    (a 3 x 3 board, plane 0 the mover's marks, plane 1 the other's; moves number the cells row by row)."""

    LINES = [[(r, c) for c in range(3)] for r in range(3)] + [[(r, c) for r in range(3)] for c in range(3)] + [
        [(i, i) for i in range(3)], [(i, 2 - i) for i in range(3)]]

    def check(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Refuse a game other than tic-tac-toe's shape (a 3 x 3 x 2 board, 9 cells to play)."""
        _check_board("tictactoe-heuristic", "tic-tac-toe", (3, 3, 2), 9, observation_space, action_space)

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        board, legal = np.asarray(observation["observation"]), legal_actions(observation)
        for plane in (0, 1):  # win, else block
            for line in self.LINES:
                marks = [board[r, c, plane] for r, c in line]
                empty = [(r, c) for r, c in line if not board[r, c].any()]
                if sum(marks) == 2 and len(empty) == 1:
                    r, c = empty[0]
                    return int(r * 3 + c)  # the cell's move: row by row, as the observation's board
        return int(rng.choice(legal))


class TicTacToePerfect:
    """Tic-tac-toe's perfect player: every legal move scored by a full game-tree search (negamax over the at most
    5,478 positions, each solved once and kept), one of the best drawn at random. It never loses; two of them always
    draw. Reads PettingZoo's ``tictactoe_v3`` observation as :class:`TicTacToeWinOrBlock` does."""

    def check(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Refuse a game other than tic-tac-toe's shape (a 3 x 3 x 2 board, 9 cells to play)."""
        _check_board("tictactoe-perfect", "tic-tac-toe", (3, 3, 2), 9, observation_space, action_space)

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        return int(rng.choice(self.best_moves(observation)))

    @staticmethod
    def best_moves(observation: Any) -> list[int]:
        """The legal moves of a ``tictactoe_v3`` observation that keep the best outcome perfect play can reach."""
        board = np.asarray(observation["observation"])
        return list(_best(tuple(int(board[r, c, 0]) - int(board[r, c, 1]) for r in range(3) for c in range(3)))[0])


@dataclass(frozen=True)
class Outcomes:
    """The exact probabilities of a deterministic tic-tac-toe player's wins, draws and losses (each seat drawn
    with probability 1/2, as :class:`TurnBased` seats the learner), and the positions where its move threw a game
    away: ``blunders`` maps ``(cells, reach)`` rows, ``cells`` the board from the player's side (1 its marks, -1
    the other's, row by row) before a move that turns a won or drawn position into a lost one under perfect play,
    ``reach`` the probability of meeting it."""

    win: float
    draw: float
    loss: float
    first_seat_loss: float
    second_seat_loss: float
    blunders: list[tuple[tuple[int, ...], float]]


def tictactoe_outcomes(act: Any, opponent: str = "random") -> Outcomes:
    """Every game of tic-tac-toe the deterministic player ``act`` (PettingZoo's ``tictactoe_v3`` observation dict
    in, a move out: a :class:`~ppo_td.deploy.Policy` of a trained run, its mode) can play against ``opponent``
    ('random': each legal move alike likely; 'tictactoe-perfect': each of :class:`TicTacToePerfect`'s best moves
    alike likely), walked with their probabilities: the exact rates of :class:`Outcomes`, where playing N games
    would estimate them (``act`` is called once for each position it meets).

    Raises:
        ValueError: another opponent, or a move ``act`` returns that is not legal.
    """
    if opponent not in ("random", "tictactoe-perfect"):
        raise ValueError(f"opponent={opponent!r}: the exact outcomes walk 'random' or 'tictactoe-perfect'")
    moves: dict[tuple[int, ...], int] = {}
    totals = {1: np.zeros(3), -1: np.zeros(3)}  # by the player's mark: 1 moves first
    blunders: dict[tuple[int, ...], float] = {}

    def walk(cells: tuple[int, ...], mover: int, seat: int, reach: float) -> None:
        mine = tuple(v * seat for v in cells)  # the board from the player's side
        if any(mine[a] == mine[b] == mine[c] != 0 for a, b, c in _TICTACTOE_LINES):
            totals[seat][0 if any(mine[a] == mine[b] == mine[c] == 1 for a, b, c in _TICTACTOE_LINES) else 2] += reach
            return
        empty = [i for i, v in enumerate(cells) if v == 0]
        if not empty:
            totals[seat][1] += reach
            return
        if mover == seat:
            if mine not in moves:
                observation = _tictactoe_observation(mine)
                move = int(act(observation))
                if move not in empty:
                    raise ValueError(f"the player chose move {move} on a board whose legal moves are {empty}")
                moves[mine] = move
            move = moves[mine]
            if _after(mine, move) == -1 < _best(mine)[1]:
                blunders[mine] = blunders.get(mine, 0.0) + reach
            walk(cells[:move] + (mover,) + cells[move + 1:], -mover, seat, reach)
            return
        replies = empty if opponent == "random" else _best(tuple(-v for v in mine))[0]
        for move in replies:
            walk(cells[:move] + (mover,) + cells[move + 1:], -mover, seat, reach / len(replies))

    for seat in (1, -1):
        walk((0,) * 9, 1, seat, 0.5)
    win, draw, loss = (float(v) for v in totals[1] + totals[-1])
    return Outcomes(win, draw, loss, float(totals[1][2]), float(totals[-1][2]),
                    sorted(blunders.items(), key=lambda kv: -kv[1]))


def _tictactoe_observation(cells: tuple[int, ...]) -> dict[str, np.ndarray]:
    """PettingZoo's ``tictactoe_v3`` observation of the player whose marks are ``cells``' 1s."""
    board = np.zeros((3, 3, 2), np.int8)
    for i, v in enumerate(cells):
        if v:
            board[i // 3, i % 3, 0 if v == 1 else 1] = 1
    return {"observation": board, MASK: np.array([v == 0 for v in cells], np.int8)}


def _after(cells: tuple[int, ...], move: int) -> int:
    """The outcome under perfect play for the player to move on ``cells`` (1 its marks) after ``move``."""
    return -_negamax(tuple(-v for v in _played(cells, move)))


@functools.cache
def _best(cells: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The moves on ``cells`` (1 the mover's marks, 0 empty) that keep the best outcome perfect play reaches, and
    that outcome (1 a win, 0 a draw, -1 a loss)."""
    scores = {move: _after(cells, move) for move in range(9) if cells[move] == 0}
    top = max(scores.values())
    return tuple(move for move, score in scores.items() if score == top), top


_TICTACTOE_LINES = [tuple(r * 3 + c for r, c in line) for line in TicTacToeWinOrBlock.LINES]
"""The eight lines as cell numbers, row by row."""


def _played(cells: tuple[int, ...], move: int) -> tuple[int, ...]:
    return cells[:move] + (1,) + cells[move + 1:]


@functools.cache
def _negamax(cells: tuple[int, ...]) -> int:
    """The outcome with perfect play for the player to move (1 a win, 0 a draw, -1 a loss) on the board ``cells``
    (1 the mover's marks, -1 the other's, 0 empty; row by row)."""
    if any(cells[a] == cells[b] == cells[c] == -1 for a, b, c in _TICTACTOE_LINES):
        return -1  # the other player has just made three in a row
    empty = [i for i, v in enumerate(cells) if v == 0]
    if not empty:
        return 0
    return max(-_negamax(tuple(-v for v in _played(cells, i))) for i in empty)


def _check_board(name: str, game: str, shape: tuple[int, ...], moves: int, observation_space: gym.Space,
                 action_space: gym.Space) -> None:
    """Refuse a heuristic opponent (``name``) a game whose board or moves are not ``game``'s."""
    board = observation_space.get("observation") if isinstance(observation_space, gym.spaces.Dict) else None
    if getattr(board, "shape", None) != shape or getattr(action_space, "n", None) != moves:
        raise ValueError(f"the {name} opponent reads {game}'s board (a {' x '.join(map(str, shape))} 'observation', "
                         f"{moves} moves); this game has {observation_space} and {action_space}: choose another "
                         "opponent (random, or module:Name of your own)")


HEURISTICS = {"connect_four": "connect-four-heuristic", "tictactoe": "tictactoe-heuristic"}
"""PettingZoo's classic games with a win-or-block opponent here, by the name their ids carry."""


def heuristic_for(env_id: str) -> str | None:
    """The win-or-block opponent of the game ``env_id`` names (``pettingzoo.classic.connect_four_v3:env``), if any."""
    return next((heuristic for game, heuristic in HEURISTICS.items() if f"{game}_v" in env_id), None)


def _connects(board: np.ndarray, plane: int, column: int) -> bool:
    """Whether plane ``plane``'s piece dropped into ``column`` (falling to its lowest empty row) makes four in a
    row."""
    empty = np.flatnonzero(board[:, column].sum(-1) == 0)
    return empty.size > 0 and _four(board[..., plane], int(empty.max()), int(column))


def _four(pieces: np.ndarray, row: int, column: int) -> bool:
    grid = pieces.astype(bool).copy()
    grid[row, column] = True
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < grid.shape[0] and 0 <= c < grid.shape[1] and grid[r, c]:
                run, r, c = run + 1, r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


class OpponentPool:
    """Opponents drawn once a game (:class:`TurnBased` asks at each reset): the latest one (``latest``) with
    probability ``latest_ratio``, else one of ``others`` uniformly (past snapshots, scripted anchors); the latest
    alone while there are no others. Self-play's pool (:mod:`ppo_td.training.selfplay` fills it)."""

    def __init__(self, latest: Opponent, others: list[Opponent] | None = None, latest_ratio: float = 0.5) -> None:
        self.latest, self.others, self.latest_ratio = latest, list(others or []), float(latest_ratio)

    def pick(self, rng: np.random.Generator) -> Opponent:
        if not self.others or rng.random() < self.latest_ratio:
            return self.latest
        return self.others[int(rng.integers(len(self.others)))]


def check_fits(opponent: Any, observation_space: gym.Space, action_space: gym.Space) -> None:
    """Refuse an opponent made for another game (an opponent with a ``check(observation_space, action_space)``
    method says so: :class:`ConnectFourWinOrBlock`'s)."""
    check = getattr(opponent, "check", None)
    if callable(check):
        check(observation_space, action_space)


def make_opponent(spec: str, n: int | None = None) -> Opponent:
    """The opponent ``env.opponent`` (or an ``env.anchors`` entry) names: ``random``, ``connect-four-heuristic``
    (:class:`ConnectFourWinOrBlock`), or ``module:Name`` (a class or function called without arguments, returning
    an object with ``act(observation, seat, rng)``). ``n``: the game's action count (a random opponent's choices
    where the game gives no mask).

    Raises:
        ValueError: a name it does not know, or an object without ``act``.
    """
    if spec == "random":
        return RandomOpponent(n)
    if spec == "connect-four-heuristic":
        return ConnectFourWinOrBlock()
    if spec == "tictactoe-heuristic":
        return TicTacToeWinOrBlock()
    if spec == "tictactoe-perfect":
        return TicTacToePerfect()
    if ":" not in spec:
        raise ValueError(f"opponent {spec!r}: expected 'random', 'connect-four-heuristic', 'tictactoe-heuristic', "
                         "'tictactoe-perfect', 'self' (env.opponent) or 'module:Name' (a class with act(observation, "
                         "seat, rng))")
    from ppo_td.envs.imports import import_attr

    made = import_attr(spec, "env.opponent")()
    if not callable(getattr(made, "act", None)):
        raise ValueError(f"opponent {spec!r} made a {type(made).__name__}, which has no act(observation, seat, rng)")
    return made


def fixed_opponents(config: Any) -> Opponent | OpponentPool | None:
    """Who plays the other seats of a turn-based game as ``config`` (an :class:`~ppo_td.config.EnvConfig`) says:
    None for self-play (its pool comes later; a random player until then), ``env.opponent`` alone, or with
    ``env.anchors`` a pool drawn from each game: ``env.opponent`` with probability ``env.latest_ratio``, else an
    anchor uniformly."""
    if config.opponent == "self":
        return None
    opponent = make_opponent(config.opponent)
    if not config.anchors:
        return opponent
    return OpponentPool(opponent, [make_opponent(a) for a in config.anchors], latest_ratio=config.latest_ratio)


def opponents_named(config: Any) -> str | None:
    """What ``config`` (an :class:`~ppo_td.config.EnvConfig`) sets that only a turn-based game takes, said for a
    refusal (``env.opponent=... plays the other seats of a turn-based game``), or None where it leaves the
    defaults."""
    if config.opponent != "random":
        return f"env.opponent={config.opponent!r} plays the other seats of a turn-based game"
    if config.anchors:
        return f"env.anchors={config.anchors!r} plays the other seats of a turn-based game"
    if config.negative_reward_scale != 1.0:
        return f"env.negative_reward_scale={config.negative_reward_scale!r} weighs a turn-based game's losses"
    return None


GAME_DEFAULTS = "leave env.opponent at 'random', env.anchors empty and env.negative_reward_scale at 1"
"""The fix of a refusal of :func:`opponents_named`'s settings for an env that is no turn-based game."""


def legal_actions(observation: Any, n: int | None = None) -> np.ndarray:
    """The indices of the legal actions in an observation's ``action_mask`` (``range(n)`` without one)."""
    if isinstance(observation, dict) and MASK in observation:
        legal = np.flatnonzero(np.asarray(observation[MASK]))
        if legal.size == 0:
            raise ValueError("the game's action_mask allows no action at a turn that needs one")
        return legal
    if n is None:
        raise ValueError("the observation has no action_mask: give the number of actions")
    return np.arange(n)


class TurnBased(gym.Env):
    """A PettingZoo AEC game as the Gymnasium env of the learner's seat (see the module).

    Args:
        game: the AEC env (``pettingzoo.classic.connect_four_v3.env()``); this env closes it.
        opponent: who plays the other seats (:class:`RandomOpponent` when None; an :class:`OpponentPool`: one of
            its opponents, drawn each game); :meth:`set_opponent` changes it between games (Gymnasium's
            ``VectorEnv.call("set_opponent", ...)`` reaches every copy).
        seat: the learner's seat, or ``"random"`` (each game one of ``game.possible_agents``, from the env's
            generator).
        negative_reward_scale: the learner's negative rewards multiplied by it (a lost game weighed more: above 1,
            the learner is averse to losing), positive ones kept.

    Raises:
        ValueError: seats with different observation or action spaces (one policy plays every seat), an action
            space that is not ``Discrete``, a seat the game does not have, an opponent made for another game, or a
            ``negative_reward_scale`` that is not positive.
    """

    metadata = {"render_modes": ["ansi", "human", "rgb_array"]}

    def __init__(self, game: Any, opponent: Opponent | None = None, seat: str = "random",
                 negative_reward_scale: float = 1.0) -> None:
        if not negative_reward_scale > 0:
            raise ValueError(f"negative_reward_scale={negative_reward_scale!r}: it must be > 0 (1: the game's rewards)")
        self.game, self.negative_reward_scale = game, float(negative_reward_scale)
        seats = list(game.possible_agents)
        spaces = [(game.observation_space(s), game.action_space(s)) for s in seats]
        if any(space != spaces[0] for space in spaces[1:]):
            raise ValueError(f"the game's seats {seats} see or act in different spaces; ppo_td plays one policy in "
                             "every seat of a turn-based game")
        if not isinstance(spaces[0][1], gym.spaces.Discrete):
            raise ValueError(f"the game's actions are {spaces[0][1]}; ppo_td's turn-based games take Discrete ones")
        if seat != "random" and seat not in seats:
            raise ValueError(f"seat={seat!r} is not one of the game's seats {seats} (or 'random')")
        self.observation_space, self.action_space = spaces[0]
        self.seats, self.fixed_seat = seats, seat
        n = int(self.action_space.n)
        self.info_masks = _masks_in_infos(game, self.observation_space)
        """The game gives its legal moves in ``infos[seat]["action_mask"]`` (Shimmy's OpenSpiel games), not in the
        observation: each observation is then ``{"observation": ..., "action_mask": ...}``, as PettingZoo's own."""
        if self.info_masks:
            self.observation_space = gym.spaces.Dict({"observation": self.observation_space,
                                                      MASK: gym.spaces.Box(0, 1, (n,), np.int8)})
        if opponent is None:
            opponent = RandomOpponent(n)
        for one in _members(opponent):
            if isinstance(one, RandomOpponent) and one.n is None:
                one.n = n  # the game's action count, for a game without masks
            check_fits(one, self.observation_space, self.action_space)
        self.opponent: Opponent | OpponentPool = opponent
        self.playing: Opponent = RandomOpponent(n)
        """This game's opponent (drawn at reset from a pool)."""
        self.seat, self.over, self.gained = seats[0], True, 0.0
        self.render_mode = getattr(game, "render_mode", None)

    def set_opponent(self, opponent: Opponent | OpponentPool) -> None:
        """Who plays the other seats from the next game on (a pool: one of its opponents, drawn each game).

        Raises:
            ValueError: an opponent (or a pool's) made for another game.
        """
        for one in _members(opponent):
            check_fits(one, self.observation_space, self.action_space)
        self.opponent = opponent

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """A new game; ``options={"seat": name}`` seats the learner there for this game (else as ``seat`` says)."""
        super().reset(seed=seed)
        self.game.reset(seed=int(self.np_random.integers(2**31 - 1)))
        pick = getattr(self.opponent, "pick", None)
        self.playing = pick(self.np_random) if pick is not None else self.opponent
        in_play = list(self.game.agents)  # (a game may seat fewer than its possible agents)
        seat = (options or {}).get("seat", self.fixed_seat)
        self.seat = in_play[int(self.np_random.integers(len(in_play)))] if seat == "random" else seat
        if self.seat not in in_play:
            raise ValueError(f"seat {self.seat!r} is not in this game (its seats: {in_play})")
        self.gained = 0.0
        observation, _, terminated, truncated = self._to_learner()
        if terminated or truncated:
            raise RuntimeError(f"the game ended before seat {self.seat!r} moved: ppo_td's learner needs a turn")
        self.over = False
        return observation, {"seat": self.seat}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self.over:
            raise RuntimeError("step() called after the game ended: reset() first")
        self.game.step(int(action))
        self.gained = self._reward_of_move()
        observation, reward, terminated, truncated = self._to_learner()
        self.over = terminated or truncated
        if reward < 0:
            reward *= self.negative_reward_scale
        return observation, reward, terminated, truncated, {"seat": self.seat}

    def _to_learner(self) -> tuple[Any, float, bool, bool]:
        """Play the other seats (and the ended ones' closing steps) until the learner's turn; its observation,
        the reward since its last move, and whether its game ended."""
        game = self.game
        while game.agent_selection != self.seat:
            if self.seat not in game.agents:  # the learner left the game without a last turn of its own
                raise RuntimeError(f"seat {self.seat!r} left the game before its turn came back: ppo_td's turn-based "
                                   "games keep every seat to the end (PettingZoo's classic games do)")
            other = game.agent_selection
            if game.terminations[other] or game.truncations[other]:
                game.step(None)  # PettingZoo's step for a seat whose game is over
            else:
                game.step(self.playing.act(self._seen(game.observe(other), other), other, self.np_random))
                self.gained += self._reward_of_move()
        observation, reward, terminated, truncated, _ = game.last()
        if self.info_masks:  # Shimmy's games: the learner's rewards of the moves, read move by move
            reward = self.gained
        return self._seen(observation, self.seat), float(reward), bool(terminated), bool(truncated)

    def _reward_of_move(self) -> float:
        """The learner's reward of the move just played, where the game keeps its masks in its infos: Shimmy's
        OpenSpiel games (2.0), whose closing steps for a finished seat add the last move's reward to the learner's
        cumulative reward again (a won game read from ``last()`` would score 2); their ``rewards`` hold each move's
        own (OpenSpiel's ``State.rewards()``). PettingZoo's own games are read from ``last()``."""
        return float(self.game.rewards.get(self.seat, 0.0)) if self.info_masks else 0.0

    def _seen(self, observation: Any, seat: str) -> Any:
        """``seat``'s observation with its legal moves where the game keeps them in its infos."""
        if not self.info_masks:
            return observation
        return {"observation": observation, MASK: np.asarray(self.game.infos[seat][MASK], dtype=np.int8)}

    def render(self) -> Any:
        return self.game.render()

    def close(self) -> None:
        self.game.close()


def _members(opponent: Opponent | OpponentPool) -> list[Opponent]:
    """A pool's opponents, or the one opponent."""
    return [opponent.latest, *opponent.others] if isinstance(opponent, OpponentPool) else [opponent]


def _masks_in_infos(game: Any, observation_space: gym.Space) -> bool:
    """Whether ``game`` gives its legal moves in its infos rather than its observations (a reset to see; a game
    whose observation is a Dict with an ``action_mask`` reads it there)."""
    if isinstance(observation_space, gym.spaces.Dict) and MASK in observation_space.spaces:
        return False
    game.reset(seed=0)
    return all(MASK in (game.infos.get(seat) or {}) for seat in game.agents)


def is_turn_based(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo AEC env (False where PettingZoo is not installed)."""
    try:
        from pettingzoo import AECEnv
    except ImportError:
        return False
    return isinstance(env, AECEnv)


def turn_based(env: gym.Env, command: str, run: Any, env_id: str) -> TurnBased:
    """The :class:`TurnBased` game under ``env`` (a trained policy's ``make_env()``), or a one-line refusal naming
    ``command`` and the ``run`` that trained ``env_id``."""
    game = env.unwrapped
    if not isinstance(game, TurnBased):
        raise ValueError(f"{command} plays turn-based games (PettingZoo AEC envs); {run} trained {env_id}")
    return game
