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
from ppo_td.models.inference import MAX_LAYER_WORK, NumpyPolicy, one_thread
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
    _, net = _net(small_config(env=EnvConfig("Acrobot-v1", num_envs=2)))  # three actions
    fast = NumpyPolicy.of(net, rows=2)
    assert fast is not None and fast.kind == "categorical"
    with torch.no_grad():
        net.head[-1].weight.mul_(300.0)  # a policy far from uniform
    torch.manual_seed(0)
    obs = torch.randn(1, 6).expand(30_000, 6).contiguous()  # one observation, drawn 30,000 times
    (logits,), action, log_prob = fast.sample(obs.numpy())
    with torch.no_grad():
        _close(logits[:1], net(obs[:1]))
        dist = torch.distributions.Categorical(logits=net(obs[:1]))
    _close(log_prob, dist.log_prob(torch.from_numpy(action)))
    frequencies = np.bincount(action, minlength=3) / action.size
    probs = dist.probs[0].numpy()
    assert probs.max() > 0.5 and probs.min() > 0.005  # far from uniform, every action drawn
    assert np.abs(frequencies - probs).max() < 0.012  # over 5 standard errors at 30,000 draws
    assert action.dtype == np.int64 and set(np.unique(action)) == {0, 1, 2}


def test_categorical_draws_are_torchs_and_leave_its_generator_where_torch_does():
    """torch.multinomial's one-draw path (one exponential per action): the same seed gives the torch path's
    actions and the same generator state after; an action of probability 0 is never drawn."""
    _, net = _net(small_config(env=EnvConfig("Acrobot-v1", num_envs=2)))
    obs = torch.randn(64, 6)
    torch.manual_seed(7)
    with torch.no_grad():
        action, log_prob = ClosedForm("categorical").sample((net(obs),))
    after_torch = torch.get_rng_state()
    torch.manual_seed(7)
    _, np_action, np_log_prob = NumpyPolicy.of(net, rows=64).sample(obs.numpy())
    assert np.array_equal(np_action, action.numpy()) and torch.equal(torch.get_rng_state(), after_torch)
    _close(np_log_prob, log_prob)
    with torch.no_grad():
        net.head[-1].bias.copy_(torch.tensor([0.0, -200.0, 0.0]))  # action 1: probability 0 in float32
        net.head[-1].weight.zero_()
    assert 1 not in NumpyPolicy.of(net, rows=64).sample(obs.numpy())[1]


def test_masked_draws_are_the_torch_paths_and_never_illegal():
    """A Discrete action's mask (TorchRL's MaskedCategorical): the same seed gives the torch path's actions (its
    closed form, bit for bit MaskedCategorical's) and generator state, log-probs within rounding, no illegal action
    even where its logit is the largest; the mask is required, and a row with no legal action is refused."""
    _, net = _net(small_config(env=EnvConfig("ppo_td/Trading-v0", num_envs=2)))
    fast = NumpyPolicy.of(net, rows=64)
    assert net.masked and fast is not None and fast.kind == "masked_categorical"
    obs = torch.randn(64, *net.head[0].weight.shape[1:])
    with torch.no_grad():
        logits = net(obs)
    n = logits.shape[-1]
    mask = torch.rand(64, n, generator=torch.Generator().manual_seed(1)) > 0.5
    mask[torch.arange(64), logits.argmax(-1)] = False  # the likeliest action illegal: never drawn
    mask[torch.arange(64), (logits.argmax(-1) + 1) % n] = True  # a legal action in every row
    torch.manual_seed(7)
    action, log_prob = ClosedForm("masked_categorical").sample((logits,), mask)
    after_torch = torch.get_rng_state()
    torch.manual_seed(7)
    (np_logits,), np_action, np_log_prob = fast.sample(obs.numpy(), mask.numpy())
    assert np.array_equal(np_action, action.numpy()) and torch.equal(torch.get_rng_state(), after_torch)
    _close(np_log_prob, log_prob)
    _close(np_logits, logits)  # the raw logits recorded, as the torch path records them
    assert mask.numpy()[np.arange(64), np_action].all()
    with pytest.raises(ValueError, match="needs the legal-action mask"):
        fast.sample(obs.numpy())
    with pytest.raises(ValueError, match="the legal-action mask is int8; a masked policy reads a bool mask"):
        fast.sample(obs.numpy(), mask.numpy().astype(np.int8))
    mask[3] = False
    with pytest.raises(ValueError, match="allows no action"):
        fast.sample(obs.numpy(), mask.numpy())


