"""Turn-based games (ppo_td.envs.games): a PettingZoo AEC game as the env of the learner's seat, the other seats
played by an opponent; the reward of the opponent's winning move reaches the learner's last step; seats drawn from
the env's generator; the board seen from the learner's side; trained from its id on the command line and from
Python alike, the finished game's all-masked board accepted."""

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

import ppo_td
from conftest import game_runs_both_ways
from ppo_td.cli import main
from ppo_td.envs.games import RandomOpponent, TurnBased, is_turn_based, legal_actions, make_opponent

pytest.importorskip("pettingzoo")
from pettingzoo.classic import connect_four_v3, tictactoe_v3  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

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


class Checked(RandomOpponent):
    """A random opponent that records whether each of its moves was legal."""

    legal: list = []

    def act(self, observation, seat, rng):
        move = super().act(observation, seat, rng)
        Checked.legal.append(bool(observation["action_mask"][move]))
        return move


def test_random_opponent_plays_legal_moves_and_games_are_seeded():
    Checked.legal.clear()

    def game(seed):
        env, rng, rewards = TurnBased(connect_four_v3.env(), opponent=Checked()), np.random.default_rng(0), []
        obs, _ = env.reset(seed=seed)
        boards = [obs["observation"].copy()]
        done = False
        while not done:
            obs, reward, done, _, _ = env.step(int(rng.choice(legal_actions(obs))))
            boards.append(obs["observation"].copy())
            rewards.append(reward)
        return np.stack(boards), rewards

    a, b, c = game(3), game(3), game(4)
    assert np.array_equal(a[0], b[0]) and a[1] == b[1] and a[1][-1] in (-1.0, 0.0, 1.0)
    assert not (a[0].shape == c[0].shape and np.array_equal(a[0], c[0]))  # another seed, another game
    assert all(r == 0.0 for r in a[1][:-1])
    assert len(Checked.legal) > 10 and all(Checked.legal)
    assert isinstance(TurnBased(connect_four_v3.env()).opponent, RandomOpponent)


def test_a_game_without_masks_gets_a_random_opponent_of_its_actions():
    from pettingzoo.classic import rps_v2

    env = TurnBased(rps_v2.env(max_cycles=3), seat="player_1")
    env.reset(seed=0)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, _ = env.step(0)  # rock, against random moves of the game's 3
        rewards.append(reward)
        done = terminated or truncated
    assert len(rewards) == 3 and set(rewards) <= {-1.0, 0.0, 1.0}


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


# --- self-play (env.opponent='self', ppo_td.training.selfplay) and the fixed opponents

CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"


def selfplay_config(**env):
    base = ppo_td.get_preset("generic")
    settings = {"env_id": CONNECT_FOUR, "num_envs": 4, "opponent": "self", "snapshot_frames": 1024, "pool_size": 3,
                **env}
    return dataclasses.replace(base, env=ppo_td.EnvConfig(**settings), frames_per_batch=512,
                               total_frames=4096, eval_episodes=4,
                               optim=dataclasses.replace(base.optim, num_minibatches=4, update_epochs=2))


def test_the_pool_draws_the_latest_at_its_ratio_and_the_others_alike():
    from ppo_td.envs.games import OpponentPool

    latest, a, b = RandomOpponent(), RandomOpponent(), RandomOpponent()
    rng = np.random.default_rng(0)
    draws = [OpponentPool(latest, [a, b], latest_ratio=0.5).pick(rng) for _ in range(6000)]
    shares = [sum(d is o for d in draws) / len(draws) for o in (latest, a, b)]
    assert abs(shares[0] - 0.5) < 0.03 and abs(shares[1] - 0.25) < 0.03 and abs(shares[2] - 0.25) < 0.03
    assert all(OpponentPool(latest, [a], latest_ratio=1.0).pick(rng) is latest for _ in range(100))
    assert all(OpponentPool(latest, [], latest_ratio=0.0).pick(rng) is latest for _ in range(100))


