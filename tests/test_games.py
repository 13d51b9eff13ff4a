"""Turn-based games (ppo_td.envs.games): a PettingZoo AEC game as the env of the learner's seat, the other seats
played by an opponent; the reward of the opponent's winning move reaches the learner's last step; seats drawn from
the env's generator; the board seen from the learner's side; trained from its id on the command line and from
Python alike, the finished game's all-masked board accepted."""

import csv
import dataclasses
import json
import warnings

import numpy as np
import pytest
import torch

import ppo_td
from ppo_td.cli import main
from ppo_td.envs.games import RandomOpponent, TurnBased, is_turn_based, legal_actions

pytest.importorskip("pettingzoo")
from pettingzoo.classic import connect_four_v3, tictactoe_v3  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", message="The old environment creation API", category=DeprecationWarning)

TICTACTOE = "pettingzoo.classic.tictactoe_v3:env"


class Scripted:
    """Plays the given squares in order (the legal ones only: a test's script is checked by the game)."""

    def __init__(self, moves):
        self.moves = list(moves)

    def act(self, observation, seat, rng):
        move = self.moves.pop(0)
        assert move in legal_actions(observation)
        return move


def test_the_opponents_winning_move_reaches_the_learners_last_step_as_the_loss():
    env = TurnBased(tictactoe_v3.env(), opponent=Scripted([0, 1, 2]), seat="player_2")
    obs, info = env.reset(seed=0)
    assert info["seat"] == "player_2"
    assert obs["observation"][..., 1].ravel().tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 0]  # the opponent's X, its side
    assert obs["action_mask"].tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 1]
    assert env.step(3)[1:4] == (0.0, False, False)  # the opponent answers with 1
    _, reward, terminated, truncated, _ = env.step(4)  # the opponent completes the top row
    assert (reward, terminated, truncated) == (-1.0, True, False)
    with pytest.raises(RuntimeError, match=r"reset\(\) first"):
        env.step(5)


def test_the_learners_winning_move_is_its_reward():
    env = TurnBased(tictactoe_v3.env(), opponent=Scripted([3, 4]), seat="player_1")
    env.reset(seed=0)
    assert env.step(0)[1] == 0.0 and env.step(1)[1] == 0.0
    assert env.step(2)[1:3] == (1.0, True)


def test_seats_are_drawn_from_the_envs_generator():
    def seats(seed):
        env = TurnBased(connect_four_v3.env())
        env.reset(seed=seed)
        return [env.reset()[1]["seat"] for _ in range(40)]

    first = seats(1)
    assert first == seats(1) and first != seats(2)
    assert {"player_0", "player_1"} == set(first)


def test_random_opponent_plays_legal_moves_and_games_are_seeded():
    def game(seed):
        env, rng, rewards = TurnBased(connect_four_v3.env()), np.random.default_rng(0), []
        obs, _ = env.reset(seed=seed)
        boards = [obs["observation"].copy()]
        done = False
        while not done:
            obs, reward, done, _, _ = env.step(int(rng.choice(legal_actions(obs))))
            boards.append(obs["observation"].copy())
            rewards.append(reward)
        return np.stack(boards), rewards

    a, b = game(3), game(3)
    assert np.array_equal(a[0], b[0]) and a[1] == b[1] and a[1][-1] in (-1.0, 0.0, 1.0)
    assert all(r == 0.0 for r in a[1][:-1])
    assert isinstance(TurnBased(connect_four_v3.env()).opponent, RandomOpponent)


def test_refusals():
    assert is_turn_based(connect_four_v3.env()) and not is_turn_based(object())
    with pytest.raises(ValueError, match=r"seat='player_9' is not one of the game's seats \['player_0', 'player_1'\]"):
        TurnBased(connect_four_v3.env(), seat="player_9")


def test_a_game_trains_from_its_id_on_the_command_line_and_in_python_alike(tmp_path):
    args = ["train", "--env.env-id", TICTACTOE, "--env.num-envs", "4", "--frames-per-batch", "256", "--total-frames",
            "512", "--eval-episodes", "10", "--run-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    base = ppo_td.get_preset("generic")  # what the command line starts from for an env without a preset
    config = dataclasses.replace(base, env=ppo_td.EnvConfig(TICTACTOE, num_envs=4), frames_per_batch=256,
                                 total_frames=512, eval_episodes=10)
    result = ppo_td.train(config, run_dir=str(tmp_path / "api"), progress=False)
    cli, api = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("cli", "api"))
    assert cli == api
    rows = [list(csv.DictReader((tmp_path / name / "metrics.csv").open())) for name in ("cli", "api")]
    assert [r["loss_policy"] for r in rows[0]] == [r["loss_policy"] for r in rows[1]]
    # every game ended with a win, a draw or a loss (the finished board's empty mask is no error)
    assert len(result.eval_returns) == 10 and set(result.eval_returns) <= {-1.0, 0.0, 1.0}


def test_only_an_ended_episodes_last_state_may_mask_every_action():
    from tensordict import TensorDict

    from ppo_td.envs.masking import MaskCheck

    check = MaskCheck("game", [3])
    empty = torch.tensor([[True, False, True], [False, False, False]])
    check.check(TensorDict({"action_mask": empty.clone(), "done": torch.tensor([[False], [True]])}, [2]), "at step 1")
    with pytest.raises(ValueError, match=r"every action is masked at step 2 \(env copy 1\)"):
        check.check(TensorDict({"action_mask": empty.clone(), "done": torch.tensor([[True], [False]])}, [2]),
                    "at step 2")
