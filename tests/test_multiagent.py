"""Multi-agent PPO (IPPO/MAPPO) on TorchRL's VMAS and PettingZoo wrappers: per-agent GAE against a reference
loop, the critic's reach (centralised or not, never into the policy), decentralised execution, the refusals, and
the loop, CLI and checkpoints on a multi-agent env."""

import dataclasses

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import nn
from torchrl.modules import ValueOperator

from conftest import run_exported_file
from ppo_td.config import EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.envs import build_env
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, make_advantage
from ppo_td.training.loop import train

pytest.importorskip("vmas")
pytest.importorskip("mpe2")


def reference_gae(value, next_value, reward, terminated, done, gamma, lam):
    """CleanRL-style backward loop over one agent's time axis."""
    advantages = torch.zeros(reward.shape[0])
    last = 0.0
    for t in reversed(range(reward.shape[0])):
        delta = reward[t] + gamma * next_value[t] * (1.0 - terminated[t]) - value[t]
        last = delta + gamma * lam * (1.0 - done[t]) * last
        advantages[t] = last
    return advantages


def _agent_batch(n_envs, steps, n_agents, obs_dim, group_flags):
    obs = torch.randn(n_envs, steps, n_agents, obs_dim)
    reward = torch.randn(n_envs, steps, n_agents, 1)
    root_term = torch.zeros(n_envs, steps, 1, dtype=torch.bool)
    root_trunc = torch.zeros(n_envs, steps, 1, dtype=torch.bool)
    root_term[0, 5] = True
    root_trunc[1, 8] = True
    agent_term = root_term.unsqueeze(-2).expand(n_envs, steps, n_agents, 1).clone()
    if group_flags:  # PettingZoo: agent 1 alone terminates at step 3 of env 1, which ends the env's episode there
        agent_term[1, 3, 1] = True  # (TorchRL's done_on_any for parallel envs): the others bootstrap from V(final)
        root_term[1, 3] = True
    root_done = root_term | root_trunc
    next_obs = torch.cat([obs[:, 1:], torch.randn(n_envs, 1, n_agents, obs_dim)], 1)
    next_obs[root_done.squeeze(-1)] = torch.randn(int(root_done.sum()), n_agents, obs_dim)
    nxt = {"agents": {"observation": next_obs, "reward": reward}, "done": root_done, "terminated": root_term,
           "truncated": root_trunc}
    if group_flags:
        nxt["agents"].update(terminated=agent_term, done=agent_term | root_trunc.unsqueeze(-2))
    return TensorDict({"agents": {"observation": obs}, "next": nxt}, batch_size=[n_envs, steps],
                      names=[None, "time"])


@pytest.mark.parametrize("normalize_values", [False, True], ids=["values", "normalized values"])
@pytest.mark.parametrize("group_flags", [False, True], ids=["env-wide flags (VMAS)", "per-agent flags (PettingZoo)"])
def test_per_agent_gae_matches_a_reference_loop(group_flags, normalize_values):
    from ppo_td.training import ValueNorm

    torch.manual_seed(0)
    n_envs, steps, n_agents, obs_dim, gamma, lam = 2, 13, 3, 4, 0.97, 0.9
    critic = ValueOperator(nn.Linear(obs_dim, 1), in_keys=[("agents", "observation")],
                           out_keys=[("agents", "state_value")])
    batch = _agent_batch(n_envs, steps, n_agents, obs_dim, group_flags)
    raw = batch.clone()
    gae = make_advantage(critic, LossConfig(gamma=gamma, gae_lambda=lam, normalize_values=normalize_values),
                         group="agents")
    norm = ValueNorm()  # the identity's stand-in without value normalization: values are the critic's outputs
    if normalize_values:
        gae.value_norm.update(torch.tensor([2.0, -3.0, 0.5]))  # statistics from an earlier batch
        norm.load_state_dict(gae.value_norm.state_dict())
    units = norm.denormalize if normalize_values else (lambda x: x)
    targets, values = torch.zeros(n_envs, steps, n_agents, 1), torch.zeros(n_envs, steps, n_agents, 1)
    with torch.no_grad():
        gae(batch)
        root_done = raw["next", "done"].float()
        for e in range(n_envs):
            for a in range(n_agents):
                v = units(critic.module(raw["agents", "observation"][e, :, a])).squeeze(-1)
                nv = units(critic.module(raw["next", "agents", "observation"][e, :, a])).squeeze(-1)
                if group_flags:
                    term = raw["next", "agents", "terminated"][e, :, a, 0].float()
                    done = torch.maximum(raw["next", "agents", "done"][e, :, a, 0].float(), root_done[e, :, 0])
                else:
                    term, done = raw["next", "terminated"][e, :, 0].float(), root_done[e, :, 0]
                expected = reference_gae(v, nv, raw["next", "agents", "reward"][e, :, a, 0], term, done, gamma, lam)
                torch.testing.assert_close(batch["agents", "advantage"][e, :, a, 0], expected, rtol=1e-5, atol=1e-5)
                targets[e, :, a, 0], values[e, :, a, 0] = expected + v, v
        if normalize_values:  # the loss gets targets and rollout values in the statistics' units after this batch
            norm.update(targets)
            targets, values = norm.normalize(targets), norm.normalize(values)
        torch.testing.assert_close(batch["agents", "value_target"], targets, rtol=1e-5, atol=1e-5)
        if normalize_values:
            torch.testing.assert_close(batch["agents", "state_value"], values, rtol=1e-5, atol=1e-5)


