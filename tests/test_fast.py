"""The fast paths against their oracles: FastCollector vs TorchRL's Collector (the same batches, bit for bit,
and the same state after) and the fast loss forward vs ClipPPOLoss.forward (the same outputs and gradients)."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import test_masking  # noqa: F401 - registers ppo_td_test/MultiTarget-v0 (MultiDiscrete, masked)
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import Transform

from conftest import small_config
from ppo_td.collect import EnvLoopCollector, FastCollector, FastUnsupported, make_collector
from ppo_td.config import CollectorConfig, EnvConfig, LossConfig, ModelConfig
from ppo_td.envs import build_env
from ppo_td.models import policy_net, value_net
from ppo_td.persist import capture, restore_snapshot, why_inexact
from ppo_td.presets import get_preset
from ppo_td.training import FastLoss, build_pipeline, total_loss, train


def _collect(config, step_loop, batches):
    """``batches`` batches from a fresh pipeline, then the state collection leaves behind."""
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop=step_loop, inference="torch")))
    out = []
    for batch in p.collector:
        out.append(batch)
        if len(out) == batches:
            break
    state = {"rng": torch.get_rng_state(), "env": p.env.state_dict(),
             "mask": getattr(p.env.action_spec, "mask", None)}
    kind = type(p.collector)
    p.collector.shutdown()
    return kind, out, state


def _assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert x.dtype == y.dtype and x.shape == y.shape, key
        torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True, msg=str(key))  # bit for bit; NaN: unreported


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
    # one env copy: stepped without the vector env's step (FastEnv._one_copy); float32 and (MuJoCo) float64
    # observations, both normalizations, clipped actions
    "pendulum-one-copy": dataclasses.replace(get_preset("pendulum"), env=EnvConfig(
        "Pendulum-v1", num_envs=1, max_episode_steps=20, normalize_observations=True, normalize_rewards=True),
        frames_per_batch=32, total_frames=160),
    "hopper-one-copy": dataclasses.replace(get_preset("hopper"), env=dataclasses.replace(
        get_preset("hopper").env, max_episode_steps=20), frames_per_batch=64, total_frames=320),
    "pendulum-squashed": dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2,
                                             max_episode_steps=30), model=ModelConfig(squash_actions=True),
                                             frames_per_batch=64, total_frames=256),
    # bounds -1 and 1: the tanh-normal sampled and scored in closed form (ClosedForm), no affine map
    "mountaincar-squashed": dataclasses.replace(get_preset("pendulum"), env=EnvConfig(
        "MountainCarContinuous-v0", num_envs=2, max_episode_steps=30), model=ModelConfig(squash_actions=True),
        loss=dataclasses.replace(get_preset("pendulum").loss, entropy_coeff=0.01),  # the sampled entropy's gradients
        frames_per_batch=64, total_frames=256),
    # a Gaussian with the entropy in the loss: scale's gradients summed in torch's order
    "pendulum-entropy": dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2,
                                            max_episode_steps=30),
                                            loss=dataclasses.replace(get_preset("pendulum").loss, entropy_coeff=0.01),
                                            frames_per_batch=64, total_frames=256),
    # gSDE: the noise matrices drawn at resets and every 5 steps by ExplorationNoise's own code, the actor's samples
    # the mean plus the state-dependent noise
    "pendulum-gsde": dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2,
                                         max_episode_steps=30), model=ModelConfig(exploration="gsde", log_std_init=-1.0,
                                                                                  sde_sample_every=5),
                                         frames_per_batch=64, total_frames=256),
    # copies whose episodes end at different steps (LunarLander's crashes): a partial reset draws the whole batch and
    # keeps the other copies' matrices, as TorchRL's
    "lunarlander-gsde-partial-resets": dataclasses.replace(
        get_preset("pendulum"), env=EnvConfig("LunarLanderContinuous-v3", num_envs=3),
        model=ModelConfig(exploration="gsde", log_std_init=-1.0, sde_sample_every=7), frames_per_batch=96,
        total_frames=480),
    # gSDE on one copy (the numpy step) on the mountaincar-continuous preset (normalized, a new matrix each rollout)
    "mountaincar-gsde-one-copy": dataclasses.replace(get_preset("mountaincar-continuous"), env=dataclasses.replace(
        get_preset("mountaincar-continuous").env, max_episode_steps=20), frames_per_batch=16, total_frames=160),
    # action masks: Discrete (ActionMask transform, MaskedCategorical) and MultiDiscrete (MaskedMultiCategorical)
    "trading-masked": dataclasses.replace(get_preset("trading"), env=EnvConfig("ppo_td/Trading-v0", num_envs=4),
                                          frames_per_batch=128, total_frames=512),
    "multidiscrete-masked": small_config(env=EnvConfig("ppo_td_test/MultiTarget-v0", num_envs=4)),
    # a uint8 vector observation, normalized (RunningObsNorm casts it to float32), partial resets
    "uint8-vector-normalized": small_config(env=EnvConfig("space_envs:counts", num_envs=4, max_episode_steps=11,
                                                          normalize_observations=True)),
    # the same uint8 observation without normalization (integers to the network), one copy (stepped directly)
    "uint8-vector-one-copy": small_config(env=EnvConfig("space_envs:counts", num_envs=1, max_episode_steps=11)),
    # a Tuple observation of Discrete entries
    "blackjack-tuple": small_config(env=EnvConfig("Blackjack-v1", num_envs=4)),
    # a Dict of an image, Discrete, MultiDiscrete and a nested Tuple with a float64 Box (cast inside the Dict)
    "seek-dict": small_config(env=EnvConfig("space_envs:seek", num_envs=4, max_episode_steps=12)),
    # infos: is_success at an episode's last step only (unasked), a key asked for and never reported, one copy
    "reach-infos": small_config(env=EnvConfig("info_envs:reach", num_envs=2, info_keys=("never",))),
    "reach-infos-one-copy": small_config(env=EnvConfig("info_envs:reach", num_envs=1)),
    # copies ending at different steps, is_success in the reset's info too: the root's infos after partial resets
    "varied-infos": small_config(env=EnvConfig("info_envs:varied", num_envs=4)),
    # one copy stepped and reset directly (FastEnv._one_copy), is_success in the reset's info too
    "varied-infos-one-copy": small_config(env=EnvConfig("info_envs:varied", num_envs=1)),
    # a Discrete observation with the action mask in info
    "taxi-info-mask": small_config(env=EnvConfig("Taxi-v4", num_envs=4, max_episode_steps=15)),
    # a Discrete observation alone (read as TorchRL's categorical integer): the numpy step; one copy stepped directly
    "frozenlake-discrete": small_config(env=EnvConfig("FrozenLake-v1", num_envs=4, max_episode_steps=9)),
    "frozenlake-one-copy": small_config(env=EnvConfig("FrozenLake-v1", num_envs=1, max_episode_steps=9)),
    # turn-based games: a Dict of an int8 board and its int8 mask (the numpy step: the mask checked and cast there,
    # the action spec's mask updated), one game stepped directly and several in the vector env; a finished board's
    # all-masked last state
    "tictactoe-one-copy": small_config(env=EnvConfig("pettingzoo.classic.tictactoe_v3:env", num_envs=1),
                                       frames_per_batch=32, total_frames=160),
    "connect-four-copies": small_config(env=EnvConfig("pettingzoo.classic.connect_four_v3:env", num_envs=3),
                                        frames_per_batch=48, total_frames=240),
}


@pytest.mark.parametrize("case", CASES)
def test_fast_batches_equal_torchrl_collector_batches(case):
    config = CASES[case]
    kind_a, torchrl_batches, state_a = _collect(config, "torchrl", batches=5)
    kind_b, fast_batches, state_b = _collect(config, "fast", batches=5)
    assert kind_a is Collector and kind_b is FastCollector
    assert any(b["next", "done"].any() for b in torchrl_batches[:4]), "the case must cover resets"
    if case.endswith("partial-resets"):  # some copies restart while others go on
        done = torch.cat([b["next", "done"].reshape(b.shape) for b in torchrl_batches], 1).sum(0)
        assert bool(((done > 0) & (done < config.env.num_envs)).any())
    # batch k+1 starts from the state batch k left (current step, counters, trajectory ids): comparing five
    # batches checks the carried state four times
    for a, b in zip(torchrl_batches, fast_batches, strict=True):
        assert b.names == a.names == [None, "time"]
        if config.model.shared_trunk:  # V(s) from the shared trunk's features, recorded as the fast loop goes
            recorded = b.pop(("collector", "state_value"))
            p = build_pipeline(config)  # the same seed: the same initial weights
            with torch.no_grad():
                torch.testing.assert_close(recorded, p.critic(b.clone())["state_value"], rtol=1e-6, atol=1e-6)
            p.collector.shutdown()
        _assert_same(a, b)
    # the state left after: RNG, transforms' statistics, the action spec's mask
    assert torch.equal(state_a["rng"], state_b["rng"])
    assert state_a["env"].keys() == state_b["env"].keys()
    assert all(torch.equal(state_a["env"][k], state_b["env"][k]) for k in state_a["env"])
    if state_a["mask"] is not None:
        assert torch.equal(state_a["mask"], state_b["mask"])


def test_truncated_steps_keep_the_final_observation():
    """The fast loop stores the true final observation of a truncated episode, not the reset one."""
    _, batches, _ = _collect(CASES["cartpole-truncated-shared"], "fast", batches=3)
    batch = torch.cat(batches, 1)
    truncated = batch["next", "truncated"].squeeze(-1)
    assert truncated.any()
    env_i, t = truncated.nonzero()[0].tolist()
    assert batch["next", "step_count"][env_i, t].item() == 20
    assert not torch.equal(batch["next", "observation"][env_i, t], batch["observation"][env_i, t + 1])
    assert batch["step_count"][env_i, t + 1].item() == 0 and batch["episode_reward"][env_i, t + 1].item() == 0


class Doubler(Transform):  # a transform the fast loop does not know
    def _call(self, td):
        return td


def test_default_pipeline_collects_fast_and_other_parts_fall_back():
    default = build_pipeline(get_preset("cartpole"))
    assert isinstance(default.collector, FastCollector)
    default.collector.shutdown()

    config = small_config()
    built = build_env(config.env, seed=1)
    built.env.append_transform(Doubler())
    p = build_pipeline(config, env=built)
    assert type(p.collector) is EnvLoopCollector  # 'auto': the env's own step in ppo_td's env loop runs it
    fast = dataclasses.replace(config, collector=CollectorConfig(step_loop="fast"))
    with pytest.raises(FastUnsupported, match="Doubler transform.*step_loop='auto' or 'torchrl'"):
        make_collector(built, p.actor, fast)
    p.collector.shutdown()
    # a bare TorchRL env (no vector env ppo_td can step): the env loop; TorchRL's Collector with step_loop='torchrl'
    p = build_pipeline(config, env=build_env(config.env, seed=1).env)
    assert type(p.collector) is EnvLoopCollector
    p.collector.shutdown()
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop="torchrl")),
                       env=build_env(config.env, seed=1).env)
    assert type(p.collector) is Collector
    p.collector.shutdown()


def test_policies_the_fast_loop_cannot_run_are_named():
    p = build_pipeline(small_config())

    class Custom(TensorDictModule):
        pass

    odd = Custom(torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["logits"])
    with pytest.raises(FastUnsupported, match="Custom"):
        FastCollector(p.built, odd, frames_per_batch=64, total_frames=64)
    # ppo_td's network, rewired under other keys, is not taken for ppo_td's actor
    wrapper = p.actor.module[0]
    assert policy_net(p.actor) is wrapper.module
    wrapper.out_keys = ["other_logits"]
    assert policy_net(p.actor) is None
    p.collector.shutdown()


def test_a_gsde_actor_on_an_env_without_its_noise_transform_is_refused_naming_the_fix():
    config = CASES["pendulum-gsde"]
    p = build_pipeline(config)
    with pytest.raises(FastUnsupported, match="gsde_noise.*add_policy_inputs"):
        FastCollector(build_env(config.env, seed=1), p.actor, frames_per_batch=64, total_frames=64)
    p.collector.shutdown()


def test_fast_is_in_process_only():
    with pytest.raises(ValueError, match="collector.step_loop"):
        CollectorConfig(backend="process", step_loop="fast")


# --- the fast loss forward against ClipPPOLoss.forward -------------------------------------------

LOSS_CASES = {
    "cleanrl": small_config(),  # value clipping, entropy bonus, advantage normalization
    "cartpole-preset-shared": dataclasses.replace(get_preset("cartpole"), model=ModelConfig(shared_trunk=True)),
    "pendulum": CASES["pendulum"],
    "trading-masked": CASES["trading-masked"],
    "multidiscrete-masked": CASES["multidiscrete-masked"],
    "pendulum-squashed": CASES["pendulum-squashed"],  # entropy sampled: both paths from the same seed
    "mountaincar-squashed": CASES["mountaincar-squashed"],  # ... and scored in closed form
    "pendulum-entropy": CASES["pendulum-entropy"],
    # gSDE: scored by the fast loss from the observation alone
    "pendulum-gsde": dataclasses.replace(CASES["pendulum-entropy"], model=ModelConfig(exploration="gsde",
                                                                                      log_std_init=-1.0)),
}


def _loss_and_grads(p, minibatch, fast):
    planned = p.loss.fast
    if not fast:
        p.loss.fast = None  # ppo_td's own attribute: ClipPPOLoss.forward runs
    torch.manual_seed(11)  # a tanh-squashed Gaussian's entropy is sampled: the same draws on both paths
    try:
        out = p.loss(minibatch)
    finally:
        p.loss.fast = planned
    grads = torch.autograd.grad(total_loss(out), p.parameters)
    out.set("rng_after", torch.get_rng_state())  # and the same random stream after
    return out, grads


def _ready(config):
    p = build_pipeline(dataclasses.replace(config, collector=dataclasses.replace(config.collector, inference="torch")))
    batch = next(iter(p.collector))
    p.collector.shutdown()
    with torch.no_grad():
        p.advantage(batch)
    return p, batch.reshape(-1)[: p.config.minibatch_size]


@pytest.mark.parametrize("case", LOSS_CASES)
def test_fast_loss_forward_equals_clipppoloss_forward(case):
    p, minibatch = _ready(LOSS_CASES[case])
    with torch.no_grad():  # move the policy and value away from the rollout's, so ratios and values get clipped
        for param in p.parameters:
            param.add_(0.3 * torch.randn_like(param))
    calls = []
    handle = p.loss.fast.actor.register_forward_hook(lambda *args: calls.append(1))
    fast, fast_grads = _loss_and_grads(p, minibatch, fast=True)
    assert isinstance(p.loss.fast, FastLoss) and p.loss.fast.applies(minibatch)  # the fast forward really ran
    reference, reference_grads = _loss_and_grads(p, minibatch, fast=False)
    handle.remove()
    assert len(calls) == 2  # the network itself ran on both paths, so hooks on it see both
    assert reference["clip_fraction"] > 0 and reference["kl_approx"] != 0
    if p.config.loss.clip_value is not None:
        assert reference["value_clip_fraction"] > 0
    assert list(fast.keys()) == list(reference.keys())  # same entries, same order (the loss sum's order)
    _assert_same(fast, reference)
    for a, b in zip(fast_grads, reference_grads, strict=True):
        if p.loss.fast.shared:  # the trunk ran once: its two gradient paths are summed in another order
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
        else:
            assert torch.equal(a, b)


def test_fast_loss_hands_back_what_it_does_not_compute():
    # a loss mask in the minibatch: ClipPPOLoss's masked reduction runs
    p, minibatch = _ready(small_config())
    assert p.loss.fast.applies(minibatch)
    masked = minibatch.clone().set(("collector", "mask"), torch.ones(minibatch.numel(), dtype=torch.bool))
    assert not p.loss.fast.applies(masked)
    # no advantage in the minibatch: ClipPPOLoss computes it with its value estimator
    assert not p.loss.fast.applies(minibatch.exclude("advantage"))
    # a setting changed after building: ClipPPOLoss runs it
    p.loss.reduction = "sum"
    assert not p.loss.fast.applies(minibatch)
    assert p.loss(minibatch)["loss_objective"].shape == ()  # ClipPPOLoss's own sum
    # the coefficients are read at every call: a changed clip range is used by the fast forward
    p.loss.reduction = "mean"
    with torch.no_grad():
        for param in p.parameters:
            param.add_(0.3 * torch.randn_like(param))
    wide, _ = _loss_and_grads(p, minibatch, fast=True)
    p.loss.clip_epsilon.fill_(0.01)
    fast, _ = _loss_and_grads(p, minibatch, fast=True)
    reference, _ = _loss_and_grads(p, minibatch, fast=False)
    _assert_same(fast, reference)
    assert fast["clip_fraction"] > wide["clip_fraction"]  # the same parameters, a narrower range: more clipped


def test_fast_loss_needs_ppo_tds_own_modules():
    p, _ = _ready(small_config())
    critic = TensorDictModule(torch.nn.Linear(4, 1), in_keys=["observation"], out_keys=["state_value"])
    from ppo_td.training import make_loss

    assert make_loss(p.actor, critic, p.config.loss).fast is None
    assert value_net(critic) is None
    assert make_loss(p.actor, p.critic, LossConfig(fast_forward=False)).fast is None


def test_training_with_and_without_the_fast_paths_is_identical():
    config = small_config(total_frames=64 * 4, collector=CollectorConfig(inference="torch"))
    fast = train(config)
    plain = train(dataclasses.replace(config, loss=dataclasses.replace(config.loss, fast_forward=False),
                                      collector=CollectorConfig(step_loop="torchrl")))
    assert isinstance(fast.pipeline.collector, FastCollector) and isinstance(fast.pipeline.loss.fast, FastLoss)
    assert isinstance(plain.pipeline.collector, Collector) and plain.pipeline.loss.fast is None
    keys = ("loss_policy", "loss_value", "loss_entropy", "grad_norm", "episode_return")
    assert [[m[k] for k in keys] for m in fast.history] == [[m[k] for k in keys] for m in plain.history]
    # the diagnostics: the fast update computes them once an epoch (epoch_metrics), in another summation order
    diagnostics = ("kl_k1", "kl_k3", "clip_fraction", "entropy", "value_clip_fraction")
    for a, b in zip(fast.history, plain.history, strict=True):
        # (kl_k3 = mean ratio - 1 + k1 cancels: one float32 step of the mean ratio is 1.2e-7)
        assert [a[k] for k in diagnostics] == pytest.approx([b[k] for k in diagnostics], rel=1e-6, abs=1e-6)
    assert fast.eval_returns == plain.eval_returns


def test_forward_hooks_on_the_networks_see_the_fast_collectors_calls():
    """The fast collector calls ppo_td's networks themselves: a hook on the network fires at every step."""
    config = CASES["cartpole-truncated-shared"]
    _, torchrl_batches, _ = _collect(config, "torchrl", batches=2)
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop="fast", inference="torch")))
    calls = []
    handle = policy_net(p.actor).register_forward_hook(lambda *args: calls.append("actor"))
    batches = [b for _, b in zip(range(2), p.collector, strict=False)]
    assert len(calls) == 2 * batches[0].shape[1]  # one policy call per step
    for a, b in zip(torchrl_batches, batches, strict=True):
        _assert_same(a, b.exclude(("collector", "state_value")))  # the shared trunk's V(s), checked above
    handle.remove()
    p.collector.shutdown()


