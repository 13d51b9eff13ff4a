"""The lean paths against their oracles: LeanCollector vs TorchRL's Collector (the same batches, bit for bit,
and the same state after) and the lean loss forward vs ClipPPOLoss.forward (the same outputs and gradients)."""

import dataclasses

import pytest
import test_masking  # noqa: F401 - registers ppo_td_test/MultiTarget-v0 (MultiDiscrete, masked)
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import Transform

from conftest import small_config
from ppo_td.config import CollectorConfig, EnvConfig, ModelConfig
from ppo_td.envs import make_env
from ppo_td.lean import LeanCollector, LeanUnsupported
from ppo_td.objective import LeanForward, make_loss, total_loss
from ppo_td.pipeline import build_pipeline, make_collector
from ppo_td.presets import get_preset
from ppo_td.trainer import train


def _collect(config, step_loop, batches):
    """``batches`` batches from a fresh pipeline, then the state collection leaves behind."""
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop=step_loop)))
    out = []
    for batch in p.collector:
        out.append(batch)
        if len(out) == batches:
            break
    carrier = p.collector._carrier.clone()
    state = {"rng": torch.get_rng_state(), "env": p.env.state_dict(),
             "mask": getattr(p.env.action_spec, "mask", None)}
    kind = type(p.collector)
    p.collector.shutdown()
    return kind, out, carrier, state


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), key


def _cartpole(**env):
    return dataclasses.replace(small_config(), env=EnvConfig("CartPole-v1", num_envs=4, **env))


CASES = {
    # numpy-vectorized CartPole, episodes cut by a short time limit (truncation), shared actor-critic trunk
    "cartpole-truncated-shared": dataclasses.replace(
        _cartpole(max_episode_steps=20), model=ModelConfig(hidden_sizes=(16, 16), shared_trunk=True)),
    # per-copy envs (sync vector env), observation normalization and return scaling
    "cartpole-sync-normalized": _cartpole(vectorization="sync", max_episode_steps=25, normalize_observations=True,
                                          normalize_rewards=True),
    # Box actions: Gaussian, and tanh-squashed Gaussian, with both normalizations and float32 observations
    "pendulum": dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2,
                                    max_episode_steps=30, normalize_observations=True, normalize_rewards=True),
                                    frames_per_batch=64, total_frames=256),
    "pendulum-squashed": dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2,
                                             max_episode_steps=30), model=ModelConfig(squash_actions=True),
                                             frames_per_batch=64, total_frames=256),
    # action masks: Discrete (ActionMask transform, MaskedCategorical) and MultiDiscrete (MaskedMultiCategorical)
    "trading-masked": dataclasses.replace(get_preset("trading"), env=EnvConfig("ppo_td/Trading-v0", num_envs=4),
                                          frames_per_batch=128, total_frames=512),
    "multidiscrete-masked": small_config(env=EnvConfig("ppo_td_test/MultiTarget-v0", num_envs=4)),
}


@pytest.mark.parametrize("case", CASES)
def test_lean_batches_equal_torchrl_collector_batches(case):
    config = CASES[case]
    kind_a, torchrl_batches, carrier_a, state_a = _collect(config, "torchrl", batches=4)
    kind_b, lean_batches, carrier_b, state_b = _collect(config, "lean", batches=4)
    assert kind_a is Collector and kind_b is LeanCollector
    assert any(b["next", "done"].any() for b in torchrl_batches), "the case must cover resets"
    for a, b in zip(torchrl_batches, lean_batches, strict=True):
        assert b.names == a.names == [None, "time"]
        _assert_same(a, b)
    # the state left for the next batch: current step, RNG, transforms' statistics, the action spec's mask
    for key in carrier_b.keys(True, True):
        assert torch.equal(carrier_a.get(key), carrier_b.get(key)), key
    assert torch.equal(state_a["rng"], state_b["rng"])
    assert state_a["env"].keys() == state_b["env"].keys()
    assert all(torch.equal(state_a["env"][k], state_b["env"][k]) for k in state_a["env"])
    if state_a["mask"] is not None:
        assert torch.equal(state_a["mask"], state_b["mask"])


