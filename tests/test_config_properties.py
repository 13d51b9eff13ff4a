"""Property-based tests over config values: every invalid value is refused with a message naming
the field, the value and the valid range; every valid config builds a working pipeline."""

import math

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ppo_td.config import EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.training import build_pipeline, run, update

NAN = float("nan")
# (section class, field, strategy of invalid values)
INVALID = [
    (EnvConfig, "num_envs", st.integers(max_value=0)),
    (EnvConfig, "max_episode_steps", st.integers(max_value=0)),
    (ModelConfig, "hidden_sizes", st.lists(st.integers(max_value=0), min_size=1, max_size=3).map(tuple)),
    (ModelConfig, "policy_head_gain", st.floats(max_value=0.0, allow_nan=False)),
    (LossConfig, "gamma", st.one_of(st.floats(min_value=1.0, exclude_min=True), st.floats(max_value=0.0,
                                                                                          exclude_max=True))),
    (LossConfig, "gae_lambda", st.one_of(st.floats(min_value=1.0, exclude_min=True), st.just(NAN))),
    (LossConfig, "clip_epsilon", st.one_of(st.floats(min_value=1.0), st.floats(max_value=0.0))),
    (LossConfig, "clip_value", st.floats(max_value=0.0, allow_nan=False)),
    (LossConfig, "entropy_coeff", st.floats(max_value=0.0, exclude_max=True, allow_nan=False)),
    (LossConfig, "critic_coeff", st.floats(max_value=0.0, allow_nan=False)),
    (LossConfig, "loss_critic_type", st.text().filter(lambda t: t not in ("l2", "l1", "smooth_l1"))),
    (OptimConfig, "lr", st.one_of(st.floats(max_value=0.0), st.just(float("inf")), st.just(NAN))),
    (OptimConfig, "adam_eps", st.floats(max_value=0.0, allow_nan=False)),
    (OptimConfig, "update_epochs", st.integers(max_value=0)),
    (OptimConfig, "num_minibatches", st.integers(max_value=0)),
    (OptimConfig, "max_grad_norm", st.floats(max_value=0.0, allow_nan=False)),
    (OptimConfig, "target_kl", st.floats(max_value=0.0, allow_nan=False)),
    (OptimConfig, "lr", st.one_of(st.text(), st.booleans())),
    (OptimConfig, "update_epochs", st.floats(allow_nan=False)),
]


@pytest.mark.parametrize(("cls", "name", "strategy"), INVALID, ids=[f"{c.__name__}.{n}" for c, n, _ in INVALID])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_invalid_field_value_is_refused_with_a_message(cls, name, strategy, data):
    value = data.draw(strategy)
    with pytest.raises((ValueError, TypeError)) as info:
        cls(**{name: value})
    message = str(info.value)
    assert name in message and "must be" in message


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_envs=st.integers(1, 4), steps=st.sampled_from([1, 2, 3, 4, 8]), num_minibatches=st.integers(1, 6),
       total_iterations=st.integers(1, 3), seed=st.one_of(st.integers(0, 100), st.integers(2**32 - 2, 2**32 + 2)))
@example(num_envs=2, steps=4, num_minibatches=2, total_iterations=2, seed=0)
@example(num_envs=3, steps=4, num_minibatches=4, total_iterations=1, seed=2**32 - 1)
@example(num_envs=1, steps=1, num_minibatches=1, total_iterations=1, seed=0)
def test_batch_size_combinations(num_envs, steps, num_minibatches, total_iterations, seed):
    """Refused where the batch does not split evenly into minibatches of two or more (advantage normalization
    needs two), or the seed is out of range; otherwise the run does what
    the config says: total_iterations iterations, each of update_epochs x num_minibatches optimizer steps on
    minibatches of frames_per_batch / num_minibatches transitions."""
    fpb = num_envs * steps
    kwargs = dict(env=EnvConfig(num_envs=num_envs), model=ModelConfig(hidden_sizes=(4,)),
                  optim=OptimConfig(num_minibatches=num_minibatches, update_epochs=2),
                  frames_per_batch=fpb, total_frames=fpb * total_iterations, seed=seed, eval_episodes=0)
    if fpb % num_minibatches or fpb // num_minibatches < 2 or not 0 <= seed < 2**32:
        with pytest.raises(ValueError, match=r"config field (frames_per_batch|seed)=.*must be"):
            TrainConfig(**kwargs)
        return
    p = build_pipeline(TrainConfig(**kwargs))
    sizes = []
    real_forward = p.loss.forward
    p.loss.forward = lambda td: (sizes.append(td.numel()), real_forward(td))[1]  # the pipeline's own loss object
    result = run(p)
    assert len(result.history) == total_iterations and result.history[-1]["frames"] == fpb * total_iterations
    assert sizes == [fpb // num_minibatches] * (total_iterations * 2 * num_minibatches)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_envs=st.integers(1, 4), steps=st.integers(2, 8), num_minibatches=st.sampled_from([1, 2]),
       hidden=st.lists(st.integers(1, 16), min_size=1, max_size=2).map(tuple), shared=st.booleans(),
       clip_value=st.one_of(st.none(), st.floats(0.01, 10)), target_kl=st.one_of(st.none(), st.floats(1e-4, 1)),
       gamma=st.floats(0, 1), lam=st.floats(0, 1))
def test_valid_configs_build_a_working_pipeline(num_envs, steps, num_minibatches, hidden, shared, clip_value,
                                                 target_kl, gamma, lam):
    fpb = num_envs * steps * num_minibatches
    config = TrainConfig(
        env=EnvConfig(num_envs=num_envs), model=ModelConfig(hidden_sizes=hidden, shared_trunk=shared),
        loss=LossConfig(gamma=gamma, gae_lambda=lam, clip_value=clip_value),
        optim=OptimConfig(num_minibatches=num_minibatches, update_epochs=2, target_kl=target_kl),
        frames_per_batch=fpb, total_frames=fpb, eval_episodes=0,
    )
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    metrics = update(p, batch)
    p.collector.shutdown()
    assert 1 <= metrics["epochs"] <= 2
    assert all(math.isfinite(metrics[k]) for k in ("loss_policy", "loss_value", "grad_norm"))