def tiny_agents(critic_scope="team", share_params=True, suite="vmas", **overrides) -> TrainConfig:
    """A few-iteration multi-agent config with small networks."""
    base = get_preset("vmas-navigation" if suite == "vmas" else "mpe-spread")
    env = dataclasses.replace(base.env, num_envs=4, **({"max_episode_steps": 20} if suite == "vmas" else {}))
    return dataclasses.replace(
        base, env=env, frames_per_batch=80, total_frames=160, eval_episodes=2,
        model=dataclasses.replace(base.model, hidden_sizes=(16, 16), critic_scope=critic_scope,
                                  share_params=share_params),
        optim=dataclasses.replace(base.optim, num_minibatches=2, update_epochs=2), **overrides)


def _one_batch(pipeline):
    batch = next(iter(pipeline.collector))
    with torch.no_grad():
        pipeline.advantage(batch)
    return batch.reshape(-1)


@pytest.mark.parametrize("scope", ["agent", "team", "state"])
def test_the_critic_never_reaches_the_policy_and_the_policy_acts_on_its_own_observation(scope):
    torch.manual_seed(0)
    config = tiny_agents(scope, share_params=False, suite="pettingzoo" if scope == "state" else "vmas")
    p = build_pipeline(config)
    batch = _one_batch(p)
    losses = p.loss(batch)
    actor_params = list(p.actor.parameters())
    critic_params = list(p.critic.parameters())
    assert not {id(q) for q in actor_params} & {id(q) for q in critic_params}
    losses["loss_critic"].backward(retain_graph=True)
    assert all(q.grad is None or not q.grad.any() for q in actor_params)
    assert any(q.grad is not None and q.grad.any() for q in critic_params)
    p.optimizer.zero_grad(set_to_none=True)
    losses["loss_objective"].backward()
    assert all(q.grad is None for q in critic_params)
    assert all(q.grad is not None for q in actor_params)

    # decentralised execution: agent 0's action distribution ignores agent 1's observation; its value does not
    # under IPPO, and does with a centralised critic
    td = batch[:5].clone()
    moved = td.clone()
    moved["agents", "observation"][:, 1] += 1.0
    params = ("logits",) if config.env.suite == "pettingzoo" else ("loc", "scale")
    with torch.no_grad():
        for key in params:
            torch.testing.assert_close(p.actor(td.clone())["agents", key][:, 0],
                                       p.actor(moved.clone())["agents", key][:, 0])
        v, v_moved = (p.critic(x.clone())["agents", "state_value"][:, 0] for x in (td, moved))
    assert torch.equal(v, v_moved) == (scope in ("agent", "state"))
    if scope == "state":
        moved["state"] += 1.0
        assert not torch.equal(v, p.critic(moved.clone())["agents", "state_value"][:, 0])
    p.collector.shutdown()