def test_a_policy_opponent_plays_legal_moves_at_its_policys_odds():
    from ppo_td.training import build_pipeline

    p = build_pipeline(selfplay_config())
    try:
        game = connect_four_v3.env()
        game.reset(seed=0)
        for column in (3, 3, 3, 3, 3, 3):  # column 3 full: illegal
            game.step(column)
        observation, rng = game.observe(game.agent_selection), np.random.default_rng(0)
        opponent = p.selfplay.latest
        from tensordict import TensorDict

        td = TensorDict({k: torch.as_tensor(observation[k]).to(opponent.spec[k].dtype).unsqueeze(0)
                         for k in opponent.keys}, [1])
        with torch.no_grad():
            probs = p.actor.get_dist(td).probs.reshape(-1).numpy()
        moves = np.bincount([opponent.act(observation, "player_0", rng) for _ in range(4000)], minlength=7) / 4000
        assert moves[3] == 0.0 and probs[3] == 0.0
        assert np.abs(moves - probs).max() < 0.03  # sampled at the policy's own odds
    finally:
        p.env.close()


def test_self_play_snapshots_at_its_frames_keeps_its_window_and_plays_the_learners_weights():
    result = ppo_td.train(selfplay_config(anchors=("random",)), progress=False)
    selfplay = result.pipeline.selfplay
    # snapshots at 0, 1,024, 2,048, 3,072, 4,096 frames; the newest 3 kept; the next at 5,120
    assert len(selfplay.snapshots) == 3 and selfplay.next_at == 5120
    assert len(selfplay.pool.others) == 4 and isinstance(selfplay.pool.others[-1], RandomOpponent)
    learner = result.actor.state_dict()
    assert all(torch.equal(v, selfplay.latest.actor.state_dict()[k]) for k, v in learner.items())
    newest = selfplay.snapshots[-1].actor.state_dict()  # taken after the last update: the learner's weights
    assert all(torch.equal(v, newest[k]) for k, v in learner.items())
    oldest = selfplay.snapshots[0].actor.state_dict()
    assert not all(torch.equal(v, oldest[k]) for k, v in learner.items())
    seen = result.pipeline.built.vector.get_attr("opponent")  # every copy plays from the pool
    assert all(o is selfplay.pool for o in seen)


def test_a_self_play_run_resumes_with_its_pool(tmp_path):
    from conftest import ctrl_c_after
    from ppo_td.persist import load_checkpoint, resume_pipeline

    with pytest.raises(KeyboardInterrupt, match="continue with ppo_td.resume"):
        ppo_td.train(selfplay_config(), run_dir=str(tmp_path), progress=False, callbacks=[ctrl_c_after(3)])
    saved = load_checkpoint(tmp_path)["selfplay"]
    assert len(saved["snapshots"]) == 2 and saved["next_at"] == 2048  # at 0 and 1,024 of 1,536 frames
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    try:
        pool = resumed.pipeline.selfplay
        assert pool.next_at == 2048 and len(pool.snapshots) == 2
        for snapshot, weights in zip(pool.snapshots, saved["snapshots"], strict=True):
            assert all(torch.equal(v, weights[k]) for k, v in snapshot.actor.state_dict().items())
    finally:
        resumed.pipeline.env.close()
    result = ppo_td.resume(str(tmp_path), progress=False)
    assert [m["iteration"] for m in result.history] == [4, 5, 6, 7, 8]
    assert len(load_checkpoint(tmp_path)["selfplay"]["snapshots"]) == 3


def test_the_connect_four_heuristic_wins_else_blocks():
    from ppo_td.envs.games import ConnectFourWinOrBlock

    board = np.zeros((6, 7, 2), dtype=np.int8)
    board[5, 0:3, 1] = 1  # the other player has three on the bottom row: column 3 blocks
    board[5, 4:6, 0] = 1
    mask = np.ones(7, dtype=np.int8)
    rng = np.random.default_rng(0)
    assert ConnectFourWinOrBlock().act({"observation": board, "action_mask": mask}, "player_0", rng) == 3
    board[4:5, 6, 0] = 1  # and the mover has three in column 6 (rows 2-4 after this): a win there comes first
    board[3, 6, 0] = board[2, 6, 0] = 1
    board[5, 6, 1] = 1
    assert ConnectFourWinOrBlock().act({"observation": board, "action_mask": mask}, "player_0", rng) == 6


