"""Team self-play (env.opponent='self' on an env with several agent groups, ppo_td.training.selfplay.TeamSelfPlay):
one group learns at a time, the groups taking turns every env.team_change frames; the others play their own drawn
snapshots during collection and get their own weights back however it ends; only the learning group's loss is
computed and only its parameters move; the pools, turn and draws come back on resume, exactly; refusals."""

import dataclasses

import pytest
import torch
from test_teams import TAG, tiny_team

import ppo_td
from conftest import ctrl_c_after
from ppo_td.config import EnvConfig
from ppo_td.models.multiagent import team_members
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline

pytest.importorskip("vmas")
pytest.importorskip("mpe2")


def _weights(params):
    return [q.detach().clone() for q in params]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("env", ["mpe", "vmas"])  # TorchRL's Collector over PettingZoo; ppo_td's AgentsCollector
def test_the_other_group_plays_its_drawn_snapshot_and_gets_its_own_weights_back(env):
    where = {"env_id": "simple_tag", "suite": "vmas"} if env == "vmas" else {}
    p = build_pipeline(tiny_team(**where, opponent="self", latest_ratio=0.0))
    try:
        assert type(p.collector).__name__ == ("AgentsCollector" if env == "vmas" else "Collector")
        selfplay = p.selfplay
        assert selfplay.learning == "adversary" and p.loss.learning == ("adversary",)
        agent = selfplay.parameters["agent"]
        first = _weights(agent)
        assert [len(pool) for pool in selfplay.pools.values()] == [1, 1]  # every group's weights at the start
        with torch.no_grad():  # the agent's own weights moved away from its snapshot
            for q in agent:
                q.add_(0.3 * torch.randn_like(q))
        own = _weights(agent)
        with selfplay.playing():
            assert _same(agent, first) and selfplay.played == {"agent": 0}
            batch = next(iter(p.collector))
        assert _same(agent, own)
        # the oracle: the agent's steps are the snapshot's, their log-probs its policy's (not its own weights')
        member = team_members(p.actor, p.groups, "action")["agent"]
        log_prob_key = ("agent", "action_log_prob")
        with torch.no_grad():
            recorded = batch.get(log_prob_key)
            now = member.get_dist(batch).log_prob(batch.get(("agent", "action")))
            assert not torch.allclose(now.reshape(recorded.shape), recorded, atol=1e-4)
            for q, w in zip(agent, first, strict=True):
                q.copy_(w)
            then = member.get_dist(batch).log_prob(batch.get(("agent", "action")))
            torch.testing.assert_close(then.reshape(recorded.shape), recorded, rtol=1e-5, atol=1e-5)
            for q, w in zip(agent, own, strict=True):
                q.copy_(w)
        # an interrupted collection gives the weights back too
        with pytest.raises(KeyboardInterrupt), selfplay.playing():
            assert _same(agent, first)
            raise KeyboardInterrupt
        assert _same(agent, own)
    finally:
        p.collector.shutdown()


def test_one_group_learns_at_a_time_and_the_groups_take_turns():
    """team_change 160 of 80-frame batches, latest_ratio 0: adversary, adversary, agent, agent, adversary,
    adversary; only the learning group's actor and critic move, the other's losses are not computed; each group's
    pool gains a snapshot of it every snapshot_frames while it learns."""
    config = dataclasses.replace(tiny_team(opponent="self", team_change=160, snapshot_frames=80, pool_size=3,
                                           latest_ratio=0.0), total_frames=480, eval_episodes=0)
    seen = []

    def record(metrics, pipeline):
        nets = {g: _weights([*pipeline.loss.losses[g].parameters()]) for g in pipeline.groups}
        seen.append((metrics, nets))

    p = build_pipeline(config)
    before = {g: _weights([*p.loss.losses[g].parameters()]) for g in p.groups}
    p.collector.shutdown()
    result = ppo_td.train(config, progress=False, callbacks=[record])
    learning = [int(m["selfplay_learning"]) for m, _ in seen]
    assert learning == [0, 0, 1, 1, 0, 0]
    previous = before
    for (metrics, nets), group in zip(seen, learning, strict=True):
        name, other = p.groups[group], p.groups[1 - group]
        assert not _same(nets[name], previous[name]) and _same(nets[other], previous[other])
        assert f"loss_policy/{name}" in metrics and f"loss_policy/{other}" not in metrics
        assert metrics[f"selfplay_played/{other}"] in (0.0, 1.0, 2.0)  # latest_ratio 0: a snapshot of its pool
        previous = nets
        # the other group's GAE is not run (its value statistics stay), its explained variance not reported
        assert f"explained_variance/{name}" in metrics and f"explained_variance/{other}" not in metrics
    pools = result.pipeline.selfplay.pools
    assert [len(pools[g]) for g in p.groups] == [3, 3]  # the window keeps the newest 3
    # the agent's turn ended at 320 frames (its own weights then its newest snapshot, index 2); in the adversary's
    # next turn it played an older one at least once: its weights above came back from another's
    assert {m["selfplay_played/agent"] for m, _ in seen[4:]} & {0.0, 1.0}


