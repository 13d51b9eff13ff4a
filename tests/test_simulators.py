"""Batched simulators as env sources (ppo_td.envs.simulators): a TorchRL factory with a num_envs parameter makes
the whole batch (ppo_td passes env.num_envs, the training's and the evaluation's), an annotated one is not made to
see what it returns; Brax on JAX's CPU backend at a small batch (skipped without JAX): ppo_td's BraxBatch (its own
auto-reset, checked against the pendulum's end condition; seeded) and TorchRL's BraxEnv (its simulator state kept out
of the stored batches)."""

import dataclasses

import pytest
import torch
import torchrl_factories
from torchrl.envs.libs.gym import GymEnv

import ppo_td
from ppo_td.collect import EnvLoopCollector
from ppo_td.config import EnvConfig, ModelConfig
from ppo_td.training import build_pipeline

torch.set_num_threads(1)


def small(env: EnvConfig, frames: int = 256) -> ppo_td.TrainConfig:
    base = ppo_td.get_preset("pendulum")
    return dataclasses.replace(base, env=env, frames_per_batch=frames, total_frames=2 * frames, eval_episodes=3,
                               model=ModelConfig(hidden_sizes=(16,)),
                               optim=dataclasses.replace(base.optim, num_minibatches=4, update_epochs=2))


def test_a_factory_with_num_envs_makes_the_whole_batch():
    torchrl_factories.BUILT.clear()
    config = small(EnvConfig("torchrl_factories:batched_pendulums", num_envs=8, max_episode_steps=50,
                             kwargs=("length=1.0",)))
    result = ppo_td.train(config, progress=False)
    env = result.pipeline.env.base_env
    assert isinstance(env, GymEnv) and list(env.batch_size) == [8]  # one env of 8, no SerialEnv of copies
    # made for training (8) and for the final evaluation's 3 episodes; never made only to look at
    assert torchrl_factories.BUILT[0] == 8 and 3 in torchrl_factories.BUILT and 1 not in torchrl_factories.BUILT
    with pytest.raises(ValueError, match=r"env.kwargs num_envs=4: ppo_td passes env.num_envs to batched_pendulums "
                                         r".* give it as --env.num-envs instead"):
        ppo_td.train(dataclasses.replace(config, env=dataclasses.replace(config.env, kwargs=("num_envs=4",))),
                     progress=False)


def test_a_factory_without_an_annotation_is_looked_at_with_one_copy():
    config = small(EnvConfig("torchrl_factories:unannotated_pendulums", num_envs=4, max_episode_steps=50), frames=64)
    result = ppo_td.train(dataclasses.replace(config, total_frames=64), progress=False)
    assert list(result.pipeline.env.base_env.batch_size) == [4]


@pytest.mark.parametrize("clip", [True, False])
def test_a_torchrl_env_gets_its_actions_clipped_as_env_clip_actions_says(clip):
    """env.clip_actions for a TorchRL env with bounded Box actions: the env receives them within its bounds, the
    batch keeps them as sampled (and their log-probabilities); False sends them as sampled."""
    torchrl_factories.ActionsSeen.actions.clear()
    config = small(EnvConfig("torchrl_factories:recorded_pendulums", num_envs=4, max_episode_steps=50,
                             clip_actions=clip), frames=64)
    config = dataclasses.replace(config, model=ModelConfig(hidden_sizes=(16,), log_std_init=1.5))  # std 4.5
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
        p.env.close()
    seen = torch.cat(torchrl_factories.ActionsSeen.actions)
    assert batch["action"].abs().max() > 2.0  # sampled past Pendulum's bounds of +-2
    assert (seen.abs().max() <= 2.0) == clip


@pytest.mark.slow
def test_brax_trains_on_jax_cpu_with_its_own_batch(tmp_path):
    pytest.importorskip("brax")
    config = small(EnvConfig("ppo_td.envs.simulators:brax_batch", num_envs=8, max_episode_steps=100,
                             kwargs=("env_name='inverted_pendulum'",)), frames=128)
    p = build_pipeline(config)
    try:
        assert isinstance(p.collector, EnvLoopCollector) and list(p.env.base_env.batch_size) == [8]
        batch = next(iter(p.collector))
        assert batch["observation"].shape == (8, 16, 4)
    finally:
        p.collector.shutdown()
        p.env.close()
    result = ppo_td.train(config, run_dir=str(tmp_path / "run"), progress=False)
    assert len(result.eval_returns) == 3 and all(torch.isfinite(torch.tensor(result.eval_returns)))