def test_the_tictactoe_heuristic_wins_else_blocks_else_plays_at_random():
    from ppo_td.envs.games import TicTacToeWinOrBlock

    rng = np.random.default_rng(0)
    mover = TicTacToeWinOrBlock()
    # scripted games against PettingZoo's board: the heuristic's cell is the one the game marks there
    game = tictactoe_v3.env()
    game.reset(seed=0)
    for cell in (0, 3, 1):  # X takes 0 and 1 (a row needing 2), O takes 3: O to move must block at 2
        game.step(cell)
    blocked = mover.act(game.observe(game.agent_selection), game.agent_selection, rng)
    assert blocked == 2
    game.step(4)  # O plays 4 instead (3 and 4 on the middle row); X to move wins at 2 before blocking 5
    assert mover.act(game.observe(game.agent_selection), game.agent_selection, rng) == 2
    game.step(2)
    assert game.terminations[game.agent_selection] and game.rewards == {"player_1": 1, "player_2": -1}
    # no line to finish or stop: a random legal move
    fresh = tictactoe_v3.env()
    fresh.reset(seed=0)
    moves = {mover.act(fresh.observe("player_1"), "player_1", np.random.default_rng(s)) for s in range(30)}
    assert len(moves) > 3 and moves <= set(range(9))
    with pytest.raises(ValueError, match=r"the tictactoe-heuristic opponent reads tic-tac-toe's board"):
        TurnBased(connect_four_v3.env(), opponent=mover)
    # a config names it, a turn-based game plays it
    env = TurnBased(tictactoe_v3.env(), opponent=make_opponent(ppo_td.EnvConfig(TICTACTOE,
                                                                               opponent="tictactoe-heuristic").opponent))
    assert isinstance(env.opponent, TicTacToeWinOrBlock)


def test_the_tictactoe_perfect_player_never_loses_and_two_of_them_draw():
    """The game-tree player against PettingZoo's tic-tac-toe: no loss in 300 games against a random player (either
    seat), every game drawn against itself; it takes a win at once and sees a fork coming (a position the one-move
    heuristic cannot read)."""
    from ppo_td.envs import gym_env
    from ppo_td.envs.games import TicTacToePerfect

    perfect = TicTacToePerfect()
    rng = np.random.default_rng(0)
    for opponent, expected in (("random", {-1.0: 0}), ("tictactoe-perfect", {-1.0: 0, 1.0: 0})):
        env = gym_env(ppo_td.EnvConfig(TICTACTOE, opponent=opponent))
        outcomes = []
        for game in range(300 if opponent == "random" else 60):
            observation, _ = env.reset(seed=game)
            done = False
            while not done:
                observation, reward, terminated, truncated, _ = env.step(perfect.act(observation, "", rng))
                done = terminated or truncated
            outcomes.append(reward)
        for result, count in expected.items():
            assert outcomes.count(result) == count, (opponent, result)
        if opponent == "random":
            assert outcomes.count(1.0) > 250  # it wins most games against a random player
    game = tictactoe_v3.env()
    game.reset(seed=0)
    for cell in (0, 4, 8):  # X at two opposite corners, O in the centre: O must take an edge, not a corner
        game.step(cell)
    moves = {perfect.act(game.observe(game.agent_selection), "", np.random.default_rng(s)) for s in range(20)}
    assert moves == {1, 3, 5, 7}
    with pytest.raises(ValueError, match=r"the tictactoe-perfect opponent reads tic-tac-toe's board"):
        TurnBased(connect_four_v3.env(), opponent=make_opponent("tictactoe-perfect"))


@pytest.mark.parametrize("change, message", [
    (lambda c: dataclasses.replace(c, env=dataclasses.replace(c.env, env_id="CartPole-v1", opponent="random")), None),
    (lambda c: dataclasses.replace(c, env=dataclasses.replace(c.env, env_id="CartPole-v1",
                                                              opponent="connect-four-heuristic")),
     r"env.opponent='connect-four-heuristic' plays the other seats of a turn-based game; env CartPole-v1 is not one"),
    (lambda c: dataclasses.replace(c, collector=dataclasses.replace(c.collector, backend="process", num_workers=2)),
     r"env.opponent='self' \(self-play\): collector.backend='process' steps copies in other processes"),
    (lambda c: dataclasses.replace(c, model=dataclasses.replace(c.model, recurrent="lstm"),
                                   optim=dataclasses.replace(c.optim, sequence_length=8)),
     r"env.opponent='self' \(self-play\): a recurrent or gSDE policy"),
])
def test_opponents_are_refused_where_they_cannot_play(change, message):
    from ppo_td.training import build_pipeline

    config = change(selfplay_config())
    if message is None:  # the plain default on an env that is no game: nothing to refuse
        build_pipeline(config).env.close()
        return
    with pytest.raises(ValueError, match=message):
        build_pipeline(config)