def test_truncated_steps_keep_the_final_observation():
    """The lean loop stores the true final observation of a truncated episode, not the reset one."""
    _, batches, _, _ = _collect(CASES["cartpole-truncated-shared"], "lean", batches=3)
    batch = torch.cat(batches, 1)
    truncated = batch["next", "truncated"].squeeze(-1)
    assert truncated.any()
    env_i, t = truncated.nonzero()[0].tolist()
    assert batch["next", "step_count"][env_i, t].item() == 20
    assert not torch.equal(batch["next", "observation"][env_i, t], batch["observation"][env_i, t + 1])
    assert batch["step_count"][env_i, t + 1].item() == 0 and batch["episode_reward"][env_i, t + 1].item() == 0


def test_default_pipeline_collects_lean_and_other_parts_fall_back():
    default = build_pipeline(get_preset("cartpole"))
    assert isinstance(default.collector, LeanCollector)
    default.collector.shutdown()

    class Doubler(Transform):  # a transform the lean loop does not know
        def _call(self, td):
            return td

    config = small_config()
    env = make_env(config.env, seed=1)
    env.append_transform(Doubler())
    p = build_pipeline(config, env=env)
    assert type(p.collector) is Collector  # 'auto': TorchRL's Collector runs it
    lean = dataclasses.replace(config, collector=CollectorConfig(step_loop="lean"))
    with pytest.raises(LeanUnsupported, match="Doubler transform.*step_loop='auto' or 'torchrl'"):
        make_collector(env, p.actor, lean)
    p.collector.shutdown()


def test_policies_the_lean_loop_cannot_run_are_named():
    p = build_pipeline(small_config())

    class Custom(TensorDictModule):
        pass

    odd = Custom(torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["logits"])
    with pytest.raises(LeanUnsupported, match="Custom"):
        LeanCollector(p.env, odd, frames_per_batch=64, total_frames=64)
    p.collector.shutdown()


def test_lean_is_in_process_only():
    with pytest.raises(ValueError, match="collector.step_loop"):
        CollectorConfig(backend="process", step_loop="lean")


# --- the lean loss forward against ClipPPOLoss.forward -------------------------------------------

LOSS_CASES = {
    "cleanrl": small_config(),  # value clipping, entropy bonus, advantage normalization
    "cartpole-preset-shared": dataclasses.replace(get_preset("cartpole"), model=ModelConfig(shared_trunk=True)),
    "pendulum": CASES["pendulum"],
    "trading-masked": CASES["trading-masked"],
    "multidiscrete-masked": CASES["multidiscrete-masked"],
}


def _loss_and_grads(p, minibatch, lean):
    p.loss.lean_forward = lean
    out = p.loss(minibatch)
    grads = torch.autograd.grad(total_loss(out), p.parameters)
    return out, grads


def _ready(config):
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    p.collector.shutdown()
    with torch.no_grad():
        p.advantage(batch)
    return p, batch.reshape(-1)[: p.config.minibatch_size]


@pytest.mark.parametrize("case", LOSS_CASES)
def test_lean_loss_forward_equals_clipppoloss_forward(case):
    p, minibatch = _ready(LOSS_CASES[case])
    with torch.no_grad():  # move the policy and value away from the rollout's, so ratios and values get clipped
        for param in p.parameters:
            param.add_(0.3 * torch.randn_like(param))
    lean, lean_grads = _loss_and_grads(p, minibatch, lean=True)
    assert isinstance(p.loss._lean, LeanForward) and p.loss._lean(minibatch) is not None  # lean really ran
    reference, reference_grads = _loss_and_grads(p, minibatch, lean=False)
    assert reference["clip_fraction"] > 0 and reference["kl_approx"] != 0
    if p.config.loss.clip_value is not None:
        assert reference["value_clip_fraction"] > 0
    assert list(lean.keys()) == list(reference.keys())  # same entries, same order (the loss sum's order)
    _assert_same(lean, reference)
    for a, b in zip(lean_grads, reference_grads, strict=True):
        assert torch.equal(a, b)


