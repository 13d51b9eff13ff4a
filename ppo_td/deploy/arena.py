"""``ppo-td arena``: trained policies of a two-seat turn-based game against each other and fixed anchors, rated.

Every pair of players plays ``games`` games (a round robin), each player in each seat alike often (the seats
alternate game by game). The games are played round by round, one game of every pair a round in an order shuffled
each round, so an interrupted arena has played every pair alike often. Each player is a run folder (its
``checkpoint.pt``), a checkpoint file (``RUN/checkpoints/iter_N.pt``: a run's policy at N iterations, kept with
``--keep-checkpoints``) or an anchor (``random``, ``connect-four-heuristic``, ``tictactoe-heuristic``,
``module:Name``: the opponents of :mod:`ppo_td.envs.games`). A policy samples its moves from its masked
probabilities, as it played in training (``sampled=False``: its mode; two modes meeting play the same game again
and again, once per seat).

Results: per pair the first player's wins, draws and losses with a Wilson 95% interval of its win rate, and a
rating per player from OpenSkill (``openskill``, its Plackett-Luce model of Weng & Lin 2011): a rating library
that is kept (6.x, 2026), MIT-licensed (TrueSkill's algorithm is patented, its Python package unreleased since
2019), that rates draws and teams alike, and gives each rating its uncertainty (``mu`` and ``sigma``; players are
ranked by ``mu - 3 sigma``, OpenSkill's ordinal). ``tau = 0``: a frozen policy's skill does not drift, so no
uncertainty is added between games. Weng-Lin's update rates one game at a time, so the order of the games moves the
result: over orders of the same 360 games (4 players) a player's mu varied with a standard deviation of about half
its sigma (measured); the arena rates the games in 32 shuffled orders (a fixed seed) and gives each player the mean
mu and sigma over them, which leaves about a tenth of a sigma (tests/test_arena.py checks two such means agree).
A run's checkpoints give its rating curve (``ArenaResult.curves``, ``plot``): the rating of its policy at each
checkpoint's frames.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppo_td.deploy.play import PolicyPlayer
from ppo_td.deploy.team_arena import TEAM_ONLY, TeamArenaResult, is_team_run, team_arena
from ppo_td.envs.games import TurnBased, check_fits, heuristic_for, make_opponent, turn_based

MU, SIGMA = 25.0, 25.0 / 3.0
"""OpenSkill's prior: every player starts at mu 25, sigma 25/3."""
ORDERS = 32
"""The orders of the games a rating is the mean over (see the module)."""


@dataclasses.dataclass(frozen=True)
class Player:
    """One player of an arena: ``name`` as the tables show it; ``source`` the path or anchor spec it came from;
    ``frames`` and ``run_id`` of a checkpoint (None for an anchor)."""

    name: str
    source: str
    frames: int | None = None
    run_id: str | None = None

    @property
    def anchor(self) -> bool:
        return self.run_id is None


@dataclasses.dataclass(frozen=True)
class Game:
    """One game: players ``a`` and ``b`` (indices into the arena's players), ``a``'s seat, and ``a``'s result
    (1 won, 0 draw, -1 lost)."""

    a: int
    b: int
    seat: str
    result: int


@dataclasses.dataclass(frozen=True)
class Pair:
    """A pair's games from ``a``'s side."""

    a: str
    b: str
    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def interval(self) -> tuple[float, float]:
        """The Wilson 95% interval of ``a``'s win rate."""
        return wilson(self.wins, self.games)


@dataclasses.dataclass(frozen=True)
class Rating:
    """A player's OpenSkill rating: ``mu`` +- ``sigma``; ``ordinal`` = mu - 3 sigma (the rank's order)."""

    player: Player
    mu: float
    sigma: float

    @property
    def ordinal(self) -> float:
        return self.mu - 3 * self.sigma


def wilson(wins: int, n: int) -> tuple[float, float]:
    """The Wilson 95% interval of a rate of ``wins`` in ``n`` (nan, nan for none)."""
    if n == 0:
        return math.nan, math.nan
    z, p = 1.959964, wins / n
    middle, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (middle - half) / (1 + z * z / n)), min(1.0, (middle + half) / (1 + z * z / n))


