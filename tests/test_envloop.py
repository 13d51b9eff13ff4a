"""ppo_td's env loop (:class:`~ppo_td.collect.EnvLoopCollector`): any one-agent TorchRL env stepped by its own
public ``step_and_maybe_reset`` without ``Collector``'s machinery, ``Collector``'s batches bit for bit."""

import dataclasses

import pytest
import torch
from test_fast import _assert_same, _collect

from conftest import small_config
from ppo_td.collect import EnvLoopCollector, FastCollector, FastUnsupported
from ppo_td.config import EnvConfig, ModelConfig
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline

torch.set_num_threads(1)


def _pendulum(env_id, **env):
    base = get_preset("pendulum")
    return dataclasses.replace(base, env=EnvConfig(env_id, num_envs=2, max_episode_steps=30, **env),
                               frames_per_batch=64, total_frames=256, eval_episodes=2,
                               model=ModelConfig(hidden_sizes=(16,)),
                               optim=dataclasses.replace(base.optim, num_minibatches=4))


CASES = {
    # an unbatched TorchRL GymEnv from a factory: ppo_td makes the copies (SerialEnv), episodes cut at 30 steps
    "torchrl-factory": _pendulum("torchrl_factories:gym_pendulum"),
    # TorchRL's PPO tutorial's env: its own ObservationNorm (initialized by ppo_td), DoubleToFloat, StepCounter
    "tutorial": _pendulum("torchrl_factories:tutorial_pendulum"),
    # a Gymnasium env with TorchRL's ObservationNorm: the fast collector runs it (its own affine map)
    "gym-with-observation-norm": _pendulum("Pendulum-v1", normalize_rewards=True, transforms=(
        "torchrl.envs:ObservationNorm in_keys=['observation'] standard_normal=True",)),
    # the same with one copy: the fast collector steps it directly, on numpy arrays
    "gym-one-copy-with-observation-norm": dataclasses.replace(_pendulum("Pendulum-v1"), env=EnvConfig(
        "Pendulum-v1", num_envs=1, max_episode_steps=30,
        transforms=("torchrl.envs:ObservationNorm in_keys=['observation'] standard_normal=True",))),
    # a TorchRL transform the fast collector does not run (RewardScaling) on a Gymnasium env: the env loop;
    # discrete actions, a shared trunk (V(s) recorded as it goes)
    "cartpole-shared": dataclasses.replace(small_config(), model=ModelConfig(hidden_sizes=(16,), shared_trunk=True),
                                           env=EnvConfig("CartPole-v1", num_envs=3, max_episode_steps=20,
                                                         transforms=("torchrl.envs:RewardScaling loc=0.0 scale=2.0",
                                                                     )),
                                           frames_per_batch=60, total_frames=240),
    # a gSDE actor on a TorchRL env from a factory: its noise transform stepped by the env's own step, the actor
    # sampled on plain tensors with each copy's matrix
    "torchrl-factory-gsde": dataclasses.replace(_pendulum("torchrl_factories:gym_pendulum"), model=ModelConfig(
        hidden_sizes=(16,), exploration="gsde", log_std_init=-1.0, sde_sample_every=5)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_env_loop_writes_collectors_batches_bit_for_bit(case):
    config = CASES[case]
    torch.manual_seed(3)
    kind, loop, loop_state = _collect(config, "auto", 3)
    torch.manual_seed(3)
    reference_kind, reference, reference_state = _collect(config, "torchrl", 3)
    assert kind is (FastCollector if case.startswith("gym-") else EnvLoopCollector)
    assert reference_kind.__name__ == "Collector"
    critic = build_pipeline(config).critic  # the same seed's weights: V(s) the shared trunk recorded as it went
    for a, b in zip(loop, reference, strict=True):
        if ("collector", "state_value") in a.keys(True):
            recorded = a.pop(("collector", "state_value"))
            torch.testing.assert_close(recorded, critic(a.clone())["state_value"], rtol=1e-6, atol=1e-6)
        _assert_same(a, b)
    assert torch.equal(loop_state["rng"], reference_state["rng"])  # the same draws from torch's generator


def test_an_unbatched_env_or_a_recurrent_policy_is_left_to_torchrls_collector():
    from torchrl.envs.libs.gym import GymEnv

    config = CASES["torchrl-factory"]
    p = build_pipeline(config)
    with pytest.raises(FastUnsupported, match="one batch dimension"):
        EnvLoopCollector(GymEnv("Pendulum-v1"), p.actor, 64, 256)
    p.collector.shutdown()
    recurrent = dataclasses.replace(config, model=dataclasses.replace(config.model, recurrent="lstm"),
                                    optim=dataclasses.replace(config.optim, sequence_length=8, num_minibatches=2))
    p = build_pipeline(recurrent)
    assert type(p.collector).__name__ == "Collector"
    p.collector.shutdown()


def test_an_unbatched_env_object_trains_as_a_batch_of_one_and_more_copies_are_refused_naming_the_factory_way():
    """TorchRL's tutorial env as an object (its ObservationNorm uninitialized): env.num_envs=1 trains it on the env
    loop and evaluates on it; more copies are refused with the way that makes them (a function, not TransformedEnv)."""
    import ppo_td
    from examples.torchrl_envs import tutorial_env

    one = dataclasses.replace(CASES["tutorial"], env=EnvConfig("Pendulum-v1", num_envs=1), frames_per_batch=64,
                              total_frames=128)
    result = ppo_td.train(one, env=tutorial_env("Pendulum-v1"))
    assert type(result.pipeline.collector) is EnvLoopCollector
    assert result.history[-1]["frames"] == 128 and len(result.eval_returns) == 2
    with pytest.raises(ValueError, match=r"TransformedEnv is unbatched.*env.num_envs=2 copies.*def make_env\(\): "
                                         r"return TransformedEnv\(\.\.\.\); train\(config, env=make_env\)"):
        ppo_td.train(CASES["tutorial"], env=tutorial_env("Pendulum-v1"))


def test_a_torchrl_envs_statistics_are_computed_once_per_build_not_per_copy():
    """The end-of-run stall of issue 44: the final evaluation made 10 copies, each computing its ObservationNorm
    statistics from 1,000 random steps (11.5 s after the last iteration, 2.4 s once per build, measured
    2026-11-28). ppo_td computes them in the first copy and loads them into the others: once per build."""
    from torchrl_factories import CountedNorm

    from ppo_td.envs import build_env
    from ppo_td.training import evaluate

    CountedNorm.calls = 0
    config = _pendulum("torchrl_factories:counted_tutorial")
    built = build_env(dataclasses.replace(config.env, num_envs=4), seed=0)
    assert CountedNorm.calls == 1
    p = build_pipeline(config, env=built)
    p.collector.shutdown()
    evaluation = evaluate(p.actor, config.env, 10, seed=1)
    assert CountedNorm.calls == 2 and evaluation.episodes == 10  # ten copies, one computation