@pytest.mark.slow
def test_torchrls_brax_env_trains_with_its_state_kept_out_of_the_batches():
    pytest.importorskip("brax")
    config = small(EnvConfig("ppo_td.envs.simulators:brax", num_envs=8, max_episode_steps=100,
                             kwargs=("env_name='inverted_pendulum'",)), frames=128)
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
        assert "state" in p.env.base_env.observation_spec.keys()  # Brax's pipeline state, which the env reads back
        assert "state" not in batch.keys() and ("next", "state") not in batch.keys(True)  # kept out of the batch
        assert batch["observation"].shape == (8, 16, 4)
    finally:
        p.collector.shutdown()
        p.env.close()


def _pendulums(seed: int, limit: int = 10):
    from torchrl.envs import StepCounter, TransformedEnv

    from ppo_td.envs.simulators import BraxBatch

    env = TransformedEnv(BraxBatch("inverted_pendulum", num_envs=8), StepCounter(max_steps=limit))
    env.set_seed(seed)
    return env


@pytest.mark.slow
def test_brax_batch_resets_ended_copies_in_its_step_and_cut_ones_when_asked():
    """Brax's inverted pendulum ends when the pole passes 0.2 rad (observation 1) and starts within 0.01 of zero:
    an ended copy's ("next", "observation") is where it ended, its next observation a fresh start; a copy cut by
    the time limit starts afresh too; the others go on where they were."""
    pytest.importorskip("brax")
    env = _pendulums(seed=3)
    torch.manual_seed(0)
    td, ended_seen, cut_seen = env.reset(), 0, 0
    assert td["observation"].abs().max() <= 0.0101
    for _ in range(150):
        td["action"] = torch.rand(8, 1) * 2 - 1
        stepped, td = env.step_and_maybe_reset(td)
        ended = stepped["next", "terminated"].reshape(8)
        cut = stepped["next", "truncated"].reshape(8) & ~ended
        last, now = stepped["next", "observation"], td["observation"]
        assert (last[ended, 1].abs() > 0.2).all()  # the ended episode's last observation
        assert (now[ended | cut].abs() <= 0.0101).all()  # a fresh start (within Brax's reset noise)
        going = ~(ended | cut)
        assert torch.equal(now[going], last[going]) and not (last[going, 1].abs() > 0.2).any()
        ended_seen, cut_seen = ended_seen + int(ended.sum()), cut_seen + int(cut.sum())
    assert ended_seen > 0 and cut_seen > 0  # both ways out happened
    env.close()


@pytest.mark.slow
def test_brax_batch_is_seeded():
    pytest.importorskip("brax")
    runs, env = [], _pendulums(seed=0)
    for seed in (3, 3, 4):
        env.set_seed(seed)
        td, seen, torch_rng = env.reset(), [], torch.Generator().manual_seed(0)
        for _ in range(40):
            td["action"] = torch.rand(8, 1, generator=torch_rng) * 2 - 1
            stepped, td = env.step_and_maybe_reset(td)
            seen.append(td["observation"])
        runs.append(torch.stack(seen))
    env.close()
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])


def test_a_run_recorded_before_torchrl_clipping_is_rebuilt_without_it():
    from ppo_td.config import from_dict, identity_dict, to_dict

    config = small(EnvConfig("torchrl_factories:recorded_pendulums", num_envs=4, max_episode_steps=50), frames=64)
    old = to_dict(config)
    del old["env"]["clip_torchrl_actions"]  # a record written before the field existed
    assert from_dict(old).env.clip_torchrl_actions is False and config.env.clip_torchrl_actions is True
    assert identity_dict(from_dict(old)) == identity_dict(config)  # the same config to a store or a study


def test_brax_batch_refuses_a_device_jax_does_not_have():
    jax = pytest.importorskip("jax")
    from ppo_td.envs.simulators import _jax_device

    assert _jax_device(jax, torch.device("cpu")).platform == "cpu"
    if not any(d.platform == "gpu" for d in jax.devices()):
        with pytest.raises(ValueError, match=r"device='cuda': JAX has no gpu device 0 here .* or pass device='cpu'"):
            _jax_device(jax, torch.device("cuda"))
