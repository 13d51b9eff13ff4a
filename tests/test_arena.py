"""ppo-td arena (ppo_td.deploy.arena): a round robin of trained policies and anchors of a turn-based game; every
pair its games with the seats alternating, Wilson intervals against known values, OpenSkill ratings against the
model's symmetries and the order of games, rating curves from a run's checkpoints, the refusals, Ctrl-C keeping
what was played, the command line printing what the Python API returns."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

import ppo_td
from ppo_td.cli import main
from ppo_td.deploy.arena import ArenaInterrupted, ArenaResult, Game, Player, arena, wilson
from ppo_td.envs.games import ConnectFourWinOrBlock, TurnBased

pytest.importorskip("pettingzoo")
pytest.importorskip("openskill")
from pettingzoo.classic import tictactoe_v3  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")

TICTACTOE = "pettingzoo.classic.tictactoe_v3:env"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tic-tac-toe run of 4 iterations, a checkpoint kept at each."""
    folder = tmp_path_factory.mktemp("arena") / "ttt"
    config = dataclasses.replace(ppo_td.get_preset("generic"), env=ppo_td.EnvConfig(TICTACTOE, num_envs=4),
                                 frames_per_batch=256, total_frames=1024, eval_episodes=1)
    ppo_td.train(config, run_dir=str(folder), progress=False, checkpoint_every=1, keep_checkpoints=10)
    return folder


def checkpoints(run):
    return sorted((run / "checkpoints").glob("iter_*.pt"))


def synthetic(results, players=("a", "b")):
    """An arena result of games between players 0 and 1 with ``results`` from 0's side."""
    return ArenaResult([Player(p, p) for p in players], [Game(0, 1, "player_1", r) for r in results],
                       planned=len(results))


def test_wilson_matches_known_intervals():
    assert wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)  # Wilson (1927) 95%, as tabulated
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert all(np.isnan(wilson(0, 0)))


def test_ratings_follow_the_results_symmetrically():
    won = synthetic([1] * 20).ratings()
    assert [r.player.name for r in won] == ["a", "b"]
    assert won[0].mu - 25 == pytest.approx(25 - won[1].mu)  # a zero-sum game moves both alike
    assert won[0].sigma == pytest.approx(won[1].sigma) and won[0].sigma < 25 / 3
    drawn = synthetic([0] * 20).ratings()
    assert [r.mu for r in drawn] == pytest.approx([25.0, 25.0])
    lost = synthetic([-1] * 20).ratings()
    assert [r.player.name for r in lost] == ["b", "a"] and lost[0].mu == pytest.approx(won[0].mu)
    # no games: the prior
    assert [(r.mu, r.sigma) for r in synthetic([]).ratings()] == [(25.0, pytest.approx(25 / 3))] * 2


def test_ratings_are_the_mean_over_orders_of_the_games_which_leaves_little_of_the_order():
    rng = np.random.default_rng(0)
    players = [Player(n, n) for n in "abcd"]
    strength = [2.0, 1.0, 0.0, -1.0]  # a beats b beats c beats d, by a logistic model
    games = []
    for _ in range(60):
        for a in range(4):
            for b in range(a + 1, 4):
                p = 1 / (1 + np.exp(strength[b] - strength[a]))
                games.append(Game(a, b, "player_1", 1 if rng.random() < p else -1))
    result = ArenaResult(players, games, planned=len(games))
    one_order = [result.rated_in(rng.permutation(len(games)))[:, 0] for _ in range(2)]
    means = [{r.player.name: r for r in result.ratings(seed=seed)} for seed in (0, 1)]
    assert list(means[0]) == list(means[1]) == ["a", "b", "c", "d"]
    sigma = np.array([means[0][n].sigma for n in "abcd"])
    mean_gap = np.array([abs(means[0][n].mu - means[1][n].mu) for n in "abcd"])
    assert (mean_gap < 0.35 * sigma).all()  # about 0.1 sigma apart (measured), where two single orders differ more
    assert np.abs(one_order[0] - one_order[1]).max() > mean_gap.max()
    # the mean over orders is of the orders themselves
    order_rng = np.random.default_rng(0)
    by_hand = np.mean([result.rated_in(order_rng.permutation(len(games))) for _ in range(32)], axis=0)
    assert [means[0][n].mu for n in "abcd"] == pytest.approx(by_hand[:, 0].tolist())


def test_pairs_count_each_side():
    result = ArenaResult([Player(n, n) for n in "abc"],
                         [Game(0, 1, "s", 1), Game(1, 0, "s", 1), Game(0, 1, "s", 0), Game(2, 0, "s", -1)], planned=4)
    pairs = {(p.a, p.b): (p.wins, p.draws, p.losses) for p in result.pairs()}
    assert pairs == {("a", "b"): (1, 1, 1), ("a", "c"): (1, 0, 0)}


def test_every_pair_plays_its_games_each_player_in_each_seat_alike(run):
    first, last = checkpoints(run)[0], checkpoints(run)[-1]
    result = arena([first, last], games=6, anchors=["random"], seed=1)
    assert result.planned == len(result.games) == 3 * 6
    assert [p.name for p in result.players] == ["ttt@256", "ttt@1024", "random"]
    for a in range(3):
        for b in range(a + 1, 3):
            mine = [g for g in result.games if {g.a, g.b} == {a, b}]
            assert len(mine) == 6
            seats_of_a = [g.seat if g.a == a else ({"player_1", "player_2"} - {g.seat}).pop() for g in mine]
            assert sorted(seats_of_a) == ["player_1"] * 3 + ["player_2"] * 3
    assert {g.result for g in result.games} <= {-1, 0, 1}
    # seeded: the same games again; another seed, other games
    assert arena([first, last], games=6, anchors=["random"], seed=1).games == result.games
    assert arena([first, last], games=6, anchors=["random"], seed=2).games != result.games
    # the global random state is the caller's: the arena draws its own
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    arena([first, last], games=2, anchors=[], seed=1)
    assert torch.rand(1) == before


