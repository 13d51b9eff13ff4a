"""Tic-tac-toe played out exactly (ppo_td.envs.games.tictactoe_outcomes) and a lost game weighed more
(env.negative_reward_scale): the exact rates agree with games played in PettingZoo's env; the best policy against a
random player loses 1 game in 270 with the game's +1/-1 (ties to the lowest cell) and none once a loss weighs more
than 3 (an expectimax written here); the weighed loss reaches the learner, is recorded, trains from the command line
and Python alike, and is refused where no game is played or where the factory's game weighs it otherwise."""

import csv
import functools

import numpy as np
import pytest
import torch

import ppo_td
from conftest import game_runs_both_ways
from ppo_td.envs.games import TicTacToePerfect, TurnBased, legal_actions, tictactoe_outcomes

pytest.importorskip("pettingzoo")
from pettingzoo.classic import tictactoe_v3  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

TICTACTOE = "pettingzoo.classic.tictactoe_v3:env"
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def first_legal(observation):
    """A deterministic player: the lowest-numbered empty cell."""
    return int(legal_actions(observation)[0])


def cells_of(observation):
    board = np.asarray(observation["observation"])
    return tuple(int(board[i // 3, i % 3, 0]) - int(board[i // 3, i % 3, 1]) for i in range(9))


def expectimax(loss_weight):
    """The player maximizing its expected reward against a uniformly random player, a win 1, a draw 0, a loss
    -loss_weight (ties to the lowest cell): a second solver, sharing nothing with ppo_td's."""
    @functools.cache
    def value(cells, mover):  # cells from the player's side (1 its marks); mover 1: the player's turn
        for a, b, c in LINES:
            if cells[a] == cells[b] == cells[c] != 0:
                return 1.0 if cells[a] == 1 else -loss_weight
        empty = [i for i in range(9) if cells[i] == 0]
        if not empty:
            return 0.0
        after = [value(cells[:m] + (mover,) + cells[m + 1:], -mover) for m in empty]
        return max(after) if mover == 1 else sum(after) / len(after)

    def act(observation):
        cells = cells_of(observation)
        empty = [i for i in range(9) if cells[i] == 0]
        return max(empty, key=lambda m: (value(cells[:m] + (1,) + cells[m + 1:], -1), -m))
    return act


@pytest.mark.parametrize("opponent", ["random", "tictactoe-perfect"])
def test_the_exact_rates_are_those_of_games_played_in_pettingzoos_env(opponent):
    exact = tictactoe_outcomes(first_legal, opponent)
    assert exact.win + exact.draw + exact.loss == pytest.approx(1.0)
    assert exact.loss == pytest.approx(exact.first_seat_loss + exact.second_seat_loss)
    env = ppo_td.envs.gym_env(ppo_td.EnvConfig(TICTACTOE, opponent=opponent))
    results = []
    for game in range(2000):
        observation, _ = env.reset(seed=game)
        done = False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(first_legal(observation))
            done = terminated or truncated
        results.append(np.sign(reward))
    for rate, result in ((exact.win, 1), (exact.draw, 0), (exact.loss, -1)):
        played = results.count(result) / len(results)
        assert abs(played - rate) <= 4 * np.sqrt(max(rate * (1 - rate), 1e-4) / len(results)), (result, played, rate)
    assert exact.blunders and all(0 < reach <= 1 for _, reach in exact.blunders)
    with pytest.raises(ValueError, match="the exact outcomes walk 'random' or 'tictactoe-perfect'"):
        tictactoe_outcomes(first_legal, "tictactoe-heuristic")
    with pytest.raises(ValueError, match=r"the player chose move 4 on a board whose legal moves are"):
        tictactoe_outcomes(lambda observation: 4)


def test_the_best_player_against_random_loses_unless_a_loss_weighs_more():
    """The documented numbers: a best player for +1/-1 against a random player (ties to the lowest cell) loses 1 game
    in 270 (3.7 in 1,000, all on the second seat), between the 2.1 and 4.8 in 1,000 of the best players over every
    tie (exact fractions: 4/1,890 and 9/1,890, from a third solver written for the review, not here); with a loss
    weighed 2 it loses 2.1; once a loss weighs more than 3 none loses, nor to the perfect player; the perfect
    player's first best move never loses."""
    plain = tictactoe_outcomes(expectimax(1.0))
    assert plain.loss == pytest.approx(1 / 270, abs=1e-12) and plain.first_seat_loss == 0.0
    assert tictactoe_outcomes(expectimax(2.0)).loss == pytest.approx(4 / 1890, abs=1e-12)
    for weight in (3.01, 3.5, 10.0):
        averse = tictactoe_outcomes(expectimax(weight))
        assert averse.loss == 0.0 and not averse.blunders, weight
        assert tictactoe_outcomes(expectimax(weight), "tictactoe-perfect").loss == 0.0
    assert plain.win - plain.loss > averse.win - averse.loss  # the price of never losing, in the game's units
    best = tictactoe_outcomes(lambda observation: TicTacToePerfect.best_moves(observation)[0])
    assert best.loss == 0.0 and not best.blunders


class Scripted:
    def __init__(self, moves):
        self.moves = list(moves)

    def act(self, observation, seat, rng):
        return self.moves.pop(0)


def test_a_lost_game_reaches_the_learner_weighed_and_a_won_one_as_it_is():
    lost = TurnBased(tictactoe_v3.env(), opponent=Scripted([0, 1, 2]), seat="player_2", negative_reward_scale=5.0)
    lost.reset(seed=0)
    assert lost.step(3)[1] == 0.0 and lost.step(4)[1:3] == (-5.0, True)
    won = TurnBased(tictactoe_v3.env(), opponent=Scripted([3, 4]), seat="player_1", negative_reward_scale=5.0)
    won.reset(seed=0)
    assert won.step(0)[1] == 0.0 and won.step(1)[1] == 0.0 and won.step(2)[1] == 1.0
    with pytest.raises(ValueError, match=r"negative_reward_scale=0.0: it must be > 0"):
        TurnBased(tictactoe_v3.env(), negative_reward_scale=0.0)


def test_the_weight_is_recorded_trains_alike_from_both_entry_points_and_is_refused_off_games(tmp_path):
    cli, api = game_runs_both_ways(tmp_path, ["--env.negative-reward-scale", "5"],
                                   ppo_td.EnvConfig(TICTACTOE, negative_reward_scale=5.0))
    assert cli == api and cli["env"]["negative_reward_scale"] == 5.0
    rows = [list(csv.DictReader((tmp_path / name / "episodes.csv").open())) for name in ("cli", "api")]
    assert rows[0] == rows[1]
    assert {float(r["return"]) for r in rows[0]} <= {1.0, 0.0, -5.0} and any(float(r["return"]) == -5.0
                                                                           for r in rows[0])
    from ppo_td.envs import build_env

    with pytest.raises(ValueError, match=r"env.negative_reward_scale=5.0 weighs a turn-based game's losses; env "
                                         r"CartPole-v1 is not one .*env.negative_reward_scale at 1"):
        build_env(ppo_td.EnvConfig("CartPole-v1", negative_reward_scale=5.0), seed=1)
    with pytest.raises(ValueError, match=r"env.negative_reward_scale"):
        ppo_td.EnvConfig("navigation", suite="vmas", negative_reward_scale=2.0)
    with pytest.raises(ValueError, match=r"env.negative_reward_scale"):
        ppo_td.EnvConfig(TICTACTOE, negative_reward_scale=-1.0)
    with pytest.raises(ValueError, match=r"env.negative_reward_scale=5.0, but env test_games_exact:weighed_twice "
                                         r"returned a TurnBased game weighing losses by 2.0: set the weight in one"):
        build_env(ppo_td.EnvConfig("test_games_exact:weighed_twice", negative_reward_scale=5.0), seed=1)
    build_env(ppo_td.EnvConfig("test_games_exact:weighed_twice", negative_reward_scale=2.0), seed=1).close()


def weighed_twice():
    """A factory returning ppo_td's TurnBased game with its own weight."""
    return TurnBased(tictactoe_v3.env(), negative_reward_scale=2.0)