@dataclasses.dataclass
class ArenaResult:
    """What an arena played: its ``players`` and ``games`` (in the order played); ``planned`` games in all."""

    players: list[Player]
    games: list[Game]
    planned: int
    env_id: str = ""
    sampled: bool = True
    _rated: Any = dataclasses.field(default=None, repr=False, compare=False)

    def pairs(self) -> list[Pair]:
        """Every pair's results, in the players' order (a before b)."""
        counts = {}
        for game in self.games:
            a, b, result = (game.a, game.b, game.result) if game.a < game.b else (game.b, game.a, -game.result)
            counts.setdefault((a, b), [0, 0, 0])[1 - result] += 1
        return [Pair(self.players[a].name, self.players[b].name, *counts[a, b]) for a, b in sorted(counts)]

    def ratings(self, orders: int = ORDERS, seed: int = 0) -> list[Rating]:
        """Every player's rating, best ordinal first: the games rated one by one (OpenSkill's online update) in
        ``orders`` shuffled orders (drawn from ``seed``), each player's mu and sigma the mean over them."""
        key = (len(self.games), orders, seed)
        if self._rated is None or self._rated[0] != key:
            rng = np.random.default_rng(seed)
            rated = np.mean([self.rated_in(rng.permutation(len(self.games))) for _ in range(orders)], axis=0)
            ratings = [Rating(p, float(mu), float(sigma)) for p, (mu, sigma) in zip(self.players, rated, strict=True)]
            self._rated = key, sorted(ratings, key=lambda r: -r.ordinal)
        return self._rated[1]

    def rated_in(self, order: Sequence[int]) -> np.ndarray:
        """Each player's ``[mu, sigma]`` after the games rated one by one in ``order`` (indices into ``games``)."""
        from openskill.models import PlackettLuce

        model = PlackettLuce(mu=MU, sigma=SIGMA, tau=0.0)
        ratings = [model.rating(name=p.name) for p in self.players]
        for index in order:
            game = self.games[index]
            ranks = [1, 1] if game.result == 0 else [1, 2] if game.result > 0 else [2, 1]
            [[ratings[game.a]], [ratings[game.b]]] = model.rate([[ratings[game.a]], [ratings[game.b]]], ranks=ranks)
        return np.array([[r.mu, r.sigma] for r in ratings])

    def curves(self) -> dict[str, list[Rating]]:
        """Each run's ratings by frames (its checkpoints that played), keyed by the run's first player's name."""
        runs: dict[str, list[Rating]] = {}
        for rating in self.ratings():
            if rating.player.run_id is not None and rating.player.frames is not None:
                runs.setdefault(rating.player.run_id, []).append(rating)
        return {curve[0].player.name.split("@")[0]: sorted(curve, key=lambda r: r.player.frames or 0)
                for curve in runs.values()}

    def table(self) -> str:
        """The pairs' results and the ratings as text."""
        mode = "sampled from each policy" if self.sampled else "each policy's mode"
        lines = [f"{self.env_id}: {len(self.games)} of {self.planned} games played ({mode})", "",
                 "pair                                              W / D / L   win rate [95% Wilson]"]
        for pair in self.pairs():
            low, high = pair.interval
            lines.append(f"{(pair.a + ' vs ' + pair.b)[:48]:48}  {pair.wins:>4}/{pair.draws}/{pair.losses:<4}  "
                         f"{pair.wins / pair.games:.3f} [{low:.3f}, {high:.3f}]")
        lines += ["", "rank  player                                  frames        mu   sigma  ordinal (mu - 3 sigma)"]
        for rank, rating in enumerate(self.ratings(), 1):
            frames = "" if rating.player.frames is None else f"{rating.player.frames:,}"
            lines.append(f"{rank:>4}  {rating.player.name[:38]:38}  {frames:>10}  {rating.mu:6.2f}  "
                         f"{rating.sigma:5.2f}  {rating.ordinal:7.2f}")
        lines.append(f"ratings: OpenSkill Plackett-Luce (prior mu 25, sigma 8.33, tau 0), the mean over {ORDERS} "
                     "orders of the games")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values: players, games, pairs, ratings."""
        return {"env_id": self.env_id, "sampled": self.sampled, "planned": self.planned,
                "players": [dataclasses.asdict(p) for p in self.players],
                "games": [dataclasses.asdict(g) for g in self.games],
                "pairs": [{**dataclasses.asdict(p), "interval": list(p.interval)} for p in self.pairs()],
                "ratings": [{"player": r.player.name, "mu": r.mu, "sigma": r.sigma, "ordinal": r.ordinal,
                             "frames": r.player.frames} for r in self.ratings()]}

    def plot(self, path: str | os.PathLike) -> Path:
        """The rating curves (each run's mu +- sigma against frames) with the anchors' ratings as lines, as an
        image (matplotlib)."""
        bands = {name: ([r.player.frames for r in curve], [r.mu for r in curve], [r.mu - r.sigma for r in curve],
                        [r.mu + r.sigma for r in curve]) for name, curve in self.curves().items()}
        anchors = {r.player.name: r.mu for r in self.ratings() if r.player.anchor}
        return draw_curves(bands, anchors, path, f"{self.env_id}: ratings over training",
                           "OpenSkill rating (mu +- sigma)")


def draw_curves(bands: dict[str, tuple[list, list, list, list]], anchors: dict[str, float], path: str | os.PathLike,
                title: str, ylabel: str) -> Path:
    """Ratings against frames as an image: each label's ``(frames, middle, low, high)`` a line with its band shaded,
    each anchor's rating a dashed line named at the left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (x, middle, low, high) in bands.items():
        ax.plot(x, middle, marker="o", label=label)
        ax.fill_between(x, low, high, alpha=0.2)
    for name, mu in anchors.items():
        ax.axhline(mu, linestyle="--", color="gray", linewidth=1)
        ax.annotate(name, (0, mu), xycoords=("axes fraction", "data"), xytext=(2, 2), textcoords="offset points",
                    fontsize=8, color="gray")
    ax.set_xlabel("frames")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


class ArenaInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during an arena: ``result`` holds the games played before it."""

    def __init__(self, result: ArenaResult, signum: int = 2) -> None:
        super().__init__(f"stopped after {len(result.games)} of {result.planned} games")
        self.result, self.signum = result, signum
        """The signal that stopped it (SIGINT's 2, SIGTERM's 15)."""


def _load(source: str, sampled: bool, which: str) -> tuple[Player, Any, Any]:
    """A run folder's or checkpoint's player, its mover and its config."""
    from ppo_td.deploy.policy import load_policy
    from ppo_td.persist import checkpoint_config, checkpoint_in, load_checkpoint

    path = checkpoint_in(source, which)
    state = load_checkpoint(path)
    env = checkpoint_config(state).env
    if env.multiagent:
        raise ValueError(f"{source} trained {env.env_id} (env.suite={env.suite!r}, agents acting at once), the "
                         "arena's first player a turn-based game: give runs of one game (a team game's runs are "
                         "played against each other when they come first)")
    policy = load_policy(path, deterministic=not sampled)
    if policy.recurrent:
        raise ValueError(f"{source}: a recurrent policy; the arena plays feed-forward ones (a game's opponent "
                         "moves would not reach its memory)")
    if policy.config.env.wrappers:
        raise ValueError(f"{source} trained with env.wrappers {list(policy.config.env.wrappers)}: the arena gives "
                         "each player the game's own observations, which the wrappers would change for one seat only")
    folder = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    frames = int(state.get("frames", 0))
    name = f"{folder.name}@{frames}" if path.parent.name == "checkpoints" else (
        folder.name if path.name == "checkpoint.pt" else f"{folder.name}/{path.stem}")
    player = Player(name, str(source), frames, str(state.get("run_id") or folder.resolve()))
    return player, PolicyPlayer(policy), policy


def _same_game(first: Any, other: Any, source: str) -> None:
    a, b = first.config.env, other.config.env
    if (a.env_id, dict(a.kwargs or {})) != (b.env_id, dict(b.kwargs or {})):
        raise ValueError(f"{source} plays {b.env_id} {dict(b.kwargs or {})}, the arena's first player "
                         f"{a.env_id} {dict(a.kwargs or {})}: every player must play the same game")


def default_anchors(env_id: str) -> list[str]:
    """The anchors an arena adds unless told: a random player, and the game's win-or-block heuristic where it has
    one (connect four's, tic-tac-toe's)."""
    heuristic = heuristic_for(env_id)
    return ["random"] if heuristic is None else ["random", heuristic]


def arena(players: Sequence[str | os.PathLike], *, games: int = 100, anchors: Sequence[str] | None = None,
          sampled: bool = True, seed: int = 0, which: str = "last",
          on_round: Callable[[int, int], None] | None = None, episodes: int = 20) -> ArenaResult | TeamArenaResult:
    """A round robin of ``players`` (run folders or checkpoint files of one two-seat turn-based game) and
    ``anchors`` (default :func:`default_anchors`; ``[]`` for none): ``games`` games for every pair (see the module).
    ``seed`` fixes every game (the seats' order, the anchors' and the policies' random moves); ``which`` a run
    folder's ``last`` or ``best`` checkpoint; ``on_round(done, rounds)`` after each round. Runs of a team game
    (several agent groups) are played by :func:`~ppo_td.deploy.team_arena.team_arena` instead (``episodes`` a match;
    ``games`` and ``anchors`` unused, ``on_round`` called after each match), as ``ppo-td arena`` plays them.

    Raises:
        ValueError: fewer than two players (a team game's runs: one may play alone), one given twice, players of
            different games, a game that is not a two-seat turn-based one, an anchor made for another game, a
            recurrent policy, ``games`` < 1.
        ArenaInterrupted: Ctrl-C; its ``result`` holds the games played.
    """
    import torch

    from ppo_td.persist import checkpoint_in

    first = players if isinstance(players, (str, os.PathLike)) else (list(players) or [None])[0]
    if first is not None and checkpoint_in(first, which).is_file() and is_team_run(first, which):
        if anchors:
            raise ValueError(f"{first} {TEAM_ONLY}")
        return team_arena(players, episodes=episodes, sampled=sampled, seed=seed, which=which, on_match=on_round)
    try:  # before any game is played: the ratings need it
        import openskill  # noqa: F401
    except ImportError as err:
        raise ImportError("the arena's ratings need OpenSkill: pip install 'ppo_td[games]' (or openskill)") from err
    with torch.random.fork_rng(devices=[]):  # loading the policies and sampling their moves: the caller's random
        torch.manual_seed(seed)              # state stays as it was
        one = isinstance(players, (str, os.PathLike))  # one run given alone, not its path's characters
        return _round_robin([str(players)] if one else [str(p) for p in players], games, anchors, sampled, seed,
                            which, on_round)


def _round_robin(sources: list[str], games: int, anchors: Sequence[str] | None, sampled: bool, seed: int,
                 which: str, on_round: Callable[[int, int], None] | None) -> ArenaResult:
    from ppo_td.persist import checkpoint_in

    if games < 1:
        raise ValueError(f"games={games}: give the games every pair plays (>= 1)")
    if not sources:
        raise ValueError("the arena needs at least one run folder or checkpoint (its game is the arena's)")
    files: dict[tuple[int, int], str] = {}
    for source in sources:  # a run folder's checkpoint.pt is a link to its newest checkpoints/iter_N.pt
        file = checkpoint_in(source, which)
        if not file.is_file():
            continue  # said by load_checkpoint, below
        stat = file.stat()
        if (stat.st_dev, stat.st_ino) in files:
            raise ValueError(f"{files[stat.st_dev, stat.st_ino]} and {source} are the same checkpoint: give each "
                             "player once")
        files[stat.st_dev, stat.st_ino] = source
    loaded = [_load(source, sampled, which) for source in sources]
    first = loaded[0][2]
    env = first.make_env()
    try:
        game = turn_based(env, "the arena", sources[0], first.config.env.env_id)
        if len(game.seats) != 2:
            raise ValueError(f"the arena plays two-seat games; {first.config.env.env_id} has seats {game.seats}")
        for (_, _, policy), source in zip(loaded[1:], sources[1:], strict=True):
            _same_game(first, policy, source)
        n = int(game.action_space.n)
        names = default_anchors(first.config.env.env_id) if anchors is None else list(anchors)
        movers = [mover for _, mover, _ in loaded]
        roster = [player for player, _, _ in loaded]
        for name in names:
            if name in [p.name for p in roster]:
                raise ValueError(f"anchor {name!r} given twice (or named as a player): give each player once")
            mover = make_opponent(name, n)
            check_fits(mover, game.observation_space, game.action_space)
            movers.append(mover)
            roster.append(Player(name, name))
        if len(roster) < 2:
            raise ValueError("the arena needs two players or more: give another run or checkpoint, or an anchor")
        if len({p.name for p in roster}) < len(roster):
            roster = [dataclasses.replace(p, name=p.source) if not p.anchor else p for p in roster]
        pairs = [(a, b) for a in range(len(roster)) for b in range(a + 1, len(roster))]
        result = ArenaResult(roster, [], planned=games * len(pairs), env_id=first.config.env.env_id,
                             sampled=sampled)
        rng = np.random.default_rng(seed)
        try:
            for round_ in range(games):
                for k in rng.permutation(len(pairs)):
                    a, b = pairs[k]
                    seat = game.seats[round_ % 2]
                    result.games.append(_play(env, game, movers[a], movers[b], seat, a, b,
                                              int(rng.integers(2**31 - 1))))
                if on_round is not None:
                    on_round(round_ + 1, games)
        except KeyboardInterrupt as err:
            raise ArenaInterrupted(result, getattr(err, "signum", 2)) from err
        return result
    finally:
        env.close()


def _play(env: Any, game: TurnBased, mover: Any, other: Any, seat: str, a: int, b: int, seed: int) -> Game:
    """One game: ``mover`` in ``seat`` (the env's learner), ``other`` in the other."""
    game.set_opponent(other)
    observation, _ = env.reset(seed=seed, options={"seat": seat})
    while True:
        observation, reward, terminated, truncated, _ = env.step(mover.act(observation, seat, game.np_random))
        if terminated or truncated:
            return Game(a, b, seat, int(np.sign(reward)))


def write_json(result: ArenaResult | TeamArenaResult, path: str | os.PathLike) -> Path:
    """``result.to_dict()`` as a JSON file (replaced atomically: a file there stays whole if this fails)."""
    from ppo_td.persist.runfolder import write_atomically

    path = Path(path)
    write_atomically(path, json.dumps(result.to_dict(), indent=1) + "\n")
    return path