def test_a_transform_added_after_building_is_not_skipped():
    p = build_pipeline(small_config())
    next(iter(p.collector))
    p.env.append_transform(Doubler())
    with pytest.raises(FastUnsupported, match="changed after the fast collector was built.*Doubler"):
        next(iter(p.collector))


@pytest.mark.parametrize("case", ["cartpole-truncated-shared", "cartpole-sync-normalized"])
def test_a_snapshot_continues_the_same_batches(case):
    """capture() after a batch, restore_snapshot() into a new pipeline: it collects the same next batch
    (numpy-vectorized CartPole and per-copy envs with normalization)."""
    config = CASES[case]
    a = build_pipeline(config)
    it = iter(a.collector)
    next(it)
    snapshot = capture(a)
    env_state = {k: v.clone() for k, v in a.env.state_dict().items()}  # state_dict() holds live buffers
    expected = next(it)
    b = build_pipeline(config)
    b.env.load_state_dict(env_state)
    assert restore_snapshot(b, snapshot)  # exact
    _assert_same(expected, next(iter(b.collector)))
    a.collector.shutdown()
    b.collector.shutdown()


def test_fast_loss_reports_broken_parameters_and_refuses_a_graph_in_the_log_prob():
    p, minibatch = _ready(CASES["pendulum"])
    with torch.no_grad():
        p.loss.fast.actor.head.log_std.fill_(-200.0)  # scale exp(-200) == 0 in float32: entropy -inf
    assert not torch.isfinite(total_loss(p.loss(minibatch)))  # non-finite, for the update to report
    p, minibatch = _ready(small_config())
    key = p.loss.tensor_keys.sample_log_prob
    leaky = minibatch.clone().set(key, minibatch.get(key).clone().requires_grad_())
    with pytest.raises(RuntimeError, match="requires grad"):
        p.loss(leaky)