def test_shared_networks_compute_what_torchrls_multiagent_mlp_computes():
    """With shared parameters ppo_td runs one plain MLP per agent row (SharedMLP) and a centralised one once per env
    step (TeamMLP); given the same weights, TorchRL's MultiAgentMLP gives the same outputs and gradients."""
    from torchrl.modules import MultiAgentMLP

    from ppo_td.models.multiagent import SharedMLP, TeamMLP, agent_mlp

    torch.manual_seed(0)
    config = tiny_agents().model
    built = build_env(tiny_agents().env)
    desc = built.description
    built.env.close()
    x = torch.randn(5, desc.num_agents, desc.observation_size)
    for centralised, cls in ((False, SharedMLP), (True, TeamMLP)):
        ours = agent_mlp(desc.observation_size, 2, desc, config, 1.0, centralised=centralised)
        assert isinstance(ours, cls)
        theirs = MultiAgentMLP(desc.observation_size, 2, n_agents=desc.num_agents, centralized=centralised,
                               share_params=True, depth=2, num_cells=16, activation_class=torch.nn.Tanh)
        by_name = dict(theirs.named_parameters())  # "params.<layer>.weight", layers 0, 2, 4
        assert len(by_name) == len(list(ours.parameters()))
        with torch.no_grad():
            for name, q in ours.named_parameters():
                layer, kind = name.split(".")[-2:]
                assert by_name[f"params.{layer}.{kind}"].shape == q.shape
                by_name[f"params.{layer}.{kind}"].copy_(q)
        out, ref = ours(x), theirs(x)
        torch.testing.assert_close(out, ref)
        out.square().sum().backward()
        ref.square().sum().backward()
        for name, q in ours.named_parameters():
            layer, kind = name.split(".")[-2:]
            torch.testing.assert_close(q.grad, by_name[f"params.{layer}.{kind}"].grad)
        if centralised:  # one pass over the concatenated observations per env step, read by every agent
            torch.testing.assert_close(out, ours.net(x.flatten(-2)).unsqueeze(-2).expand_as(out))


def test_shared_and_per_agent_parameters():
    shared = build_pipeline(tiny_agents(share_params=True))
    own = build_pipeline(tiny_agents(share_params=False))
    n_shared = sum(q.numel() for q in shared.actor.parameters())
    n_own = sum(q.numel() for q in own.actor.parameters())
    # three agents: three copies of each layer
    assert n_own == 3 * n_shared
    for p in (shared, own):
        p.collector.shutdown()


def test_multiagent_training_runs_logs_per_agent_returns_and_evaluates():
    torch.manual_seed(0)
    result = train(tiny_agents())
    assert [h["frames"] for h in result.history] == [80, 160]
    assert all(h["episodes"] > 0 for h in result.history)  # 20-step episodes end in every 20-step batch
    assert len(result.eval_returns) == 2 and len(result.eval_returns_sampled) == 2
    assert all(torch.isfinite(torch.tensor(result.eval_returns)))


def test_pettingzoo_training_runs():
    torch.manual_seed(0)
    result = train(tiny_agents(suite="pettingzoo"))
    assert result.history[-1]["frames"] == 160
    assert len(result.eval_returns) == 2


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="multi-agent env"):  # a multi-agent env under a one-agent config
        from torchrl.envs.libs.vmas import VmasEnv

        build_pipeline(dataclasses.replace(get_preset("cartpole"), env=EnvConfig("CartPole-v1", num_envs=2)),
                       env=VmasEnv("navigation", num_envs=2, n_agents=2))
    with pytest.raises(ValueError, match="expects a multi-agent env"):  # a one-agent env under a multi-agent one
        build_pipeline(tiny_agents(), env=build_env(EnvConfig("CartPole-v1", num_envs=4)).env)
    with pytest.raises(ValueError, match="not a VMAS scenario"):
        build_env(EnvConfig("navigatoin", suite="vmas", num_envs=2, max_episode_steps=10))
    with pytest.raises(ValueError, match="env.max_episode_steps"):
        EnvConfig("navigation", suite="vmas", num_envs=2)
    with pytest.raises(ValueError, match=r"env.kwargs sets \['max_steps'\]"):
        build_env(EnvConfig("navigation", suite="vmas", num_envs=2, max_episode_steps=10, kwargs=("max_steps=5",)))
    with pytest.raises(ValueError, match="no parallel_env"):
        build_env(EnvConfig("mpe2", suite="pettingzoo", num_envs=2))
    with pytest.raises(ValueError, match=r"group 'all' .* have different spaces.*--env.groups"):  # one group for
        build_env(EnvConfig("mpe2.simple_adversary_v3", suite="pettingzoo", num_envs=2,  # agents that differ
                            groups=("all=adversary_0,agent_0,agent_1",)))
    with pytest.raises(ValueError, match=r"\['agent_1'\] in no group"):
        build_env(EnvConfig("mpe2.simple_adversary_v3", suite="pettingzoo", num_envs=2,
                            groups=("a=adversary_0", "b=agent_0")))
    with pytest.raises(ValueError, match=r"no agents \['agent_9'\] in the env"):
        build_env(EnvConfig("simple_tag", suite="vmas", num_envs=2, max_episode_steps=10,
                            groups=("a=adversary_0,adversary_1,adversary_2", "b=agent_0,agent_9")))
    with pytest.raises(ValueError, match="env.groups"):
        EnvConfig("navigation", suite="vmas", max_episode_steps=10, groups=("agents",))
    with pytest.raises(ValueError, match="global state"):
        build_pipeline(tiny_agents("state"))  # VMAS has none
    with pytest.raises(ValueError, match="env.normalize_observations"):
        EnvConfig("navigation", suite="vmas", normalize_observations=True)
    with pytest.raises(ValueError, match="collector.backend"):
        dataclasses.replace(tiny_agents(), collector=dataclasses.replace(get_preset("cartpole").collector,
                                                                          backend="process"))
    with pytest.raises(ValueError, match="model.recurrent"):
        dataclasses.replace(tiny_agents(), model=ModelConfig(recurrent="lstm"),
                            optim=OptimConfig(num_minibatches=2))
    with pytest.raises(ValueError, match="one width"):
        build_pipeline(dataclasses.replace(tiny_agents(), model=ModelConfig(hidden_sizes=(32, 16),
                                                                            share_params=False)))


