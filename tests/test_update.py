"""The update's mechanics: minibatch coverage, learning-rate annealing, target-KL early stop."""

import dataclasses

import pytest
import torch

from conftest import small_config
from ppo_td.config import OptimConfig
from ppo_td.train import build_pipeline, train


def test_each_epoch_sees_every_transition_exactly_once(tiny_config):
    p = build_pipeline(tiny_config)
    batch = next(iter(p.collector))
    for _ in range(2):  # a fresh batch each iteration, as in the loop
        p.buffer.empty()
        p.buffer.extend(batch.reshape(-1))
        for _epoch in range(3):  # the update draws the whole batch once per epoch, then splits it
            _, info = p.buffer.sample(return_info=True)
            seen = torch.as_tensor(info["index"])
            assert sorted(seen.tolist()) == list(range(tiny_config.frames_per_batch))
            assert not torch.equal(seen, torch.arange(tiny_config.frames_per_batch)), "shuffled"
    p.collector.shutdown()


def test_learning_rate_anneals_like_cleanrl():
    config = small_config(total_frames=64 * 5, eval_episodes=0)
    result = train(config)
    n = config.num_iterations
    expected = [(1.0 - (i - 1.0) / n) * config.optim.lr for i in range(1, n + 1)]  # CleanRL's frac * lr
    assert [m["lr"] for m in result.history] == pytest.approx(expected, rel=1e-12)


def test_constant_learning_rate_without_annealing():
    config = small_config(total_frames=64 * 3, eval_episodes=0,
                          optim=dataclasses.replace(small_config().optim, anneal_lr=False))
    assert {m["lr"] for m in train(config).history} == {config.optim.lr}


def test_target_kl_stops_the_epochs_early():
    optim = OptimConfig(lr=1e-2, update_epochs=8, num_minibatches=2, target_kl=1e-6)
    result = train(small_config(optim=optim, total_frames=64 * 3, eval_episodes=0))
    assert all(m["epochs"] < 8 for m in result.history)
    no_stop = train(small_config(optim=dataclasses.replace(optim, target_kl=None), total_frames=64 * 3,
                                 eval_episodes=0))
    assert all(m["epochs"] == 8 for m in no_stop.history)


def test_gradient_norm_is_clipped():
    optim = OptimConfig(lr=1e-3, max_grad_norm=1e-3)
    p = build_pipeline(small_config(optim=optim, eval_episodes=0))
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    p.buffer.extend(batch.reshape(-1))
    params = p.parameters
    from ppo_td.train import total_loss

    total_loss(p.loss(p.buffer.sample())).backward()
    raw = torch.nn.utils.clip_grad_norm_(params, optim.max_grad_norm)
    clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(x.grad) for x in params]))
    assert raw > optim.max_grad_norm and clipped == pytest.approx(optim.max_grad_norm, rel=1e-3)
    p.collector.shutdown()


def test_metrics_are_recorded_each_iteration(tiny_config):
    result = train(tiny_config)
    needed = {"episode_return", "episode_length", "loss_policy", "loss_value", "loss_entropy", "kl_k1", "kl_k3",
              "clip_fraction", "explained_variance", "lr", "grad_norm", "sps"}
    assert len(result.history) == tiny_config.num_iterations
    for m in result.history:
        assert needed <= m.keys()
    assert result.history[-1]["frames"] == tiny_config.num_iterations * tiny_config.frames_per_batch