def test_a_team_self_play_run_resumes_with_its_pools_turn_and_draws(tmp_path):
    """VMAS simple_tag, interrupted after 3 iterations: the checkpoint holds the pools, the learning group, the next
    snapshot's frame and the draws' generator; the resumed pipeline has them as saved, and goes on with the draws and
    turns of the run that was not interrupted (a VMAS simulator resumes with fresh episodes, so the weights are not
    compared)."""
    from ppo_td.persist import load_checkpoint, resume_pipeline

    config = dataclasses.replace(tiny_team("simple_tag", suite="vmas", opponent="self", team_change=160,
                                           snapshot_frames=80, latest_ratio=0.25), total_frames=560, eval_episodes=0)
    whole = ppo_td.train(config, run_dir=str(tmp_path / "whole"), progress=False)
    with pytest.raises(KeyboardInterrupt, match="continue with ppo_td.resume"):
        ppo_td.train(config, run_dir=str(tmp_path / "cut"), progress=False, callbacks=[ctrl_c_after(3)])
    saved = load_checkpoint(tmp_path / "cut")["selfplay"]
    assert saved["learning"] == "agent" and saved["next_at"] == 320 and len(saved["pools"]["adversary"]) == 3
    resumed = resume_pipeline(tmp_path / "cut" / "checkpoint.pt")
    try:
        pool = resumed.pipeline.selfplay
        assert pool.learning == "agent" and resumed.pipeline.loss.learning == ("agent",) and pool.next_at == 320
        assert pool.rng.bit_generator.state == saved["rng"]
        for group in pool.groups:
            assert all(_same(a, b) for a, b in zip(pool.pools[group], saved["pools"][group], strict=True))
    finally:
        resumed.pipeline.env.close()
    rest = ppo_td.resume(str(tmp_path / "cut"), progress=False)
    assert [m["iteration"] for m in rest.history] == [4, 5, 6, 7]

    def turns(history):
        return [(m["selfplay_learning"], {k: v for k, v in m.items() if k.startswith("selfplay_played/")})
                for m in history]
    assert turns(rest.history) == turns(whole.history[3:])
    assert [len(p) for p in rest.pipeline.selfplay.pools.values()] == [
        len(p) for p in whole.pipeline.selfplay.pools.values()]


def test_only_the_learning_groups_gradients_are_clipped_and_its_advantages_estimated():
    """The update clips each learning group's gradient norm (a group without gradients, on another device than
    torch's empty norm, is not in the sets) and the estimator runs the learning group's GAE only."""
    p = build_pipeline(tiny_team(opponent="self"))
    try:
        assert p.loss.learning == p.advantage.learning == ("adversary",)
        adversary = {id(q) for q in p.loss.losses["adversary"].parameters()}
        assert [{id(q) for q in s} <= adversary for s in p.loss.parameter_sets()] == [True]
        with p.selfplay.playing():
            batch = next(iter(p.collector))
        with torch.no_grad():
            p.advantage(batch)
        assert ("adversary", "advantage") in batch.keys(True) and ("agent", "advantage") not in batch.keys(True)
        with pytest.raises(ValueError, match=r"a object collects with copies of it: let ppo_td build the collector"):
            p.selfplay.check_collector(object())
    finally:
        p.collector.shutdown()


def test_team_self_play_is_refused_where_it_cannot_run():
    spread = dataclasses.replace(get_preset("mpe-spread"), env=EnvConfig("mpe2.simple_spread_v3", suite="pettingzoo",
                                                                         num_envs=2, opponent="self"))
    with pytest.raises(ValueError, match=r"env.opponent='self' \(team self-play\): the env has one agent group"):
        build_pipeline(spread)
    with pytest.raises(ValueError, match="env.anchors"):
        EnvConfig(TAG, suite="pettingzoo", opponent="self", anchors=("random",))
    with pytest.raises(ValueError, match="env.opponent"):
        EnvConfig(TAG, suite="pettingzoo", opponent="connect-four-heuristic")
    with pytest.raises(ValueError, match="env.team_change"):
        EnvConfig(TAG, suite="pettingzoo", opponent="self", team_change=0)



def test_the_cli_builds_the_same_team_self_play_config():
    from ppo_td.cli.parse import train_command

    command, _ = train_command(["--preset", "mpe-spread", "--env.env-id", TAG, "--env.opponent", "self",
                                "--env.team-change", "50000"], "ppo-td train")
    base = get_preset("mpe-spread")
    env = dataclasses.replace(base.env, env_id=TAG, kwargs=(), opponent="self", team_change=50_000)  # (the
    # preset's kwargs are simple_spread's: another env id starts from its own)
    assert command.config == dataclasses.replace(base, env=env)


