"""Several agent groups in one env (BenchMARL's ``group_map``): the groups found from the agents' names or given,
each group's own networks, GAE and loss (against each group trained alone), gradients that stay in their group,
per-group clipping, metrics, evaluation, the CLI's train/resume/eval/export, TeamPolicy's PettingZoo and VMAS
formats, and the doctor's checkup."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from conftest import run_exported_file
from ppo_td.config import EnvConfig
from ppo_td.envs.multiagent import group_map
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline
from ppo_td.training.loop import train
from ppo_td.training.objective import TeamLoss, make_advantage, make_loss, total_loss

pytest.importorskip("vmas")
pytest.importorskip("mpe2")

TAG = "mpe2.simple_tag_v3"  # 3 adversaries (16 observations) chase 1 agent (14): two competing groups


def tiny_team(env_id=TAG, suite="pettingzoo", **env):
    """A few-iteration config of an env with several agent groups, small networks."""
    base = get_preset("mpe-spread")
    env = EnvConfig(env_id, suite=suite, num_envs=4, **({"max_episode_steps": 20} if suite == "vmas" else {}), **env)
    return dataclasses.replace(
        base, env=env, frames_per_batch=80, total_frames=160, eval_episodes=2,
        model=dataclasses.replace(base.model, hidden_sizes=(16, 16)),
        optim=dataclasses.replace(base.optim, num_minibatches=2, update_epochs=2))


def test_groups_come_from_the_agents_name_prefixes_or_as_given():
    assert group_map(["adversary_0", "adversary_1", "agent_0"]) == {"adversary": ["adversary_0", "adversary_1"],
                                                                     "agent": ["agent_0"]}
    assert group_map(["agent_0", "agent_1"]) == {"agents": ["agent_0", "agent_1"]}  # one prefix: one group
    assert group_map(["speaker_0", "listener_0"]) == {"speaker": ["speaker_0"], "listener": ["listener_0"]}
    assert group_map(["alice", "bob_1", "bob_2"]) == {"alice": ["alice"], "bob": ["bob_1", "bob_2"]}
    assert group_map(["a_0", "b_0", "a_1"], ["x=a_1,b_0", "y=a_0"]) == {"x": ["b_0", "a_1"], "y": ["a_0"]}
    with pytest.raises(ValueError, match=r"\['a_1'\] in two groups"):
        group_map(["a_0", "a_1"], ["x=a_0,a_1", "y=a_1"])


def test_each_group_gets_its_own_networks_advantages_and_loss_equal_to_the_group_trained_alone():
    """The team's GAE and loss, group by group, equal make_advantage/make_loss on that group's own actor and critic
    (the oracle: a one-group pipeline's parts), and the team's loss is their sum."""
    torch.manual_seed(0)
    p = build_pipeline(tiny_team())
    assert p.groups == ["adversary", "agent"] and isinstance(p.loss, TeamLoss)
    desc = {t.group: t for t in p.description.teams}
    assert (desc["adversary"].num_agents, desc["adversary"].observation_size) == (3, 16)
    assert (desc["agent"].num_agents, desc["agent"].observation_size) == (1, 14)
    ids = {g: {id(q) for q in loss.parameters()} for g, loss in p.loss.losses.items()}
    assert not ids["adversary"] & ids["agent"]  # no parameter shared between the groups

    batch = next(iter(p.collector))
    alone = batch.clone()
    with torch.no_grad():
        p.advantage(batch)
        for group, loss in p.loss.losses.items():
            make_advantage(loss.critic_network, p.config.loss, group)(alone)
    for group in p.groups:
        for key in ("advantage", "value_target", "state_value"):
            torch.testing.assert_close(batch.get((group, key)), alone.get((group, key)), rtol=0, atol=0)
        # each group is trained on its own reward: the agent's advantage is not the adversaries'
    assert not torch.equal(batch.get(("adversary", "advantage"))[..., :1, :], batch.get(("agent", "advantage")))

    minibatch = batch.reshape(-1)[:32]
    torch.manual_seed(1)
    team = p.loss(minibatch)
    expected = 0.0
    for group, loss in p.loss.losses.items():
        torch.manual_seed(1)
        own = make_loss(loss.actor_network, loss.critic_network, p.config.loss, group)(minibatch)
        expected = expected + total_loss(own)
        torch.testing.assert_close(team.get(("groups", group, "loss_objective")), own.get("loss_objective").detach())
    torch.testing.assert_close(total_loss(team), expected)


def test_a_groups_loss_moves_only_its_own_parameters_and_each_group_is_clipped_on_its_own():
    from ppo_td.training.loop import _clip_gradients

    torch.manual_seed(0)
    p = build_pipeline(tiny_team())
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    minibatch = batch.reshape(-1)
    adversary, agent = p.loss.losses["adversary"], p.loss.losses["agent"]
    total_loss(adversary(minibatch)).backward()
    assert all(q.grad is not None for q in adversary.parameters() if q.requires_grad)
    assert all(q.grad is None for q in agent.parameters())  # the other group's parameters are left alone
    p.optimizer.zero_grad()
    (total_loss(p.loss(minibatch)) * 1e4).backward()  # both groups' gradients far beyond the limit
    norm = _clip_gradients(p, p.parameters, 0.5)
    assert norm > 1.0
    for params in p.loss.parameter_sets():
        clipped = torch.stack([q.grad.norm() for q in params if q.grad is not None]).norm()
        assert clipped == pytest.approx(0.5, rel=1e-4)  # each group at the limit, not a shared norm split between


def test_training_logs_and_evaluates_each_group(tmp_path):
    result = train(dataclasses.replace(tiny_team(), total_frames=240))
    row = result.history[-1]
    for group in ("adversary", "agent"):
        for name in ("episode_return", "explained_variance", "loss_policy", "entropy", "kl_k3"):
            assert f"{name}/{group}" in row, (name, group)
    ev = result.evaluation
    assert set(ev.groups) == {"adversary", "agent"} and len(ev.returns) == 2
    for i, value in enumerate(ev.returns):  # all agents' reward per agent: 3 adversaries and 1 agent, weighted
        assert value == pytest.approx((3 * ev.groups["adversary"][i] + ev.groups["agent"][i]) / 4)
    assert result.episodes and all({"return/adversary", "return/agent"} <= set(e) for e in result.episodes)


def test_cli_trains_resumes_evaluates_and_exports_a_two_group_run(tmp_path, capsys):
    """simple_tag from the command line, stopped after one iteration and resumed; ppo-td eval; export writes one
    file per group, each acting as its group's policy without ppo_td; load_policy takes PettingZoo's dict API."""
    import ppo_td
    from ppo_td.cli import main
    from ppo_td.deploy import TeamPolicy
    from ppo_td.training.loop import StopTraining

    def stop_after_first(metrics, pipeline):
        if metrics["iteration"] == 1:
            raise StopTraining

    config = dataclasses.replace(tiny_team(), total_frames=240)
    assert ppo_td.train(config, run_dir=str(tmp_path), callbacks=[stop_after_first]).stopped
    assert main(["train", "--resume", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "deterministic evaluation, reward per agent:" in out and "(adversary " in out and ", agent " in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["eval_group_returns"]) == {"adversary", "agent"}
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0]
    assert "episode_return/adversary" in header and "episode_return/agent" in header
    assert "return/agent" in (tmp_path / "episodes.csv").read_text().splitlines()[0]
    assert main(["eval", str(tmp_path), "--episodes", "2"]) == 0
    assert "(adversary " in capsys.readouterr().out

    assert main(["export", str(tmp_path), "--format", "torchscript"]) == 0
    printed = capsys.readouterr().out
    assert "group adversary: wrote" in printed and "observation float32 (batch, 3 agents, 16)" in printed
    assert "group agent: wrote" in printed and "observation float32 (batch, 1 agents, 14)" in printed

    policy = ppo_td.load_policy(str(tmp_path))
    assert isinstance(policy, TeamPolicy) and policy.groups == ["adversary", "agent"]
    for group in policy.groups:  # each file acts as its group's policy, in a fresh process without ppo_td
        obs = np.random.default_rng(0).standard_normal((3, 4, *(policy[group].description.num_agents,
                                                                policy[group].description.observation_size)))
        got = run_exported_file("torchscript", tmp_path / f"policy.{group}.pt", {"in0": obs.astype(np.float32)},
                                tmp_path)
        np.testing.assert_array_equal(got, np.stack([policy[group](o.astype(np.float32)) for o in obs]))

    env = policy.make_env()  # PettingZoo's parallel API: every agent's observation in, every agent's action out
    observations, _ = env.reset(seed=0)
    actions = policy(observations)
    assert set(actions) == set(env.agents) and all(isinstance(a, int) for a in actions.values())
    assert actions["agent_0"] == policy["agent"]({"agent_0": observations["agent_0"]})["agent_0"]
    env.step(actions)
    env.close()
    by_group = policy({"adversary": np.stack([observations[f"adversary_{i}"] for i in range(3)]),
                       "agent": observations["agent_0"][None]})
    assert by_group["adversary"].shape == (3,) and by_group["agent"].shape == (1,)
    with pytest.raises(ValueError, match="neither agents of this env"):
        policy({"prey_0": observations["agent_0"]})
    with pytest.raises(ValueError, match="one file each"):
        from ppo_td.deploy.export import export_policy

        export_policy(policy, "torchscript", tmp_path / "x.pt")


def test_a_vmas_scenario_whose_agents_differ_trains_and_acts_with_vmas_lists(tmp_path):
    """VMAS's simple_tag: adversaries and the agent observe different things; each group has its own networks, and
    the policy takes VMAS's list of every agent's [envs, obs] in the simulator's order."""
    import ppo_td

    config = tiny_team("simple_tag", suite="vmas")
    result = ppo_td.train(config, run_dir=str(tmp_path))
    assert set(result.evaluation.groups) == {"adversary", "agent"}
    policy = ppo_td.load_policy(str(tmp_path))
    env = policy.make_env(num_envs=3)
    observations = env.reset()
    actions = policy(observations)
    assert len(actions) == 4 and all(a.shape == (3, 2) for a in actions)
    torch.testing.assert_close(actions[3], policy["agent"]([observations[3]])[0])
    env.step(actions)


def test_groups_given_by_name_train_and_the_checkup_audits_each_group():
    """--env.groups regroups the agents (here each adversary alone); the doctor's checkup audits every group's
    networks by the group's name and finds nothing in ppo_td's own update."""
    from ppo_td.doctor import checkup

    groups = ("hunter=adversary_0", "pack=adversary_1,adversary_2", "prey=agent_0")
    p = build_pipeline(tiny_team(groups=groups))
    assert p.groups == ["hunter", "pack", "prey"]
    a = checkup(p)
    assert not a.findings, a.report()
    assert {name.split(".")[0] for name in a.modules} >= {"hunter", "pack", "prey"}, list(a.modules)


def test_agents_without_a_number_are_groups_named_as_they_are_and_the_policy_reads_them_per_agent(tmp_path):
    """tests/team_envs.py: 'alice' (a group of her own, named as she is) and bob_0, bob_1 with other spaces. A dict
    of agents' observations is read per agent even where an agent's name is also a group's; a group's stacked
    observations go by the group's name."""
    import ppo_td

    config = dataclasses.replace(tiny_team("team_envs", kwargs=("max_cycles=5",)), frames_per_batch=40,
                                 total_frames=80)
    ppo_td.train(config, run_dir=str(tmp_path))
    policy = ppo_td.load_policy(str(tmp_path))
    assert policy.groups == ["alice", "bob"] and policy.agents == ["alice", "bob_0", "bob_1"]
    env = policy.make_env()
    observations, _ = env.reset(seed=0)
    actions = policy(observations)
    assert set(actions) == {"alice", "bob_0", "bob_1"}
    assert policy({"alice": observations["alice"]}) == {"alice": actions["alice"]}  # alice as an agent
    assert set(policy({"bob": np.stack([observations["bob_0"], observations["bob_1"]])})) == {"bob"}  # a group
    listed = policy([observations[a] for a in policy.agents])  # VMAS's layout: every agent, in the env's order
    assert [int(a) for a in listed] == [actions[a] for a in policy.agents]
    with pytest.raises(ValueError, match="trained without action masks"):
        policy(observations, action_mask={"alice": np.ones(4, bool)})


def test_bad_groups_are_refused_before_anything_is_built():
    with pytest.raises(ValueError, match=r"group names other than \['next'\]"):
        EnvConfig(TAG, suite="pettingzoo", groups=("next=agent_0", "rest=adversary_0,adversary_1,adversary_2"))
    with pytest.raises(ValueError, match="env.groups"):
        EnvConfig("CartPole-v1", groups=("a=b",))
    with pytest.raises(ValueError, match="env.kwargs sets group_map"):
        build_pipeline(tiny_team("simple_tag", suite="vmas", kwargs=("group_map='x'",)))


def test_a_failed_team_export_leaves_the_earlier_files_as_they_were(tmp_path, monkeypatch):
    """All or none: the second group's export fails after the first group's file was made; the files of an earlier
    export stay, and no half-written or staged file is left."""
    import ppo_td
    from ppo_td.deploy import export as exporting

    ppo_td.train(dataclasses.replace(tiny_team(), total_frames=80, eval_episodes=0), run_dir=str(tmp_path))
    policy = ppo_td.load_policy(str(tmp_path))
    written = exporting.export_team(policy, "torchscript", tmp_path / "policy.pt")
    before = {g: p.read_bytes() for g, p in written.items()}
    real = exporting.export_policy

    def second_fails(one, fmt, path):
        if one.group == "agent":
            raise exporting.ExportError("injected")
        return real(one, fmt, path)

    monkeypatch.setattr(exporting, "export_policy", second_fails)
    with pytest.raises(exporting.ExportError, match="injected"):
        exporting.export_team(policy, "torchscript", tmp_path / "policy.pt")
    assert {g: p.read_bytes() for g, p in written.items()} == before
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["checkpoint.pt", "policy.adversary.pt", "policy.agent.pt"]
    assert not list(tmp_path.glob(".*"))
