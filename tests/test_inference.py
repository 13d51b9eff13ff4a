"""The numpy policy (ppo_td.models.inference) against its oracle, the torch path: the same parameters, samples and
log-probs within float rounding on the same observations, the same noise from torch's generator, parameters
followed through optimizer steps and loads, refusals for what it does not run."""

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from conftest import small_config
from ppo_td.collect import FastCollector, FastUnsupported
from ppo_td.config import CollectorConfig, EnvConfig, ModelConfig
from ppo_td.models import ClosedForm, policy_net
from ppo_td.models.inference import MAX_LAYER_WORK, NumpyPolicy
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline

RTOL, ATOL = 1e-6, 1e-6


def _pendulum(**overrides):
    return dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2),
                               frames_per_batch=64, total_frames=128, eval_episodes=0, **overrides)


def _net(config):
    p = build_pipeline(config)
    p.collector.shutdown()
    return p, policy_net(p.actor)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


def test_gaussian_samples_and_log_probs_match_the_torch_path():
    _, net = _net(_pendulum())
    fast = NumpyPolicy.of(net, rows=32)
    assert fast is not None and fast.kind == "normal"
    obs = torch.randn(32, 3)
    with torch.no_grad():
        net.head.log_std.add_(torch.linspace(-1, 1, net.head.log_std.numel()))  # a scale that is not 1
        torch.manual_seed(5)
        params = net(obs)
        action, log_prob = ClosedForm("normal").sample(params)
    fast.refresh()  # log_std changed above: the scale is read once a batch
    torch.manual_seed(5)  # the same noise: the numpy path draws it from torch's generator
    (loc, scale), np_action, np_log_prob = fast.sample(obs.numpy())
    _close(loc, params[0])
    _close(scale, params[1])
    _close(np_action, action)
    _close(np_log_prob, log_prob)
    assert np_action.dtype == np.float32 and np_log_prob.shape == (32,)


def test_categorical_samples_follow_the_probabilities_and_score_like_torch():
    _, net = _net(small_config())
    fast = NumpyPolicy.of(net, rows=4)
    assert fast is not None and fast.kind == "categorical"
    with torch.no_grad():
        net.head[-1].weight.mul_(300.0)  # a policy far from uniform
    obs = torch.randn(1, 4).expand(20_000, 4).contiguous()  # one observation, drawn 20,000 times
    (logits,), action, log_prob = fast.sample(obs.numpy())
    with torch.no_grad():
        dist = torch.distributions.Categorical(logits=net(obs[:1]))
        _close(logits[:1], net(obs[:1]))
    _close(log_prob, dist.log_prob(torch.from_numpy(action)))
    frequencies = np.bincount(action, minlength=2) / action.size
    probs = dist.probs[0].numpy()
    assert 0.02 < probs.min() and np.abs(frequencies - probs).max() < 0.015  # 5 standard errors at 20,000 draws
    assert action.dtype == np.int64 and set(np.unique(action)) <= {0, 1}


def test_the_same_seed_draws_the_same_actions():
    _, net = _net(small_config())
    fast = NumpyPolicy.of(net, rows=4)
    obs = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    torch.manual_seed(3)
    first = [fast.sample(obs)[1] for _ in range(20)]
    torch.manual_seed(3)
    again = [fast.sample(obs)[1] for _ in range(20)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_parameters_are_followed_through_optimizer_steps_and_loads():
    p, net = _net(_pendulum())
    fast = NumpyPolicy.of(net, rows=8)
    obs = torch.randn(8, 3)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    net(obs)[0].square().sum().backward()
    optimizer.step()  # in place: the numpy views see it without a refresh
    with torch.no_grad():
        _close(fast.forward(obs.numpy()), net(obs)[0])
    state = {k: v + 1.0 for k, v in net.state_dict().items()}
    net.load_state_dict(state)  # copies into the same memory
    with torch.no_grad():
        _close(fast.forward(obs.numpy()), net(obs)[0])
    layer = net.head.net[0]
    layer.weight = nn.Parameter(torch.zeros_like(layer.weight))  # replaced, not updated: seen after refresh()
    fast.refresh()
    with torch.no_grad():
        _close(fast.forward(obs.numpy()), net(obs)[0])


def test_non_finite_parameters_are_refused_as_on_the_torch_path():
    _, net = _net(_pendulum())
    with torch.no_grad():
        net.head.net[0].bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="loc, scale"):
        NumpyPolicy.of(net, rows=1).sample(np.zeros((1, 3), np.float32))
    _, net = _net(small_config())
    with torch.no_grad():
        net.head[0].bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="logits hold NaN"):
        NumpyPolicy.of(net, rows=1).sample(np.zeros((1, 4), np.float32))