# --- the team arena (ppo_td.deploy.team_arena): every run's groups against every run's


@pytest.fixture(scope="module")
def two_team_runs(tmp_path_factory):
    """Two short MPE simple_tag runs of different seeds (one with team self-play): their groups differ."""
    folder = tmp_path_factory.mktemp("team_arena")
    for name, seed, opponent in (("a", 1, "self"), ("b", 2, "random")):
        config = dataclasses.replace(tiny_team(opponent=opponent, team_change=80, snapshot_frames=80), seed=seed,
                                     total_frames=160, eval_episodes=0)
        ppo_td.train(config, run_dir=str(folder / name), progress=False)
    return folder


def test_the_team_arena_plays_every_assignment_of_the_runs_to_the_groups(two_team_runs):
    from tensordict.nn import TensorDictSequential

    from ppo_td.persist import load_for_evaluation
    from ppo_td.training.evaluation import evaluate

    a, b = str(two_team_runs / "a"), str(two_team_runs / "b")
    # the Python API (the same dispatch as ppo-td arena); each policy's mode: the short runs' near-uniform policies
    # sample alike from the same random numbers
    result = ppo_td.arena([a, b], episodes=6, seed=3, sampled=False)
    assert result.groups == ["adversary", "agent"] and result.runs == ["a", "b"]
    assert [m.players for m in result.matches] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # the oracle: a's adversaries with b's agent, assembled by hand and evaluated on the same seeded episodes
    ours, theirs = load_for_evaluation(two_team_runs / "a" / "checkpoint.pt"), load_for_evaluation(
        two_team_runs / "b" / "checkpoint.pt")
    team = TensorDictSequential(team_members(ours.actor, result.groups, "action")["adversary"],
                                team_members(theirs.actor, result.groups, "action")["agent"])
    by_hand = evaluate(team, ours.config.env, 6, 3)
    assert result.matches[1].returns == {g: by_hand.groups[g] for g in result.groups}
    alone = evaluate(ours.actor, ours.config.env, 6, 3)  # a's own team: a's evaluation
    assert result.matches[0].returns == {g: alone.groups[g] for g in result.groups}
    assert result.matches[0].returns["agent"] != result.matches[1].returns["agent"]
    standing = {s.run: s for s in result.standings("agent")}
    assert standing["b"].episodes == 12  # b's agent against a's and b's adversaries
    values = result.matches[1].returns["agent"] + result.matches[3].returns["agent"]
    assert standing["b"].mean == pytest.approx(sum(values) / len(values))
    assert "comparable within agent only" in result.table()


def test_the_team_arena_from_the_command_line(two_team_runs, tmp_path, capsys):
    import json

    from ppo_td.cli.main import main

    out = tmp_path / "arena.json"
    a, b = str(two_team_runs / "a"), str(two_team_runs / "b")
    assert main(["arena", a, b, "--episodes", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 of 4 matches played, 2 episodes each" in printed and "adversary: a, agent: b" in printed
    saved = json.loads(out.read_text())
    assert saved["matches"][1]["players"] == {"adversary": "a", "agent": "b"}
    assert main(["arena", a, b, "--anchors", "random"]) == 2
    assert "without anchors or rating curves" in capsys.readouterr().err
    assert main(["arena", a, b, "--plot", str(tmp_path / "curves.png")]) == 2
    assert "without anchors or rating curves" in capsys.readouterr().err and not (tmp_path / "curves.png").exists()
    assert main(["arena", a, b, "--episodes", "0"]) == 2
    assert "--episodes 0" in capsys.readouterr().err
    assert main(["arena", a, str(two_team_runs / "a" / "checkpoint.pt")]) == 2  # one run twice
    assert "are the same checkpoint: give each run once" in capsys.readouterr().err


def test_a_team_self_play_run_from_the_command_line_says_which_group_learns(tmp_path, capsys):
    from ppo_td.cli.main import main

    rc = main(["train", "--preset", "mpe-spread", "--env.env-id", TAG, "--env.num-envs", "4", "--env.opponent", "self",
               "--env.team-change", "80", "--frames-per-batch", "80", "--total-frames", "240", "--model.hidden-sizes",
               "16", "16", "--optim.num-minibatches", "2", "--optim.update-epochs", "2", "--eval-episodes", "0",
               "--run-dir", str(tmp_path / "run")])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "learning agent" in printed and "learning adversary" in printed  # iterations 2 and 3 (episodes ended)
    header = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"selfplay_learning", "selfplay_played/agent", "selfplay_played/adversary"} <= set(header)