def test_lean_loss_hands_back_what_it_does_not_compute():
    # a tanh-squashed Gaussian has no closed-form entropy: ClipPPOLoss's Monte-Carlo estimate runs
    p, minibatch = _ready(CASES["pendulum-squashed"])
    assert LeanForward(p.loss)(minibatch) is None
    # a loss mask in the minibatch: ClipPPOLoss's masked reduction runs
    p, minibatch = _ready(small_config())
    masked = minibatch.set(("collector", "mask"), torch.ones(minibatch.numel(), dtype=torch.bool))
    assert LeanForward(p.loss)(masked) is None
    p.loss.separate_losses = True
    with pytest.raises(LeanUnsupported, match="separate losses"):
        LeanForward(p.loss)


def test_training_with_and_without_the_lean_paths_is_identical():
    config = small_config(total_frames=64 * 4)
    lean = train(config)
    plain = train(dataclasses.replace(config, loss=dataclasses.replace(config.loss, lean_forward=False),
                                      collector=CollectorConfig(step_loop="torchrl")))
    assert isinstance(lean.pipeline.collector, LeanCollector) and isinstance(lean.pipeline.loss._lean, LeanForward)
    assert isinstance(plain.pipeline.collector, Collector) and plain.pipeline.loss._lean is None
    keys = ("loss_policy", "loss_value", "loss_entropy", "kl_k3", "grad_norm", "episode_return", "clip_fraction")
    assert [[m[k] for k in keys] for m in lean.history] == [[m[k] for k in keys] for m in plain.history]
    assert lean.eval_returns == plain.eval_returns


def test_forward_hooks_added_later_see_the_modules_own_calls():
    """A hook put on the actor or critic after the lean paths were planned (as the doctor's audit does)
    makes them run the modules themselves: the hook fires and the results stay TorchRL's."""
    config = CASES["cartpole-truncated-shared"]
    _, torchrl_batches, _, _ = _collect(config, "torchrl", batches=2)
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop="lean")))
    calls = []
    handle = p.actor.register_forward_hook(lambda *args: calls.append("actor"))
    batches = [b for _, b in zip(range(2), p.collector, strict=False)]
    assert len(calls) == 2 * batches[0].shape[1]  # one policy call per step
    for a, b in zip(torchrl_batches, batches, strict=True):
        _assert_same(a, b)
    handle.remove()
    with torch.no_grad():
        p.advantage(batches[0])
    minibatch = batches[0].reshape(-1)[:16]
    lean = LeanForward(p.loss)
    assert lean(minibatch) is not None
    handle = p.critic.register_forward_hook(lambda *args: calls.append("critic"))
    assert lean(minibatch) is None  # the caller runs ClipPPOLoss.forward, which calls the critic
    p.loss(minibatch)
    assert calls[-1] == "critic"
    handle.remove()
    p.collector.shutdown()


def test_a_critic_reading_the_actors_outputs_gets_them_fresh():
    """A value head over the actor's trunk output ("hidden"), as ActorValueOperator.get_value_head() gives:
    ClipPPOLoss's critic reads the hidden state the actor just computed, with its gradient, and so does lean."""
    p, minibatch = _ready(dataclasses.replace(small_config(), model=ModelConfig(hidden_sizes=(16, 16),
                                                                                shared_trunk=True)))
    head = p.critic.module[1]
    assert head.in_keys == ["hidden"]
    loss = make_loss(p.actor, head, p.config.loss)
    params = list({id(q): q for q in loss.parameters()}.values())
    results = []
    for lean in (True, False):
        loss.lean_forward = lean
        out = loss(minibatch)
        results.append((out, torch.autograd.grad(total_loss(out), params, allow_unused=True)))
    assert isinstance(loss._lean, LeanForward)
    _assert_same(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1], strict=True):
        assert (a is None and b is None) or torch.equal(a, b)


def test_loss_settings_changed_after_planning_hand_back_to_clipppoloss():
    p, minibatch = _ready(small_config())
    p.loss(minibatch)
    assert p.loss._lean(minibatch) is not None
    p.loss.reduction = "sum"
    assert p.loss._lean(minibatch) is None
    assert p.loss(minibatch)["loss_objective"].shape == ()  # ClipPPOLoss's own sum


def test_a_transform_added_after_building_is_not_skipped():
    class Doubler(Transform):
        def _call(self, td):
            return td

    p = build_pipeline(small_config())
    next(iter(p.collector))
    p.env.append_transform(Doubler())
    with pytest.raises(LeanUnsupported, match="changed after the lean collector was built.*Doubler"):
        next(iter(p.collector))
    p.collector.shutdown()