def test_two_modes_meeting_play_one_game_per_seat(run):
    first, last = checkpoints(run)[0], checkpoints(run)[-1]
    result = arena([first, last], games=6, anchors=[], sampled=False, seed=3)
    by_seat = {}
    for game in result.games:
        by_seat.setdefault(game.seat, set()).add(game.result)
    assert all(len(outcomes) == 1 for outcomes in by_seat.values())


def test_rating_curves_from_a_runs_checkpoints(run, tmp_path):
    result = arena(checkpoints(run), games=4, anchors=["random"], seed=0)
    curves = result.curves()
    assert list(curves) == ["ttt"]
    assert [r.player.frames for r in curves["ttt"]] == [256, 512, 768, 1024]
    assert result.plot(tmp_path / "curve.png").stat().st_size > 0
    data = result.to_dict()
    assert len(data["games"]) == result.planned and {r["player"] for r in data["ratings"]} == {
        "ttt@256", "ttt@512", "ttt@768", "ttt@1024", "random"}


def test_refusals(run, tmp_path):
    last = checkpoints(run)[-1]
    with pytest.raises(ValueError, match=r"are the same checkpoint: give each player once"):
        arena([run, last])  # checkpoint.pt is the newest checkpoint
    with pytest.raises(ValueError, match=r"the arena needs two players or more"):
        arena([run], anchors=[])
    assert arena(run, games=2, anchors=["random"]).planned == 2  # one run given alone plays the anchors
    with pytest.raises(ValueError, match=r"the connect-four-heuristic opponent reads connect four's board"):
        arena([run], anchors=["connect-four-heuristic"])
    with pytest.raises(ValueError, match=r"anchor 'random' given twice"):
        arena([run], anchors=["random", "random"])
    with pytest.raises(ValueError, match=r"games=0"):
        arena([run], games=0)
    cartpole = tmp_path / "cartpole"
    ppo_td.train(dataclasses.replace(ppo_td.get_preset("cartpole"), total_frames=256, frames_per_batch=256,
                                     eval_episodes=1), run_dir=str(cartpole), progress=False)
    with pytest.raises(ValueError, match=r"every player must play the same game"):
        arena([run, cartpole])
    with pytest.raises(ValueError, match=r"the arena plays turn-based games"):
        arena([cartpole, run])
    from pathlib import Path

    agents = Path(__file__).parent / "old_runs" / "pettingzoo"  # a stored multi-agent run (agents acting at once)
    with pytest.raises(ValueError, match=r"whose agents form one group: the team arena plays groups against each"):
        arena([agents, run])  # a multi-agent run first: the team arena's, which needs two groups
    with pytest.raises(ValueError, match=r"agents acting at once\), the arena's first player a turn-based game"):
        arena([run, agents])
    recurrent = Path(__file__).parent / "old_runs" / "factory-recurrent"
    with pytest.raises(ValueError, match=r"a recurrent policy; the arena plays feed-forward ones"):
        arena([run, recurrent])


def test_the_heuristic_is_refused_for_another_game_wherever_it_is_given():
    with pytest.raises(ValueError, match=r"reads connect four's board"):
        TurnBased(tictactoe_v3.env(), opponent=ConnectFourWinOrBlock())
    game = TurnBased(tictactoe_v3.env())
    with pytest.raises(ValueError, match=r"reads connect four's board"):
        game.set_opponent(ConnectFourWinOrBlock())


def test_a_seat_given_at_reset_is_kept_for_that_game():
    game = TurnBased(tictactoe_v3.env())
    assert {game.reset(seed=s, options={"seat": "player_2"})[1]["seat"] for s in range(6)} == {"player_2"}
    assert len({game.reset(seed=s)[1]["seat"] for s in range(20)}) == 2  # drawn again without it


def test_ctrl_c_keeps_the_games_played(run):
    def stop(done, rounds):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(ArenaInterrupted) as caught:
        arena(checkpoints(run)[:2], games=10, anchors=["random"], on_round=stop)
    assert len(caught.value.result.games) == 3 * 3 and caught.value.result.planned == 30
    assert "9 of 30 games played" in caught.value.result.table()


def test_the_command_line_prints_what_the_python_api_returns(run, tmp_path, capsys):
    players = [str(p) for p in checkpoints(run)[:2]]
    assert main(["arena", *players, "--games", "4", "--seed", "7", "--json", str(tmp_path / "a.json"),
                 "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    result = ppo_td.arena(players, games=4, seed=7)
    assert result.table() in out
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads(json.dumps(result.to_dict()))
    assert (tmp_path / "a.png").stat().st_size > 0
    # wrong input: one line each, before anything is played
    assert main(["arena", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err
    assert main(["arena", *players, "--games", "0"]) == 2
    assert "--games 0" in capsys.readouterr().err
    assert main(["arena", *players, "--json", str(tmp_path / "missing" / "a.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_sigint_mid_arena_prints_and_writes_what_was_played(run, tmp_path):
    players = [str(p) for p in checkpoints(run)]
    out = tmp_path / "partial.json"
    proc = subprocess.Popen([sys.executable, "-m", "ppo_td.cli", "arena", *players, "--games", "1000", "--json",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    try:
        for line in proc.stderr:  # the first progress line: games are being played
            if line.startswith("round "):
                break
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "games played" in stdout and "ppo-td arena: SIGINT: stopped" in stderr
    data = json.loads(out.read_text())
    assert 0 < len(data["games"]) < data["planned"] and data["ratings"]
