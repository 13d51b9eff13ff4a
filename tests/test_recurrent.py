"""Recurrent PPO: the fast paths against TorchRL's (collection and the loss within float rounding), the
replay of stored states (first-epoch log-probs equal the collected ones), resets inside sequences, exact resume,
bad input, and the memory tasks: a cue recalled (memory needed) and a masked cue recalled (memory and masks)."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from test_resume import _equal, _interrupt_and_resume, _strip
from torchrl.collectors import Collector
from torchrl.modules import set_recurrent_mode

from ppo_td.collect import FastCollector
from ppo_td.config import CollectorConfig, EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig
from ppo_td.models import is_recurrent, make_actor_critic, recurrent_parts
from ppo_td.models.recurrent import cell_step, one_layer
from ppo_td.persist import Checkpointer, load_checkpoint, restore
from ppo_td.training import build_pipeline, total_loss, train
from ppo_td.training.loop import _loss_data, sequences, update

VARIANTS = [("lstm", False), ("lstm", True), ("gru", False), ("gru", True)]


def _config(kind="lstm", shared=False, **changes):
    """CartPole with short episodes (resets inside every sequence), a recurrent model, normalized observations."""
    base = TrainConfig(env=EnvConfig("CartPole-v1", num_envs=4, max_episode_steps=10, normalize_observations=True),
                       model=ModelConfig(hidden_sizes=(16,), recurrent=kind, recurrent_size=16,
                                         shared_recurrent=shared),
                       optim=OptimConfig(update_epochs=2, num_minibatches=2, sequence_length=8),
                       frames_per_batch=64, total_frames=256, eval_episodes=2)
    return dataclasses.replace(base, **changes)


def _cue(kind, seed, masked=False, length=6):
    """The CI-sized memory task: 16 envs x 16 steps, 12k frames."""
    env_id = "ppo_td.envs.partial:" + ("masked_cue_recall" if masked else "CueRecall")
    return TrainConfig(env=EnvConfig(env_id, num_envs=16, kwargs=(f"length={length}",)),
                       model=ModelConfig(hidden_sizes=(32,), recurrent=kind, recurrent_size=32),
                       loss=LossConfig(gamma=0.99, gae_lambda=0.95, entropy_coeff=0.01, clip_value=None),
                       optim=OptimConfig(lr=3e-3, update_epochs=4, num_minibatches=4),
                       total_frames=12_288, frames_per_batch=256, seed=seed, eval_episodes=32)


def _batches(config, step_loop, n=4):
    p = build_pipeline(dataclasses.replace(config, collector=CollectorConfig(step_loop=step_loop)))
    out = []
    for batch in p.collector:
        out.append(batch)
        if len(out) == n:
            break
    kind = type(p.collector)
    p.collector.shutdown()
    return kind, out, torch.get_rng_state()


@pytest.mark.parametrize(("kind", "shared"), VARIANTS)
def test_fast_recurrent_batches_equal_torchrl_collector_batches(kind, shared):
    """The fast collector carries the recurrent states, ``is_init`` and V(s) as TorchRL's Collector does with the
    InitTracker and primer transforms (which also writes the cores' intermediate outputs): the same actions, flags,
    observations and RNG use; states, log-probs and values within float rounding (the fast step computes the cell's
    gates itself, :func:`~ppo_td.models.recurrent.cell_step`; the module's kernel sums in another order)."""
    config = _config(kind, shared)
    kind_a, slow, rng_a = _batches(config, "torchrl")
    kind_b, fast, rng_b = _batches(config, "fast")
    assert kind_a is Collector and kind_b is FastCollector
    assert all(b["is_init"][:, 1:].any() for b in slow), "the case must reset inside the batches"
    for a, b in zip(slow, fast, strict=True):
        recorded = b.pop(("collector", "state_value"))
        if "state_value" in a.keys():  # a critic with a core of its own runs in TorchRL's collection policy
            torch.testing.assert_close(recorded, a["state_value"], rtol=1e-6, atol=1e-6)
        only_torchrl = {k for k in a.keys() if k.endswith(("_memory", "_features")) or k == "state_value"}
        assert set(a.keys(True, True)) - only_torchrl == set(b.keys(True, True))
        for key in b.keys(True, True):
            x, y = a[key], b[key]
            assert x.dtype == y.dtype and x.shape == y.shape, key
            name = key if isinstance(key, str) else key[-1]
            if "info" in key:  # the env's infos (NaN where not reported), bit for bit
                torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True, msg=str(key))
            elif x.is_floating_point() and name not in ("observation", "reward", "episode_reward"):  # from the nets
                torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-6, msg=lambda m, key=key: f"{key}: {m}")
            else:  # actions, flags, counters, ids; the env's outputs (the same actions, so the same steps)
                assert torch.equal(x, y), key
    assert torch.equal(rng_a, rng_b)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_closed_form_step_equals_the_module(kind):
    """:func:`cell_step` against ``torch.nn.LSTM`` / ``GRU`` on one step, with and without biases, from random
    states: within float rounding (it is what the fast collector and a deployed policy run)."""
    torch.manual_seed(0)
    for bias in (True, False):
        run = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(3, 16, bias=bias)
        x, state = torch.randn(5, 3), [torch.randn(5, 16) for _ in range(2 if kind == "lstm" else 1)]
        with torch.no_grad():
            _, ref = run(x.unsqueeze(0), tuple(s.unsqueeze(0) for s in state) if kind == "lstm" else
                         state[0].unsqueeze(0))
            got = cell_step(run, x, state)
        for want, have in zip(ref if kind == "lstm" else [ref], got, strict=True):
            torch.testing.assert_close(have, want[0], rtol=1e-6, atol=1e-6)
    assert one_layer(run) and not one_layer(torch.nn.LSTM(3, 16, num_layers=2))


