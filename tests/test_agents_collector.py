"""ppo_td's agents collector against TorchRL's Collector on VMAS: the same batches bit for bit (every key, dtype,
shape and batch size), the same random stream after them, over truncations, partial resets after terminations and
per-agent networks; and where the pipeline uses it, falls back, or refuses."""

import dataclasses

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.envs import RewardScaling
from torchrl.modules import ProbabilisticActor

from ppo_td.collect import AgentsCollector, FastUnsupported, make_collector
from ppo_td.config import CollectorConfig
from ppo_td.envs import build_env
from ppo_td.models.multiagent import GroupPolicy, make_agent_actor
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline

pytest.importorskip("vmas")

CASES = {
    # every copy's episode ends together, by the episode limit: full resets
    "navigation, truncations": dict(env_id="navigation", max_episode_steps=7, share_params=True),
    # the package falls at different times in each copy: terminations, partial resets, truncations of some copies
    # while others go on, and (with this seed and limit) a copy terminated at the very step its episode is truncated;
    # per-agent networks
    "balance, partial resets": dict(env_id="balance", max_episode_steps=38, share_params=False, kwargs=()),
    # Discrete actions (VMAS's action indices)
    "navigation, discrete": dict(env_id="navigation", max_episode_steps=7, share_params=True,
                                 kwargs=("continuous_actions=False",)),
}


def _batches(config, actor, fast, batches=3):
    torch.manual_seed(5)
    env = build_env(config.env, seed=1)
    frames = config.frames_per_batch
    if fast:
        collector = AgentsCollector(env, actor, frames, frames * batches)
    else:
        collector = Collector(env.env, actor, frames_per_batch=frames, total_frames=frames * batches,
                              auto_register_policy_transforms=False)
    out = list(collector)
    collector.shutdown()
    return out, torch.get_rng_state()


def test_agents_collector_writes_torchrls_batches_of_several_groups_bit_for_bit():
    """VMAS's simple_tag (adversaries and an agent, each group its own policy, sampled in the groups' order, per-agent
    networks for one group's width): the same batches and random stream as TorchRL's Collector over the team actor."""
    from ppo_td.models import make_actor_critic

    base = get_preset("vmas-tag")
    config = dataclasses.replace(
        base, env=dataclasses.replace(base.env, num_envs=4, max_episode_steps=9), frames_per_batch=200,
        optim=dataclasses.replace(base.optim, num_minibatches=2),
        model=dataclasses.replace(base.model, hidden_sizes=(32, 32), share_params=False))
    torch.manual_seed(0)
    env = build_env(config.env, seed=1)
    actor, _ = make_actor_critic(env.description, config.model)
    env.close()
    theirs, their_rng = _batches(config, actor, fast=False)
    ours, our_rng = _batches(config, actor, fast=True)
    for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        assert set(a.keys(True, True)) == set(b.keys(True, True)), f"batch {i}"
        assert a["adversary"].batch_size == b["adversary"].batch_size == torch.Size([4, 50, 3])
        assert a["agent"].batch_size == b["agent"].batch_size == torch.Size([4, 50, 1])
        for key in a.keys(True, True):
            x, y = a[key], b[key]
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f"batch {i}, {key}"
    assert torch.equal(their_rng, our_rng)
    assert torch.cat([b["next", "truncated"] for b in theirs], 1).any()  # episodes ended inside the batches
    p = build_pipeline(dataclasses.replace(config, total_frames=400))
    assert isinstance(p.collector, AgentsCollector) and p.collector.groups == ["adversary", "agent"]


@pytest.mark.parametrize("case", list(CASES))
def test_agents_collector_writes_torchrls_batches_bit_for_bit(case):
    spec = CASES[case]
    base = get_preset("vmas-navigation")
    config = dataclasses.replace(
        base, env=dataclasses.replace(base.env, env_id=spec["env_id"], num_envs=4,
                                      kwargs=spec.get("kwargs", base.env.kwargs),
                                      max_episode_steps=spec["max_episode_steps"]),
        frames_per_batch=200, optim=dataclasses.replace(base.optim, num_minibatches=2),
        model=dataclasses.replace(base.model, hidden_sizes=(32, 32), share_params=spec["share_params"]))
    torch.manual_seed(0)
    env = build_env(config.env, seed=1)
    actor = make_agent_actor(env.description, config.model)
    env.close()
    theirs, their_rng = _batches(config, actor, fast=False)
    ours, our_rng = _batches(config, actor, fast=True)
    for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        assert set(a.keys(True, True)) == set(b.keys(True, True)), f"batch {i}"
        assert a.batch_size == b.batch_size and a.names == b.names
        agents = a["agents", "observation"].shape[2]
        assert a["agents"].batch_size == b["agents"].batch_size == torch.Size([4, 50, agents])
        for key in a.keys(True, True):
            x, y = a[key], b[key]
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), f"batch {i}, {key}"
    assert torch.equal(their_rng, our_rng)  # the same draws, in the same order
    done = torch.cat([batch["next", "done"] for batch in theirs], 1).squeeze(-1)  # [envs, steps]
    ends = done.sum(0)
    if case.startswith("balance"):  # the case exercised what it is for
        terminated = torch.cat([b["next", "terminated"] for b in theirs], 1).squeeze(-1)
        truncated = torch.cat([b["next", "truncated"] for b in theirs], 1).squeeze(-1)
        partial = (truncated.sum(0) > 0) & (truncated.sum(0) < 4)
        assert ((ends > 0) & (ends < 4)).any() and partial.any() and (terminated & truncated).any()
    else:
        assert ((ends == 0) | (ends == 4)).all() and ends.sum() >= 4 * 20