def masked_pick(**overrides) -> TrainConfig:
    """The masked cooperative task of tests/masked_pick.py: 2 agents, per-agent masks in info, agent 0 done first."""
    base = get_preset("mpe-spread")
    return dataclasses.replace(
        base, env=EnvConfig("masked_pick", suite="pettingzoo", num_envs=4), frames_per_batch=4 * 32,
        total_frames=4 * 32 * 20, eval_episodes=4,
        model=dataclasses.replace(base.model, hidden_sizes=(32, 32)),
        loss=dataclasses.replace(base.loss, gamma=0.9, entropy_coeff=0.0),
        optim=dataclasses.replace(base.optim, lr=3e-3, update_epochs=4, num_minibatches=2), **overrides)


def test_per_agent_masks_reach_the_policy():
    env = build_env(masked_pick().env, seed=0)
    desc = env.description
    assert desc.action_mask and desc.num_agents == 2 and desc.action_kind == "discrete"
    p = build_pipeline(masked_pick())
    batch = next(iter(p.collector))  # the env raises on an illegal pick: 128 steps of two agents, none illegal
    mask = batch["agents", "action_mask"]
    assert mask.shape == (4, 32, 2, 4) and not mask.all()
    picked = mask.gather(-1, batch["agents", "action"].unsqueeze(-1))
    assert picked.all()
    p.collector.shutdown()


@pytest.mark.parametrize("scope", ["team", "agent"])
def test_masked_cooperative_agents_learn(scope):
    """A CI-sized learning test: both agents learn to pick their target among the legal actions (random legal
    picks score about 0.4 per step; 5 steps per episode, as agent 0 leaves after 5)."""
    torch.manual_seed(0)
    config = masked_pick(seed=3)
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, critic_scope=scope))
    result = train(config)
    first, last = result.history[0]["episode_return"], result.history[-1]["episode_return"]
    assert first < 3.5, first
    assert last >= 4.5, (first, last)
    assert min(result.eval_returns) >= 4.8, result.eval_returns
    if scope == "team":
        _trained_policy_plays_pettingzoo(result.pipeline)


def _trained_policy_plays_pettingzoo(pipeline):
    """The trained group's AgentsPolicy on the env as PettingZoo gives it (dicts per agent, masks from each agent's
    info): the actions the actor takes in evaluation, legal (the env raises otherwise), and as good."""
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from ppo_td.deploy import AgentsPolicy, policy_of

    policy = policy_of(pipeline)
    assert isinstance(policy, AgentsPolicy) and policy.agents == ["agent_0", "agent_1"]
    env = policy.make_env()
    rewards, steps = 0.0, 0
    for episode in range(3):
        observations, infos = env.reset(seed=episode)
        ended = False
        while not ended:  # until the first agent leaves, as TorchRL ends the episode in training
            masks = {a: infos[a]["action_mask"] for a in observations}
            actions = policy(observations, action_mask=masks)
            assert set(actions) == set(observations) and all(isinstance(a, int) for a in actions.values())
            if len(observations) == 2:  # as evaluation: the actor in deterministic mode on the group's entries
                td = TensorDict({"agents": TensorDict({
                    "observation": torch.as_tensor(np.stack([observations[a] for a in policy.agents]))[None],
                    "action_mask": torch.as_tensor(np.stack([masks[a] for a in policy.agents])).bool()[None]},
                    batch_size=[1, 2])}, batch_size=[1])
                with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
                    expected = pipeline.actor(td)["agents", "action"][0].tolist()
                assert [actions[a] for a in policy.agents] == expected
            observations, reward, terminated, truncated, infos = env.step(actions)
            rewards += sum(reward.values()) / len(reward)
            steps += 1
            ended = any(terminated.values()) or any(truncated.values())
    assert rewards / steps >= 0.8, rewards / steps  # a random legal policy scores about 0.4 per step
    # an agent that has left is absent: the others act as they would beside it (decentralised execution)
    both = policy({"agent_0": np.eye(4, dtype=np.float32)[1], "agent_1": np.eye(4, dtype=np.float32)[2]},
                  action_mask={"agent_0": np.ones(4), "agent_1": np.ones(4)})
    assert policy({"agent_1": np.eye(4, dtype=np.float32)[2]}, action_mask={"agent_1": np.ones(4)}) == {
        "agent_1": both["agent_1"]}
    with pytest.raises(ValueError, match="not agents of this policy's group"):
        policy({"agent_7": np.zeros(4, np.float32)}, action_mask={"agent_7": np.ones(4)})
    with pytest.raises(ValueError, match=r"action masks; none given for \['agent_0'\]"):
        policy({"agent_0": np.zeros(4, np.float32)})
    with pytest.raises(ValueError, match="expects observations of 4 values"):
        policy({"agent_0": np.zeros(5, np.float32)}, action_mask={"agent_0": np.ones(4)})
    with pytest.raises(ValueError, match="allows no action"):
        policy({"agent_0": np.zeros(4, np.float32)}, action_mask={"agent_0": np.zeros(4)})