def test_a_fixed_opponent_with_anchors_draws_each_games_opponent_at_its_ratio(tmp_path):
    """env.opponent random with env.anchors tictactoe-heuristic: each game one of the two (latest_ratio's share the
    opponent's), drawn from the copy's generator; the command line and Python train the same run; a game's moves
    are the drawn opponent's (the heuristic takes a win the random player would miss only by chance)."""
    from ppo_td.envs import gym_env
    from ppo_td.envs.games import OpponentPool, TicTacToeWinOrBlock

    for ratio in (0.5, 0.8):
        env = gym_env(ppo_td.EnvConfig(TICTACTOE, anchors=("tictactoe-heuristic",), latest_ratio=ratio))
        assert isinstance(env.opponent, OpponentPool) and isinstance(env.opponent.latest, RandomOpponent)
        drawn = []
        for game in range(1000):  # one seed, the copy's generator going on
            env.reset(seed=0 if game == 0 else None)
            drawn.append(isinstance(env.playing, TicTacToeWinOrBlock))
        assert abs(np.mean(drawn) - (1 - ratio)) < 4 * np.sqrt(ratio * (1 - ratio) / 1000), (ratio, np.mean(drawn))
    cli, api = game_runs_both_ways(tmp_path, ["--env.anchors", "tictactoe-heuristic"],
                                   ppo_td.EnvConfig(TICTACTOE, anchors=("tictactoe-heuristic",)))
    assert cli == api and cli["env"]["anchors"] == ["tictactoe-heuristic"]
    rows = [list(csv.DictReader((tmp_path / name / "metrics.csv").open())) for name in ("cli", "api")]
    assert [r["loss_policy"] for r in rows[0]] == [r["loss_policy"] for r in rows[1]]


def test_anchors_are_refused_where_no_game_is_played():
    from ppo_td.envs import build_env

    with pytest.raises(ValueError, match=r"env.anchors=\('random',\) plays the other seats of a turn-based game; "
                                         r"env CartPole-v1 is not one"):
        build_env(ppo_td.EnvConfig("CartPole-v1", anchors=("random",)), seed=1)
    with pytest.raises(ValueError, match=r"env.anchors=\('random',\) plays the other seats of a turn-based game; "
                                         r"torchrl.envs.custom.pendulum:PendulumEnv is a TorchRL env"):
        build_env(ppo_td.EnvConfig("torchrl.envs.custom.pendulum:PendulumEnv", anchors=("random",)), seed=1)
    with pytest.raises(ValueError, match=r"env.anchors"):
        ppo_td.EnvConfig("navigation", suite="vmas", anchors=("random",))
    with pytest.raises(ValueError, match=r"the tictactoe-heuristic opponent reads tic-tac-toe's board"):
        build_env(ppo_td.EnvConfig(CONNECT_FOUR, anchors=("tictactoe-heuristic",)), seed=1)


def test_self_play_from_the_command_line(tmp_path):
    args = ["train", "--env.env-id", CONNECT_FOUR, "--env.num-envs", "4", "--env.opponent", "self",
            "--env.snapshot-frames", "1024", "--env.anchors", "random", "connect-four-heuristic", "--frames-per-batch",
            "512", "--total-frames", "1024", "--eval-episodes", "4", "--run-dir", str(tmp_path)]
    assert main(args) == 0
    config = json.loads((tmp_path / "config.json").read_text())["env"]
    assert config["opponent"] == "self" and config["anchors"] == ["random", "connect-four-heuristic"]


# --- ppo-td play: a game against a trained policy in the terminal


@pytest.fixture(scope="module")
def tictactoe_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tictactoe") / "run"
    base = ppo_td.get_preset("generic")
    config = dataclasses.replace(base, env=ppo_td.EnvConfig(TICTACTOE, num_envs=4), frames_per_batch=256,
                                 total_frames=256, eval_episodes=1)
    ppo_td.train(config, run_dir=str(folder), progress=False)
    return folder