def _tiny(**collector):
    base = get_preset("vmas-navigation")
    return dataclasses.replace(base, env=dataclasses.replace(base.env, num_envs=4, max_episode_steps=20),
                               frames_per_batch=80, total_frames=160,
                               optim=dataclasses.replace(base.optim, num_minibatches=2),
                               model=dataclasses.replace(base.model, hidden_sizes=(16, 16)),
                               collector=CollectorConfig(**collector))


def test_the_pipeline_steps_vmas_with_the_agents_collector_and_falls_back_where_it_cannot():
    pipeline = build_pipeline(_tiny())
    assert isinstance(pipeline.collector, AgentsCollector)
    batch = next(iter(pipeline.collector))
    assert batch["agents", "action"].shape == (4, 20, 3, 2)
    pipeline.collector.shutdown()
    assert type(build_pipeline(_tiny(step_loop="torchrl")).collector) is Collector

    config = _tiny()  # a transform of the user's own: TorchRL's Collector runs it (or step_loop='fast' says why not)
    env = build_env(config.env, seed=0)
    env.env.append_transform(RewardScaling(loc=0.0, scale=2.0, in_keys=[("agents", "reward")]))
    actor = make_agent_actor(env.description, config.model)
    assert type(make_collector(env, actor, config)) is Collector
    with pytest.raises(FastUnsupported, match="collector.step_loop='fast'.*RewardScaling"):
        make_collector(env, actor, dataclasses.replace(config, collector=CollectorConfig(step_loop="fast")))
    with pytest.raises(ValueError, match="collector.inference='numpy'.*agent group's policy samples in torch"):
        dataclasses.replace(config, collector=CollectorConfig(inference="numpy"))
    pettingzoo = get_preset("mpe-spread")
    with pytest.raises(ValueError, match="step_loop='fast'.*PettingZoo"):
        dataclasses.replace(pettingzoo, collector=CollectorConfig(step_loop="fast"))


def test_a_transform_added_after_building_is_not_skipped():
    pipeline = build_pipeline(_tiny())
    next(iter(pipeline.collector))
    pipeline.env.append_transform(RewardScaling(loc=0.0, scale=2.0, in_keys=[("agents", "reward")]))
    with pytest.raises(FastUnsupported, match="transforms changed after the agents collector was built"):
        next(iter(pipeline.collector))


def test_the_agents_collector_refuses_what_it_does_not_run():
    config = _tiny()
    env = build_env(config.env, seed=0)
    actor = make_agent_actor(env.description, config.model)
    dist = actor.module[1]

    def rebuilt(**kwargs):
        return ProbabilisticActor(actor.module[0], in_keys=dict(zip(dist.dist_keys, dist.in_keys, strict=True)),
                                  out_keys=[("agents", "action")], distribution_class=dist.distribution_class,
                                  distribution_kwargs=dist.distribution_kwargs, return_log_prob=True, **kwargs)

    collector = AgentsCollector(env, rebuilt(log_prob_key=("agents", "action_log_prob")), 80, 160)
    assert isinstance(collector.policies["agents"],
                      GroupPolicy)  # as make_agent_actor builds it
    with pytest.raises(FastUnsupported, match="writes entries of group 'agents'"):  # its log-prob at the root
        AgentsCollector(env, rebuilt(log_prob_key="sample_log_prob"), 80, 160)
    with pytest.raises(FastUnsupported, match="projects its actions into a spec: True"):  # TorchRL's safe projection
        AgentsCollector(env, rebuilt(log_prob_key=("agents", "action_log_prob"), safe=True,
                                     spec=env.env.full_action_spec[("agents", "action")]), 80, 160)
    with pytest.raises(FastUnsupported, match="not a VMAS env"):
        AgentsCollector(env.env, actor, 80, 160)
    with pytest.raises(FastUnsupported, match="make_agent_actor"):
        AgentsCollector(env, torch.nn.Linear(18, 4), 80, 160)
    with pytest.raises(ValueError, match="multiple of the 4 env copies"):
        AgentsCollector(env, actor, 82, 164)