def test_cli_trains_resumes_and_evaluates_a_multiagent_run(tmp_path, capsys):
    import json

    import ppo_td
    from ppo_td.cli import main
    from ppo_td.training.loop import StopTraining

    def stop_after_first(metrics, pipeline):
        if metrics["iteration"] == 1:
            raise StopTraining

    config = dataclasses.replace(tiny_agents(), total_frames=240)
    result = ppo_td.train(config, run_dir=str(tmp_path), callbacks=[stop_after_first])
    assert result.stopped and not (tmp_path / "summary.json").exists()
    assert main(["train", "--resume", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "fresh episodes" in out  # TorchRL's Collector steps it: not bit-exact, and it says so
    assert "deterministic evaluation, reward per agent:" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["frames"] == 240 and len(summary["eval_returns"]) == 2
    assert main(["eval", str(tmp_path), "--episodes", "3"]) == 0
    assert "deterministic evaluation, reward per agent:" in capsys.readouterr().out
    assert main(["export", str(tmp_path), "--format", "torchscript"]) == 0
    printed = capsys.readouterr().out
    assert "inputs: observation float32 (batch, 3 agents, 18)\noutputs: action\n" in printed
    assert "match the policy's on 64 random inputs" in printed

    # the trained group as VMAS gives it: a list with each agent's [envs, obs] in, each agent's actions out
    policy = ppo_td.load_policy(str(tmp_path))
    env = policy.make_env(num_envs=2)
    observations = env.reset()
    actions = policy(observations)
    assert len(actions) == 3 and all(a.shape == (2, 2) for a in actions)
    torch.testing.assert_close(torch.stack(actions, -2), policy(torch.stack(observations, -2)))  # stacked
    env.step(actions)
    assert policy.agents == ["agent_0", "agent_1", "agent_2"]  # VMAS's own names
    with pytest.raises(ValueError, match="one per agent"):
        policy(observations[:2])
    with pytest.raises(ValueError, match="as a tuple"):
        policy(tuple(observations))
    with pytest.raises(ValueError, match="trained without action masks"):
        policy(observations, action_mask=[torch.ones(2, 2, dtype=torch.bool)] * 3)
    with pytest.raises(ValueError, match="observations of 18 values"):
        policy([o[:, :5] for o in observations])
    from ppo_td.deploy.video import record_video

    with pytest.raises(ValueError, match="record_video takes one-agent policies"):
        record_video(policy, tmp_path / "videos")
    assert main(["train", "--preset", "vmas-navigation", "--env.suite", "gymnasium", "--total-frames", "6000",
                 "--no-progress", "--run-dir", str(tmp_path / "wrong")]) == 2
    assert "'navigation'" in capsys.readouterr().err  # a VMAS scenario is no Gymnasium id: the message names it


def test_checkpoints_of_the_earlier_multiagent_mlp_networks_still_load(tmp_path):
    """Before SharedMLP/TeamMLP, shared-parameter networks were TorchRL's MultiAgentMLP, its weights under
    "params.<layer>": the same tensors, loaded under their new names."""
    from torchrl.modules import MultiAgentMLP

    from ppo_td.persist.checkpoint import load_weights

    assert set(dict(MultiAgentMLP(4, 2, n_agents=3, centralized=True, share_params=True, depth=2,
                                  num_cells=8).state_dict())) >= {"params.0.weight", "params.4.bias"}
    p = build_pipeline(tiny_agents())
    state = {"config": {"model": {"hidden_sizes": [16, 16]}}}
    for name in ("actor", "critic"):
        module = getattr(p, name)
        old = {k.replace("net.", "params."): v + 1 for k, v in module.state_dict().items()}  # other values
        assert old.keys() != module.state_dict().keys()
        load_weights(module, {**state, name: old}, name)
        for (key, value), before in zip(module.state_dict().items(), old.values(), strict=True):
            assert torch.equal(value, before), key
    with pytest.raises(ValueError, match="does not fit"):  # anything else is still refused
        load_weights(p.critic, {**state, "critic": {"other.weight": torch.zeros(1)}}, "critic")
    p.collector.shutdown()


# --- the fast loss on an agent group against ClipPPOLoss.forward -------------------------------------------------

GROUP_LOSS_CASES = {
    "vmas-team": lambda: tiny_agents("team"),  # a tanh-normal policy (its entropy sampled), the team critic
    "vmas-agent-per-agent-networks": lambda: tiny_agents("agent", share_params=False),  # TorchRL's MultiAgentMLP
    # per-agent masks, a discrete policy
    "masked-pick": lambda: dataclasses.replace(masked_pick(), loss=dataclasses.replace(masked_pick().loss,
                                                                                      entropy_coeff=0.01)),
    # the entropy in the loss: the gradients of scale's several uses summed in torch's order (closed forms)
    "vmas-team-entropy": lambda: _with(tiny_agents("team"), loss={"entropy_coeff": 0.01}),
    "vmas-gaussian-entropy": lambda: _with(tiny_agents("agent"), loss={"entropy_coeff": 0.01},
                                           model={"squash_actions": False}),
    "mpe-categorical-entropy": lambda: _with(tiny_agents("team", suite="pettingzoo"), loss={"entropy_coeff": 0.01}),
}


def _with(config, **parts):
    """``config`` with fields of its sub-configs replaced (``loss={"entropy_coeff": 0.01}``)."""
    return dataclasses.replace(config, **{name: dataclasses.replace(getattr(config, name), **fields)
                                          for name, fields in parts.items()})


@pytest.mark.parametrize("case", GROUP_LOSS_CASES)
def test_group_fast_loss_equals_clipppoloss_forward(case):
    """ppo_td's fast loss on a group's entries: the outputs and gradients of ClipPPOLoss.forward, and the same
    random stream after it (a tanh-normal's entropy is sampled at the same point); the update's lean terms and
    their diagnostics agree with the full outputs."""
    from ppo_td.training.objective import FastLoss, epoch_metrics, total_loss

    p = build_pipeline(GROUP_LOSS_CASES[case]())
    assert isinstance(p.loss.fast, FastLoss) and p.loss.fast.group
    minibatch = _one_batch(p)[:48]
    with torch.no_grad():  # away from the rollout's policy and values, so ratios get clipped
        for param in p.parameters:
            param.add_(0.3 * torch.randn_like(param))
    runs = {}
    for path in ("fast", "torchrl"):
        planned = p.loss.fast
        if path == "torchrl":
            p.loss.fast = None  # ClipPPOLoss.forward runs
        torch.manual_seed(7)
        try:
            out = p.loss(minibatch)
        finally:
            p.loss.fast = planned
        runs[path] = out, torch.get_rng_state(), torch.autograd.grad(total_loss(out), p.parameters)
    (fast, fast_rng, fast_grads), (ref, ref_rng, ref_grads) = runs["fast"], runs["torchrl"]
    assert list(fast.keys()) == list(ref.keys()) and float(ref["clip_fraction"]) > 0
    for key in ref.keys():
        assert torch.equal(fast[key], ref[key]), key
    assert torch.equal(fast_rng, ref_rng)
    for a, b in zip(fast_grads, ref_grads, strict=True):
        assert torch.equal(a, b)
    torch.manual_seed(7)
    loss, terms = p.loss.fast.terms(minibatch)
    zero_entropy = not float(p.loss.entropy_coeff)
    want = total_loss(fast) if not zero_entropy else fast["loss_objective"] + fast["loss_critic"]
    torch.testing.assert_close(loss, want, rtol=1e-6, atol=0)
    (metrics,) = epoch_metrics([terms], p.loss.clip_epsilon, p.loss.clip_value)
    for key, value in metrics.items():
        torch.testing.assert_close(value, fast[key].detach(), rtol=1e-5, atol=1e-6)


def test_the_doctors_checkup_sees_the_group_networks_in_the_update():
    """The fast loss calls the group's networks, not the TorchRL wrappers: the checkup audits those networks, so
    every minibatch's critic forward is seen (not only GAE's)."""
    from ppo_td.doctor import checkup

    p = build_pipeline(tiny_agents("team"))
    assert p.loss.fast is not None and p.loss.fast.group
    a = checkup(p)
    minibatches = p.config.optim.update_epochs * p.config.optim.num_minibatches
    assert a._forwards.get("critic", 0) > minibatches and a._forwards.get("actor", 0) > minibatches, a._forwards
    assert not a.findings, a.report()


# --- a trained group as a file --------------------------------------------------------------------------------------

def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


EXPORT_FORMATS = ["torchscript", "export",
                  pytest.param("onnx", marks=pytest.mark.skipif(not (_has("onnxscript") and _has("onnxruntime")),
                                                                reason="the export extra"))]


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_a_trained_group_exports_to_a_file_that_acts_as_its_policy_without_ppo_td(tmp_path, fmt):
    """VMAS with a tanh-normal (its squashed mean, clamped as TorchRL clamps it), VMAS with a clipped Gaussian and
    per-agent networks, and masked Discrete agents through PettingZoo: each file, run in a fresh process with plain
    torch or onnxruntime, gives AgentsPolicy's actions on random observations (and masks)."""

    import ppo_td
    from ppo_td.deploy.export import example_inputs, export_policy

    cases = {"tanh-normal": tiny_agents(),
             "gaussian": _with(tiny_agents("agent", share_params=False), model={"squash_actions": False}),
             "masked": masked_pick()}
    for name, config in cases.items():
        run = tmp_path / name
        ppo_td.train(dataclasses.replace(config, total_frames=config.frames_per_batch, eval_episodes=0),
                     run_dir=str(run))
        policy = ppo_td.load_policy(str(run))
        steps = [example_inputs(policy, batch=5, generator=torch.Generator().manual_seed(t)) for t in range(3)]
        steps = [(3 * obs, *mask) for obs, *mask in steps]  # beyond the tanh's linear range, and Box bounds
        expected = np.stack([policy(obs.numpy(), action_mask=mask[0].numpy() if mask else None)
                             for obs, *mask in steps])
        data = {f"in{i}": np.stack([s[i].numpy() for s in steps]) for i in range(len(steps[0]))}
        path = export_policy(policy, fmt, tmp_path / f"{name}-{fmt}{'.pt2' if fmt == 'export' else ''}")
        got = run_exported_file(fmt, path, data, tmp_path)
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=name)


def test_the_exported_group_module_acts_as_agents_policy_in_other_bounds_and_layouts():
    """The file's module against AgentsPolicy (TorchRL's actor under DETERMINISTIC) where the trained runs above do not
    go: a tanh-normal mapped into other bounds than [-1, 1] (its affine step), per-agent networks without a
    Gaussian head (masked Discrete), one agent, one row; and building it leaves torch's RNG where it was."""
    from ppo_td.deploy.agents import AgentsPolicy
    from ppo_td.deploy.export import DeterministicAgentsPolicy, example_inputs
    from ppo_td.models.multiagent import make_agent_actor

    vmas_env = build_env(tiny_agents().env, seed=0)
    masked_env = build_env(masked_pick().env, seed=0)
    bounded = dataclasses.replace(vmas_env.description, action_low=(-2.0, -0.5), action_high=(3.0, 0.5))
    single = dataclasses.replace(bounded, num_agents=1)
    vmas_env.close()
    masked_env.close()
    layouts = [(bounded, tiny_agents(share_params=False)), (bounded, tiny_agents()),
               (single, tiny_agents(share_params=False)), (masked_env.description, masked_pick())]
    for desc, config in layouts:
        torch.manual_seed(0)
        actor = make_agent_actor(desc, config.model)
        names = [f"agent_{i}" for i in range(desc.num_agents)]
        policy = AgentsPolicy(actor, config, desc, names)
        before = torch.get_rng_state()
        module = DeterministicAgentsPolicy(policy)
        assert torch.equal(before, torch.get_rng_state())
        for rows in (1, 9):
            obs, *mask = example_inputs(policy, batch=rows, generator=torch.Generator().manual_seed(rows))
            obs = 4 * obs
            expected = policy(obs, action_mask=mask[0] if mask else None, deterministic=True)
            torch.testing.assert_close(module(obs, *mask), expected, rtol=1e-5, atol=1e-5)
        if desc is bounded:
            assert module.affine and bool((expected[..., 0] > 1.0).any())  # beyond [-1, 1]: mapped into the bounds


def test_a_multi_agent_preset_pointed_at_another_env_leaves_its_env_kwargs_behind(capsys):
    """--preset mpe-spread --env.env-id mpe2.simple_tag_v3: simple_spread's N=3 is not handed to simple_tag (it
    failed inside PettingZoo with "unexpected keyword argument 'N'"); one line says so. One-agent presets keep
    theirs (Atari's frame skip holds for every game)."""
    from ppo_td.cli.parse import _for_env

    config = _for_env(get_preset("mpe-spread"), "mpe-spread", "mpe2.simple_tag_v3")
    assert config.env.kwargs == ()
    assert "starts from its own defaults" in capsys.readouterr().out
    assert _for_env(get_preset("mpe-spread"), "mpe-spread", "mpe2.simple_spread_v3").env.kwargs != ()
    assert _for_env(get_preset("atari"), "atari", "ALE/Breakout-v5").env.kwargs == get_preset("atari").env.kwargs


def test_vmas_scenarios_build_without_vmas_warnings_from_ppo_tds_arguments():
    """Every single-group VMAS scenario from the navigation preset's settings, kwargs left behind: no warning about
    unused arguments (give_way was handed n_agents=3)."""
    import io
    import warnings
    from contextlib import redirect_stdout

    pytest.importorskip("vmas")
    from ppo_td.cli.parse import _for_env

    for scenario in ("balance", "transport", "give_way", "wheel", "dispersion"):
        with redirect_stdout(io.StringIO()):
            config = _for_env(get_preset("vmas-navigation"), "vmas-navigation", scenario)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build_env(dataclasses.replace(config.env, env_id=scenario, num_envs=2), seed=0).close()
        assert not [w for w in caught if "kwargs" in str(w.message) or "unused" in str(w.message).lower()], scenario


def test_a_pettingzoo_env_missing_a_library_names_its_install():
    import importlib.util

    if importlib.util.find_spec("pymunk") is not None:
        pytest.skip("pymunk is installed here")
    with pytest.raises(ValueError, match="needs pymunk, which is not installed: pip install pymunk"):
        build_env(EnvConfig("pettingzoo.butterfly.pistonball_v6", suite="pettingzoo", num_envs=1))


_USER_PZ = '''
from mpe2 import simple_spread_v3


def parallel_env(**kwargs):
    return simple_spread_v3.parallel_env(N=2, max_cycles=10, **kwargs)


def make():
    return simple_spread_v3.parallel_env(N=2, max_cycles=10)


def make_turns():
    return simple_spread_v3.env(N=2, max_cycles=10)
'''


def test_a_pettingzoo_env_of_the_users_folder_as_a_module_or_a_factory_and_turn_based_ones_refused(tmp_path,
                                                                                                  monkeypatch):
    """A module next to the user's script is found as Gymnasium's module:EnvId is, by its parallel_env or a
    module:function; the preset's env.kwargs a factory does not take, and an AEC env, are refused in one line."""
    import sys

    import ppo_td

    module = f"user_pz_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{module}.py").write_text(_USER_PZ)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for env_id in (module, f"{module}:make"):
        config = tiny_agents(suite="pettingzoo")
        config = dataclasses.replace(config, env=dataclasses.replace(config.env, env_id=env_id, kwargs=()))
        result = ppo_td.train(config, run_dir=str(tmp_path / env_id.replace(":", "-")))
        assert result.history[-1]["frames"] == 160 and len(result.eval_returns) == 2
        policy = ppo_td.load_policy(str(tmp_path / env_id.replace(":", "-")))  # rebuilt by the same maker
        observations, _ = getattr(sys.modules[module], env_id.partition(":")[2] or "parallel_env")().reset(seed=0)
        assert set(policy(observations)) == set(observations)
    made = sys.modules[module]
    with pytest.raises(ValueError, match=r"make\(N=3, max_cycles=25\) does not fit: .*env.kwargs are passed to"):
        ppo_td.train(tiny_agents(suite="pettingzoo"), env=made.make)
    turns = tiny_agents(suite="pettingzoo")
    turns = dataclasses.replace(turns, env=dataclasses.replace(turns.env, env_id=f"{module}:make_turns", kwargs=()))
    with pytest.raises(ValueError, match=r"turn-based PettingZoo env \(AECEnv.*aec_to_parallel"):
        train(turns)
    missing = dataclasses.replace(turns, env=dataclasses.replace(turns.env, env_id=f"{module}:nothing"))
    with pytest.raises(ValueError, match=r"has no nothing function"):
        train(missing)