def test_play_draws_the_board_refuses_illegal_moves_and_says_who_won(tictactoe_run):
    from ppo_td.deploy.play import play

    typed, lines = iter(["9", "x", *map(str, range(9))]), []

    def read(prompt):
        lines.append(prompt)
        return next(typed)

    reward = play(str(tictactoe_run), seed=3, read=read, write=lines.append)
    text = "\n".join(lines)
    assert "you play player_" in lines[0] and "0 1 2\n3 4 5\n6 7 8" in text  # the empty board: each cell's number
    assert "9 is not a legal move here: type one of [0, 1, 2, 3, 4, 5, 6, 7, 8]" in text
    assert "'x' is not a move" in text
    assert reward in (-1.0, 0.0, 1.0) and lines[-1] in ("you won", "you lost", "a draw")
    assert lines[-1] == {1.0: "you won", -1.0: "you lost", 0.0: "a draw"}[reward]


def test_play_ends_at_the_end_of_input_and_refuses_a_run_that_is_no_game(tictactoe_run, tmp_path, capsys):
    from ppo_td.deploy.play import play

    def closed(prompt):
        raise EOFError

    lines = []
    assert play(str(tictactoe_run), seed=3, read=closed, write=lines.append) is None
    assert lines[-1] == "input ended: the game is left unfinished"
    ppo_td.train(dataclasses.replace(ppo_td.get_preset("cartpole"), total_frames=256, frames_per_batch=256,
                                     eval_episodes=1), run_dir=str(tmp_path / "cartpole"), progress=False)
    assert main(["play", str(tmp_path / "cartpole")]) == 2
    assert "ppo-td play plays turn-based games (PettingZoo AEC envs)" in capsys.readouterr().err


def test_a_column_game_is_drawn_with_its_column_numbers():
    from ppo_td.deploy.play import draw

    board = np.zeros((6, 7, 2), dtype=np.int8)
    board[5, 3, 0], board[5, 4, 1] = 1, 1
    assert draw({"observation": board, "action_mask": np.ones(7)}).splitlines()[-2:] == [". . . X O . .",
                                                                                          "0 1 2 3 4 5 6"]


def test_an_opponent_for_a_torchrl_env_is_refused():
    from ppo_td.envs import build_env

    with pytest.raises(ValueError, match=r"env.opponent='self' plays the other seats of a turn-based game; "
                                         r"torchrl.envs.custom.pendulum:PendulumEnv is a TorchRL env"):
        build_env(ppo_td.EnvConfig("torchrl.envs.custom.pendulum:PendulumEnv", opponent="self"), seed=1)


# --- OpenSpiel's games through Shimmy (an AEC env whose legal moves are in its infos)


def openspiel(name):
    shimmy = pytest.importorskip("shimmy")
    pytest.importorskip("pyspiel")
    return shimmy.OpenSpielCompatibilityV0(game_name=name)


def test_an_openspiel_games_masks_join_its_observation_and_each_win_counts_once():
    env = TurnBased(openspiel("tic_tac_toe"), opponent=Scripted([3, 4]), seat="player_0")
    assert env.info_masks and set(env.observation_space.spaces) == {"observation", "action_mask"}
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and obs["action_mask"].tolist() == [1] * 9
    assert env.step(0)[1:3] == (0.0, False) and env.step(1)[1:3] == (0.0, False)
    # Shimmy's closing step for the finished seat counts the last move's reward again: read move by move, 1
    assert env.step(2)[1:3] == (1.0, True)
    env = TurnBased(openspiel("tic_tac_toe"), opponent=Scripted([0, 1, 2]), seat="player_1")
    env.reset(seed=0)
    assert env.step(3)[1:3] == (0.0, False)
    assert env.step(4)[1:3] == (-1.0, True)  # the opponent's winning move reaches the learner's last step


def test_an_openspiel_game_trains_from_its_factory_and_kwargs(tmp_path):
    openspiel("tic_tac_toe")
    args = ["train", "--env.env-id", "shimmy:OpenSpielCompatibilityV0", "--env.kwargs", "game_name='tic_tac_toe'",
            "--env.num-envs", "4", "--frames-per-batch", "256", "--total-frames", "256", "--eval-episodes", "10",
            "--run-dir", str(tmp_path)]
    assert main(args) == 0
    returns = [float(r["return"]) for r in csv.DictReader((tmp_path / "episodes.csv").open())]
    assert returns and set(returns) <= {-1.0, 0.0, 1.0}  # each game's result once, never doubled