def test_infinite_logits_are_refused_as_torchs_multinomial_refuses_them():
    _, net = _net(small_config())
    with torch.no_grad():
        net.head[-1].bias.copy_(torch.tensor([float("inf"), 0.0]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        NumpyPolicy.of(net, rows=1).sample(np.zeros((1, 4), np.float32))


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
    import test_masking  # noqa: F401 - registers ppo_td_test/MultiTarget-v0 (MultiDiscrete, masked)

    _, net = _net(small_config(env=EnvConfig("ppo_td_test/MultiTarget-v0", num_envs=2)))
    assert net.masked and NumpyPolicy.of(net, rows=2) is None  # MultiDiscrete masks (MaskedMultiCategorical)
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
    _, net = _net(small_config())
    torch.nn.utils.prune.l1_unstructured(net.head[0], "weight", amount=0.5)
    assert NumpyPolicy.of(net, rows=4) is None  # a weight recomputed from a mask before each forward
    _, net = _net(small_config())
    torch.nn.utils.parametrizations.orthogonal(net.head[2])
    assert NumpyPolicy.of(net, rows=4) is None  # a parametrized weight


def test_relu_policies_run_and_pickle():
    import pickle

    _, net = _net(small_config(model=ModelConfig(hidden_sizes=(16, 16), activation="relu")))
    fast = pickle.loads(pickle.dumps(NumpyPolicy.of(net, rows=4)))  # (spawned workers and torch.save pickle it)
    obs = torch.randn(4, 4)
    with torch.no_grad():
        _close(fast.forward(obs.numpy()), net(obs))


def test_elu_policies_match_torch_and_another_alpha_stays_in_torch():
    _, net = _net(small_config(model=ModelConfig(hidden_sizes=(16, 16), activation="elu")))
    fast = NumpyPolicy.of(net, rows=64)
    assert fast is not None
    obs = torch.randn(64, 4) * 3  # both sides of 0
    with torch.no_grad():
        _close(fast.forward(obs.numpy()), net(obs))
    elus = [m for m in net.modules() if isinstance(m, nn.ELU)]
    assert elus
    elus[0].alpha = 0.5  # not the numpy kernel's
    assert NumpyPolicy.of(net, rows=64) is None


def test_numpy_blas_stays_on_one_thread():
    """Products numpy's OpenBLAS would spread over threads run in torch (on torch's threads) instead."""
    assert one_thread(1, 17, 64) and one_thread(1, 64, 64) and not one_thread(1, 128, 128)  # one row: gemv
    assert one_thread(64, 64, 1) and not one_thread(256, 64, 1)  # one output: gemv
    assert one_thread(64, 64, 64) and not one_thread(256, 64, 64)  # gemm
    _, net = _net(dataclasses.replace(_pendulum(), model=ModelConfig(hidden_sizes=(128, 128))))
    assert NumpyPolicy.of(net, rows=1) is None and NumpyPolicy.of(net, rows=8) is not None


def test_a_policy_cast_after_the_collector_was_built_goes_back_to_torch():
    p = build_pipeline(small_config())
    assert p.collector.fast_policy.numpy is not None
    p.actor.double()  # its parameters are no longer float32: the next batch samples in torch
    p.collector.fast_policy.refresh()
    assert p.collector.fast_policy.numpy is None
    p.collector.shutdown()
    p = build_pipeline(small_config(collector=CollectorConfig(inference="numpy")))
    p.actor.double()
    with pytest.raises(FastUnsupported, match="no longer float32"):
        next(iter(p.collector))
    p.collector.shutdown()


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
    assert set(again.keys(True, True)) == set(numpy_batch.keys(True, True))
    for key in again.keys(True, True):  # the same seed, the same batch (infos: NaN where the env reported none)
        torch.testing.assert_close(again[key], numpy_batch[key], rtol=0, atol=0, equal_nan=True, msg=str(key))



@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Blackjack-v1", "space_envs:seek"])
def test_discrete_dict_and_tuple_observations_are_encoded_in_numpy_as_torch_encodes_them(env_id):
    """ppo_td's Flatten, OneHot and Dict encoders in numpy: the same features (one-hot ones, float32 casts,
    concatenation in key order), so the same logits and draws as the torch path."""
    config = small_config(env=EnvConfig(env_id, num_envs=4, max_episode_steps=20),
                          model=ModelConfig(hidden_sizes=(16, 16), encoder="flat"))
    p, net = _net(config)
    fast = NumpyPolicy.of(net, rows=4)
    assert fast is not None and net.trunk is not None  # the encoder: not a bare float vector
    batch = next(iter(build_pipeline(config).collector))["observation"][:, :3].reshape(-1)  # 12 observations
    torch.manual_seed(3)
    with torch.no_grad():
        features = net.trunk(batch)
        torch_logits = net(batch)
        action, log_prob = ClosedForm("categorical").sample((torch_logits,))
    torch.manual_seed(3)
    encoded = fast.encode(batch.numpy())
    (logits,), np_action, np_log_prob = fast.sample(batch.numpy())
    assert np.array_equal(encoded, features.numpy())  # the encoders: bit for bit
    _close(logits, torch_logits)
    assert np.array_equal(np_action, action.numpy())
    _close(np_log_prob, log_prob)


def test_a_cnn_encoder_stays_on_torch():
    _, net = _net(small_config(env=EnvConfig("space_envs:seek", num_envs=2, max_episode_steps=20)))
    assert NumpyPolicy.of(net, rows=2) is None  # the 4x4 image read by a small CNN