def test_policies_it_does_not_run_stay_on_torch():
    _, net = _net(small_config(model=ModelConfig(hidden_sizes=(16, 16), shared_trunk=True)))
    assert NumpyPolicy.of(net, rows=4) is None  # a shared trunk
    _, net = _net(small_config(env=EnvConfig("ppo_td/Trading-v0", num_envs=2)))
    assert net.masked and NumpyPolicy.of(net, rows=2) is None  # action masks
    _, net = _net(small_config())
    assert NumpyPolicy.of(net, rows=MAX_LAYER_WORK // (16 * 16) + 1) is None  # too large for numpy's one thread
    net.double()
    assert NumpyPolicy.of(net, rows=4) is None  # float64 parameters
    _, net = _net(small_config())

    class Odd(nn.Sequential):
        def forward(self, x):
            return super().forward(x) * 2

    net.head = Odd(*net.head)
    assert NumpyPolicy.of(net, rows=4) is None  # a Sequential with a forward of its own
    _, net = _net(small_config())
    net.head.insert(1, nn.LayerNorm(16))
    assert NumpyPolicy.of(net, rows=4) is None  # a layer it has no numpy form for


def test_collector_inference_setting():
    p = build_pipeline(small_config())  # 'auto' on a small MLP: numpy
    assert isinstance(p.collector, FastCollector) and p.collector.fast_policy.numpy is not None
    p.collector.shutdown()
    p = build_pipeline(small_config(collector=CollectorConfig(inference="torch")))
    assert p.collector.fast_policy.numpy is None
    p.collector.shutdown()
    shared = small_config(model=ModelConfig(hidden_sizes=(16, 16), shared_trunk=True))
    p = build_pipeline(shared)  # 'auto' on a policy it does not run: torch
    assert p.collector.fast_policy.numpy is None
    p.collector.shutdown()
    with pytest.raises(FastUnsupported, match="collector.inference='numpy'.*'auto' or 'torch'"):
        build_pipeline(dataclasses.replace(shared, collector=CollectorConfig(inference="numpy")))
    with pytest.raises(ValueError, match="collector.inference"):
        CollectorConfig(step_loop="torchrl", inference="numpy")
    with pytest.raises(ValueError, match="collector.inference"):
        CollectorConfig(inference="jax")


def test_first_step_matches_the_torch_collector_and_runs_are_reproducible():
    """Both collectors start from the same observations: the first step's parameters agree within float rounding.
    (After it the trajectories part: another rounding of an action is another simulator state.)"""
    config = _pendulum()
    batches = {}
    for inference in ("torch", "numpy", "numpy"):
        torch.manual_seed(0)
        p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(inference=inference)))
        batches.setdefault(inference, []).append(next(iter(p.collector)))
        p.collector.shutdown()
    torch_batch, (numpy_batch, again) = batches["torch"][0], batches["numpy"]
    for key in ("observation", "loc", "scale", "action", "action_log_prob"):
        _close(numpy_batch[key][:, 0], torch_batch[key][:, 0])
    assert (again == numpy_batch).all()  # the same seed, the same batch