def test_fast_loss_honours_torchrls_loss_mask_keys():
    """'auto' (ClipPPOLoss's default) masks by ("collector", "mask") or "shifted_valid"; a key set by the user
    masks by that key: a minibatch carrying any of them goes to ClipPPOLoss's masked reduction."""
    p, minibatch = _ready(small_config())
    valid = torch.ones(minibatch.numel(), dtype=torch.bool)
    assert not p.loss.fast.applies(minibatch.clone().set("shifted_valid", valid))
    p.loss.loss_mask_key = ("mine", "valid")
    assert p.loss.fast.applies(minibatch.clone().set("shifted_valid", valid))
    assert not p.loss.fast.applies(minibatch.clone().set(("mine", "valid"), valid))


def test_a_transform_appended_before_building_sizes_the_networks():
    """The pipeline describes the env as it is when built: an appended frame stack doubles the observation."""
    from torchrl.envs import CatFrames

    config = small_config()
    built = build_env(config.env, seed=1)
    built.env.append_transform(CatFrames(N=2, dim=-1, in_keys=["observation"]))
    p = build_pipeline(config, env=built)
    assert p.description.observation_shape == (8,) and built.description.observation_shape == (4,)
    assert type(p.collector) is EnvLoopCollector  # the fast collector does not run CatFrames: the env loop does
    batch = next(iter(p.collector))
    assert batch["observation"].shape[-1] == 8
    p.collector.shutdown()