@pytest.mark.parametrize(("kind", "shared"), VARIANTS)
def test_first_epoch_replays_the_collected_log_probs_and_values(kind, shared):
    """Sequences replayed from their stored states, resetting where an episode starts, give the log-probs and
    values of collection: on ppo_td's plain-tensor path and in TorchRL's recurrent mode."""
    p = build_pipeline(_config(kind, shared))
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    data = sequences(batch.clone(), 8)
    assert data["is_init"][:, 1:].any()
    actor, critic = recurrent_parts(p.actor), recurrent_parts(p.critic)
    with torch.no_grad():
        is_init = data["is_init"].squeeze(-1)
        memory = actor.sequence(data["observation"], [data[k] for k in actor.state], is_init)
        logits = actor.head(memory)
        fast_lp = torch.distributions.Categorical(logits=logits).log_prob(data["action"])
        value = critic.head(critic.sequence(data["observation"], [data[k] for k in critic.state], is_init))
        with set_recurrent_mode(True):
            torchrl_lp = p.actor.get_dist(data.clone()).log_prob(data["action"])
            torchrl_value = p.critic(data.clone())["state_value"]
    torch.testing.assert_close(fast_lp, data["action_log_prob"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torchrl_lp, data["action_log_prob"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(value, data["state_value"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torchrl_value, data["state_value"], rtol=1e-5, atol=1e-6)


def test_the_first_update_epoch_starts_at_ratio_one():
    """In the loop itself: the first minibatch of the first epoch has ratio 1 and zero KL (no state mismatch)."""
    p = build_pipeline(_config())
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    data = sequences(_loss_data(p, batch), 8)
    with set_recurrent_mode(True):
        out = p.loss(data[:4])
    assert abs(float(out["mean_ratio"]) - 1) < 1e-5 and abs(float(out["kl_approx"])) < 1e-6


def test_a_sequence_resets_where_an_episode_starts():
    """Against a step-by-step loop over the same inputs: the state is zeroed at every ``is_init``, wherever it
    falls in the sequence, and carried elsewhere."""
    torch.manual_seed(0)
    actor, _ = make_actor_critic(build_pipeline(_config()).description, _config().model)
    core = recurrent_parts(actor)
    obs, is_init = torch.randn(3, 7, 4), torch.zeros(3, 7, dtype=torch.bool)
    is_init[0, 3] = is_init[1, 0] = is_init[1, 5] = is_init[2, 6] = True
    state = [torch.randn(3, 7, 1, 16) for _ in core.state]
    with torch.no_grad():
        out = core.sequence(obs, state, is_init)
        loop, now = [], [s[:, 0] for s in state]
        for t in range(7):
            step, now = core.step(obs[:, t], now, is_init[:, t])
            loop.append(step)
    torch.testing.assert_close(out, torch.stack(loop, 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("kind", "shared"), [("lstm", False), ("gru", True)])
def test_fast_recurrent_loss_equals_clipppoloss_in_recurrent_mode(kind, shared):
    """The plain-tensor loss (segments between resets, heads on flattened steps) against ClipPPOLoss over
    TorchRL's recurrent mode: the same losses, gradients within float rounding."""
    p = build_pipeline(_config(kind, shared))
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    data = sequences(_loss_data(p, batch), 8)
    fast, results = p.loss.fast, []
    assert fast is not None and fast.cores is not None
    for use_fast in (True, False):
        p.loss.fast = fast if use_fast else None
        p.optimizer.zero_grad()
        with set_recurrent_mode(True):
            out = p.loss(data)
        total_loss(out).backward()
        results.append((out, [q.grad.clone() for q in p.parameters]))
    p.loss.fast = fast
    (a, grads_a), (b, grads_b) = results
    for key in ("loss_objective", "loss_critic", "loss_entropy", "entropy", "kl_approx", "clip_fraction"):
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)
    for x, y in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)


def test_recurrent_runs_resume_exactly(tmp_path):
    full, first, second, resumed = _interrupt_and_resume(_config(total_frames=384), tmp_path, at=3)
    assert resumed.exact
    _equal(_strip(full.history), _strip(first.history + second.history))


def test_a_custom_recurrent_actor_is_trained_through_time():
    """A recurrent actor passed from Python (TorchRL's LSTMModule in a ProbabilisticActor) gets the env's memory
    transforms and sequence minibatches: before, an LSTM in a custom actor ran without backpropagation through
    time, silently."""
    config = _config()
    actor, critic = make_actor_critic(build_pipeline(config).description, config.model)
    p = build_pipeline(dataclasses.replace(config, model=ModelConfig(hidden_sizes=(16,))), actor=actor,
                       critic=critic)
    assert p.sequence_length == 8 and "is_init" in p.env.observation_spec.keys()
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    update(p, batch)
    assert tuple(p.buffer.sample().batch_size) == (config.num_sequences, 8)


@pytest.mark.parametrize(("env", "step_loop"), [
    (EnvConfig("FrozenLake-v1", num_envs=4, max_episode_steps=12), "fast"),  # Discrete observations: one-hot
    (EnvConfig("examples.trading:ppo_td/Trading-v0", num_envs=4, max_episode_steps=12), "fast"),  # masked Dict
    (EnvConfig("examples.trading:ppo_td/Trading-v0", num_envs=4, max_episode_steps=12), "torchrl"),
])
def test_an_encoder_sits_in_front_of_the_core(env, step_loop):
    """Observations that need an encoder (one-hot) reach the core through it, masks from a Dict observation reach
    the masked head; the replay through time gives back the collected log-probs on either collector."""
    p = build_pipeline(_config(env=env, collector=CollectorConfig(step_loop=step_loop)))
    assert isinstance(p.collector, FastCollector if step_loop == "fast" else Collector)
    assert (recurrent_parts(p.actor).encoder is not None) == (env.env_id == "FrozenLake-v1")  # Trading: floats
    batch = next(iter(p.collector))
    p.collector.shutdown()
    assert batch["is_init"][:, 1:].any()
    data = sequences(batch, 8)
    with torch.no_grad(), set_recurrent_mode(True):
        replayed = p.actor.get_dist(data.clone()).log_prob(data["action"])
    torch.testing.assert_close(replayed, data["action_log_prob"], rtol=1e-5, atol=1e-6)


def test_a_feed_forward_critic_beside_a_recurrent_actor_runs_on_the_fast_paths():
    config = _config()
    description = build_pipeline(config).description
    actor = make_actor_critic(description, config.model)[0]
    critic = make_actor_critic(description, ModelConfig(hidden_sizes=(16,)))[1]
    p = build_pipeline(config, actor=actor, critic=critic)
    assert isinstance(p.collector, FastCollector) and p.loss.fast is not None and p.loss.fast.cores[1] is None
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    data = sequences(_loss_data(p, batch), 8)
    with set_recurrent_mode(True):
        fast = p.loss(data)
        p.loss.fast, reference = None, None
        reference = p.loss(data)
    for key in ("loss_objective", "loss_critic", "kl_approx"):
        torch.testing.assert_close(fast[key], reference[key], rtol=1e-5, atol=1e-6)
    assert abs(float(fast["mean_ratio"]) - 1) < 1e-5


@pytest.mark.slow
def test_worker_processes_carry_the_recurrent_states():
    """TorchRL's MultiSyncCollector over worker envs with InitTracker and the primer: the batch stores the state
    each step acted from, so its sequences replay to the collected log-probs."""
    config = _config(collector=CollectorConfig(backend="process", num_workers=2))
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
    assert batch["is_init"][:, 1:].any() and {"actor_h", "critic_c"} <= set(batch.keys())
    data = sequences(batch, 8)
    with torch.no_grad(), set_recurrent_mode(True):
        replayed = p.actor.get_dist(data.clone()).log_prob(data["action"])
    torch.testing.assert_close(replayed, data["action_log_prob"], rtol=1e-5, atol=1e-6)


def test_bad_recurrent_settings_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="at most the rollout of each env"):
        _config(optim=OptimConfig(num_minibatches=2, sequence_length=32))
    with pytest.raises(ValueError, match="a divisor of the rollout"):
        _config(optim=OptimConfig(num_minibatches=2, sequence_length=5))
    with pytest.raises(ValueError, match="minibatches are whole sequences"):
        _config(optim=OptimConfig(num_minibatches=16, sequence_length=8))
    with pytest.raises(ValueError, match="model.shared_recurrent=True"):
        ModelConfig(recurrent="lstm", shared_trunk=True)


def test_a_recurrent_checkpoint_in_a_feed_forward_pipeline_names_the_mismatch(tmp_path):
    config = _config(total_frames=128)
    train(config, callbacks=[Checkpointer(tmp_path, every=1, keep=1)])
    state = load_checkpoint(tmp_path)
    p = build_pipeline(dataclasses.replace(config, model=ModelConfig(hidden_sizes=(16,))))
    with pytest.raises(ValueError, match=r"feed-forward network.*recurrent='lstm'"):
        restore(p, state)


@pytest.mark.slow
def test_memory_is_needed_and_learned():
    """The cue is shown at the first step and must be named at the last: a memoryless policy cannot beat chance
    (expected return 0), an LSTM and a GRU recall it (return 1) within 12k frames."""
    for kind in ("lstm", "gru"):
        result = train(_cue(kind, seed=1))
        assert sum(result.eval_returns) / len(result.eval_returns) >= 0.9, kind
    feed_forward = train(_cue("none", seed=1))
    assert sum(feed_forward.eval_returns) / len(feed_forward.eval_returns) <= 0.5


@pytest.mark.slow
def test_masked_memory_task_needs_both():
    """Wait is the only legal action until the last step, where it is illegal (the env raises on an illegal
    action): the masked recurrent policy never takes one and recalls the cue."""
    result = train(_cue("lstm", seed=1, masked=True))
    assert sum(result.eval_returns) / len(result.eval_returns) >= 0.9
    assert is_recurrent(result.actor)


@pytest.mark.slow
def test_the_composition_example_in_docs_recurrent_runs(capsys):
    """docs/recurrent.md's example, a recurrent actor and critic from TorchRL's parts, as written."""
    text = (Path(__file__).parent.parent / "docs" / "recurrent.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/recurrent.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("[")  # its print, after the run's lines


def test_evaluation_starts_each_episode_from_a_zero_state():
    p = build_pipeline(_config())
    from ppo_td.models import add_memory
    from ppo_td.training.evaluation import make_eval_env

    env = add_memory(make_eval_env(p.config.env, 2, seed=0, obs_stats=p.observation_stats()), p.actor)
    td = env.reset()
    assert td["is_init"].all() and all(td[k].abs().sum() == 0 for k in recurrent_parts(p.actor).state)
    assert isinstance(td, TensorDict)


@pytest.mark.slow
def test_the_cli_learns_the_memory_task_on_the_generic_defaults(tmp_path):
    """`ppo-td train --env.env-id ppo_td.envs.partial:CueRecall --model.recurrent lstm` and nothing else: no preset is
    made for the env, the generic defaults get sequences and minibatches fitted, and the cue is recalled."""
    from ppo_td.cli.main import main

    run = tmp_path / "cue"
    assert main(["train", "--env.env-id", "ppo_td.envs.partial:CueRecall", "--model.recurrent", "lstm",
                 "--total-frames", "24576", "--run-dir", str(run)]) == 0
    config = json.loads((run / "config.json").read_text())
    assert (config["optim"]["sequence_length"], config["optim"]["num_minibatches"]) == (32, 32)
    returns = json.loads((run / "summary.json").read_text())["eval_returns"]
    assert len(returns) == 10 and sum(returns) / len(returns) >= 0.9