class OneEntryDict(gym.Env):
    """A Dict observation whose only entry is named "observation": no nesting, but Gymnasium hands out dicts."""

    observation_space = gym.spaces.Dict({"observation": gym.spaces.Box(-1.0, 1.0, (3,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return {"observation": np.zeros(3, np.float32)}, {}

    def step(self, action):
        self.t += 1
        obs = {"observation": np.full(3, self.t / 10, np.float32)}
        return obs, float(action), self.t >= 5, False, {}


def test_numpy_step_for_box_observations_and_dicts_of_them():
    # a one-entry Dict (Gymnasium hands out dicts) takes the numpy step too; the same batches as TorchRL's Collector
    config = dataclasses.replace(small_config(), env=EnvConfig("test_fast:OneEntryDict", num_envs=2),
                                 frames_per_batch=16, total_frames=32, collector=CollectorConfig(inference="torch"))
    fast = build_pipeline(config)
    assert isinstance(fast.collector, FastCollector) and fast.collector.fast_env._array_steps is not None
    batch = next(iter(fast.collector))
    fast.collector.shutdown()
    reference = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop="torchrl")))
    _assert_same(next(iter(reference.collector)), batch)
    reference.collector.shutdown()
    box = build_pipeline(small_config())  # CartPole: a Box
    assert box.collector.fast_env._array_steps is not None
    box.collector.shutdown()
    # integer Boxes, games' Dicts of a board and its mask, and a Discrete observation too (the cases above); a Dict
    # with a Discrete entry or nested entries (read by TorchRL's readers as one-hot or nested TensorDicts) keeps the
    # tensor step
    for case, numpy_step in (("uint8-vector-normalized", True), ("uint8-vector-one-copy", True),
                             ("tictactoe-one-copy", True), ("connect-four-copies", True), ("taxi-info-mask", True),
                             ("frozenlake-discrete", True), ("frozenlake-one-copy", True), ("seek-dict", False),
                             ("blackjack-tuple", False)):
        p = build_pipeline(CASES[case])
        assert (p.collector.fast_env._array_steps is not None) == numpy_step, case
        assert (p.collector.fast_env._one_copy is not None) == case.endswith("one-copy")
        p.collector.shutdown()


def test_minibatches_keep_every_entry_for_another_sampler():
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers import RandomSampler

    from ppo_td.training.loop import _loss_data

    config = small_config()
    default = build_pipeline(config)
    batch = next(iter(default.collector))
    default.collector.shutdown()
    with torch.no_grad():
        default.advantage(batch)
    lean = _loss_data(default, batch)
    assert ("next", "reward") not in lean.keys(True) and "advantage" in lean.keys()
    custom = build_pipeline(config, buffer=ReplayBuffer(storage=LazyTensorStorage(64), sampler=RandomSampler(),
                                                        batch_size=64))
    custom.collector.shutdown()
    kept = set(_loss_data(custom, batch).keys(True))  # a sampler may read any entry but the next observations
    assert kept == set(batch.keys(True)) - {("next", "observation")} and ("next", "done") in kept


@pytest.mark.parametrize("entropy_coeff", [0.01, 0.0])
def test_lean_terms_and_epoch_metrics_equal_the_full_outputs(entropy_coeff):
    """The update's lean path (FastLoss.terms, then epoch_metrics once an epoch): the same loss and gradients as
    the full outputs, bit for bit, and each minibatch's diagnostics within float rounding, minibatches of unequal
    sizes included. With a zero entropy coefficient the lean loss leaves the entropy term out of its graph."""
    from ppo_td.training.objective import epoch_metrics

    config = small_config(collector=CollectorConfig(inference="torch"), frames_per_batch=160)
    config = dataclasses.replace(config, loss=dataclasses.replace(config.loss, entropy_coeff=entropy_coeff))
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    p.collector.shutdown()
    with torch.no_grad():
        p.advantage(batch)
        for param in p.parameters:  # away from the rollout's policy: ratios and values get clipped
            param.add_(0.3 * torch.randn_like(param))
    minibatches = batch.reshape(-1).split([64, 64, 32])
    full = [p.loss.fast(mb) for mb in minibatches]
    lean = [p.loss.fast.terms(mb) for mb in minibatches]
    for out, (loss, _) in zip(full, lean, strict=True):
        assert torch.equal(loss, total_loss(out))
        for a, b in zip(torch.autograd.grad(loss, p.parameters), torch.autograd.grad(total_loss(out), p.parameters),
                        strict=True):
            assert torch.equal(a, b)
    metrics = epoch_metrics([t for _, t in lean], p.loss.clip_epsilon, p.loss.clip_value)
    assert sum(float(out["clip_fraction"]) for out in full) > 0 and sum(float(out["value_clip_fraction"])
                                                                        for out in full) > 0
    for out, m in zip(full, metrics, strict=True):
        assert set(m) == {"loss_objective", "loss_entropy", "loss_critic", "kl_approx", "kl_approx_k3",
                          "clip_fraction", "entropy", "value_clip_fraction"}
        for key, value in m.items():
            torch.testing.assert_close(value, out[key].detach(), rtol=1e-6, atol=1e-6)


class ReusedBuffer(gym.Env):
    """Returns the same observation array every step, updated in place (as some simulators' wrappers do)."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.obs = 0, np.zeros(2, np.float32)
        return self.obs, {}

    def step(self, action):
        self.t += 1
        self.obs[:] = self.t / 10
        return self.obs, 1.0, False, self.t >= 7, {}


def test_one_env_copy_is_stepped_directly_and_its_observations_are_copied():
    """One copy in a SyncVectorEnv: FastEnv steps it without the vector env's step (bit for bit the same batches,
    the one-copy cases above), copying each observation as the vector env does, so an env that hands out one
    array updated in place still fills the batch with each step's values."""
    one = build_pipeline(dataclasses.replace(small_config(), env=EnvConfig("test_fast:ReusedBuffer", num_envs=1),
                                             frames_per_batch=16, total_frames=32))
    assert one.collector.fast_env._one_copy is not None
    batch = next(iter(one.collector))
    one.collector.shutdown()
    # 7-step episodes: the observation is the step count / 10 (0 at a reset)
    assert batch["observation"][0, :, 0].tolist() == pytest.approx([(i % 7) / 10 for i in range(16)])
    assert batch["next", "observation"][0, :, 0].tolist() == pytest.approx([(i % 7 + 1) / 10 for i in range(16)])
    two = build_pipeline(dataclasses.replace(small_config(), env=EnvConfig("test_fast:ReusedBuffer", num_envs=2),
                                             frames_per_batch=16, total_frames=32))
    assert two.collector.fast_env._one_copy is None  # two copies: the vector env steps them
    two.collector.shutdown()


@pytest.mark.slow  # four worker processes start (spawn): about 15 s
def test_async_copies_collect_the_same_batches_as_sync_ones():
    """env.vectorization='async' (each copy in a process of its own, Gymnasium's AsyncVectorEnv): the same seeds,
    the same batches as the copies stepped in this process; a resume from it says it starts fresh episodes."""
    config = _cartpole(vectorization="sync", max_episode_steps=20)
    _, sync_batches, sync_state = _collect(config, "fast", batches=3)
    config = _cartpole(vectorization="async", max_episode_steps=20)
    kind, async_batches, async_state = _collect(config, "fast", batches=3)
    assert kind is FastCollector
    for a, b in zip(sync_batches, async_batches, strict=True):
        _assert_same(a, b)
    assert torch.equal(sync_state["rng"], async_state["rng"])
    p = build_pipeline(config)
    try:
        assert "AsyncVectorEnv steps its env copies where ppo_td cannot read them" in (why_inexact(p) or "")
    finally:
        p.collector.shutdown()
