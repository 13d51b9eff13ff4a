"""The update's mechanics: minibatch coverage, learning-rate annealing, target-KL early stop."""

import dataclasses

import pytest
import torch
from torchrl.data import LazyTensorStorage, RandomSampler, ReplayBuffer, SamplerWithoutReplacement

from conftest import small_config
from ppo_td.config import OptimConfig
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, train, update


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


class CountingBuffer(ReplayBuffer):
    """A replay buffer that counts its draws."""

    draws = 0

    def sample(self, *args, **kwargs):
        CountingBuffer.draws += 1
        return super().sample(*args, **kwargs)


@pytest.mark.parametrize(("sampler", "batch_size", "minibatches", "draws"), [
    (SamplerWithoutReplacement(drop_last=True), 64, 1, 1),  # ppo_td's: the whole batch reordered, once an update
    (SamplerWithoutReplacement(drop_last=True), 64, 2, 3),  # two minibatches an epoch: a fresh order every epoch
    (SamplerWithoutReplacement(drop_last=True), 32, 1, 3),  # half the batch a draw: the next half every epoch
    (RandomSampler(), 64, 1, 3),  # with replacement: a new resample every epoch
])
def test_an_epoch_of_the_whole_batch_is_drawn_once_an_update_and_any_other_draw_every_epoch(
        sampler, batch_size, minibatches, draws):
    """An epoch of one minibatch that is the whole batch (RL Zoo's MountainCarContinuous and CartPole entries) computes
    nothing that depends on its order: drawn once an update. A user's buffer that draws anything else draws afresh
    every epoch, as before."""
    config = small_config(eval_episodes=0, optim=OptimConfig(update_epochs=3, num_minibatches=minibatches))
    buffer = CountingBuffer(storage=LazyTensorStorage(64), sampler=sampler, batch_size=batch_size)
    p = build_pipeline(config, buffer=buffer)
    batch = next(iter(p.collector))
    p.collector.shutdown()
    with torch.no_grad():
        p.advantage(batch)
    CountingBuffer.draws = 0
    assert update(p, batch)["epochs"] == 3
    assert CountingBuffer.draws == draws


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
    """What the optimizer steps with, seen from inside the update: every step's global gradient norm is at
    most max_grad_norm, while the reported pre-clip norm is above it (so clipping did the work)."""
    optim = OptimConfig(lr=1e-3, max_grad_norm=1e-3)
    p = build_pipeline(small_config(optim=optim, eval_episodes=0))
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    seen = []

    def record(optimizer, args, kwargs):
        grads = [q.grad for group in optimizer.param_groups for q in group["params"] if q.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))

    handle = p.optimizer.register_step_pre_hook(record)
    metrics = update(p, batch)
    handle.remove()
    p.collector.shutdown()
    steps = optim.update_epochs * optim.num_minibatches
    assert len(seen) == steps
    assert metrics["grad_norm"] > 10 * optim.max_grad_norm  # the raw norms were far above the limit
    assert max(seen) == pytest.approx(optim.max_grad_norm, rel=1e-3)


def test_metrics_are_recorded_each_iteration(tiny_config):
    result = train(tiny_config)
    needed = {"episode_return", "episode_length", "loss_policy", "loss_value", "loss_entropy", "kl_k1", "kl_k3",
              "clip_fraction", "explained_variance", "lr", "grad_norm", "sps"}
    assert len(result.history) == tiny_config.num_iterations
    for m in result.history:
        assert needed <= m.keys()
    assert result.history[-1]["frames"] == tiny_config.num_iterations * tiny_config.frames_per_batch


def test_the_in_memory_history_is_bounded():
    """A run of days keeps a bounded window of metric rows and episodes in memory (the run folder has them
    all): Recent keeps the newest window..2*window items, trimming in one step."""
    from ppo_td.training.loop import Recent, TrainResult

    rows = Recent(window=3)
    for i in range(100):
        rows.append(i)
        assert 1 <= len(rows) < 6 and rows[-1] == i
    rows.extend(range(100, 110))
    assert rows[-3:] == [107, 108, 109] and len(rows) < 6
    result = TrainResult(actor=None, critic=None, pipeline=None)
    assert isinstance(result.history, Recent) and isinstance(result.episodes, Recent)


def test_history_rows_do_not_repeat_the_episodes(tiny_config):
    result = train(tiny_config)
    assert all("ended_episodes" not in row for row in result.history)
    assert result.episodes  # they are kept once, here


def _first_minibatch(preset):
    """A pipeline of ``preset`` (one batch's budget) and the first minibatch of its first batch, with advantages, as
    the update's loss reads it."""
    from ppo_td.training.loop import _loss_data

    config = get_preset(preset)
    config = dataclasses.replace(config, total_frames=config.frames_per_batch, eval_episodes=0)
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    p.collector.shutdown()
    with torch.no_grad():
        p.advantage(batch)
    return p, _loss_data(p, batch).reshape(-1)[: config.minibatch_size]


@pytest.mark.slow  # about 10 s of compiling each
@pytest.mark.parametrize("preset", ["cleanrl", "pendulum", "mountaincar-continuous"])
def test_the_compiled_loss_is_one_graph(preset):
    """compile=True's loss (a categorical policy with the value loss clipped, a Gaussian, a gSDE policy) compiles
    into one graph (torch.compile's fullgraph refuses a break: one made by an `if` on the loss's clip_value tensor
    cost most of the gain) and gives the eager loss within float rounding."""
    p, minibatch = _first_minibatch(preset)
    assert bool(p.loss.clip_value) == (preset == "cleanrl")
    loss, terms = p.loss.fast.compiled_terms(p.device, fullgraph=True)(minibatch)
    eager, eager_terms = p.loss.fast.terms(minibatch)
    torch.testing.assert_close(loss, eager, rtol=1e-5, atol=1e-6)
    for key, value in eager_terms.losses.items():
        torch.testing.assert_close(terms.losses[key], value, rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.slow  # torch.compile compiles the loss and the policy step: about half a minute on 2 cores
def test_compiled_update_and_policy_step_equal_eager_within_float_rounding():
    """config.compile: the minibatch loss (forward and backward) and the fast collector's torch policy step through
    torch.compile; two iterations give the same losses and weights as eager within float rounding."""
    base = get_preset("pendulum")
    base = dataclasses.replace(base, env=dataclasses.replace(base.env, num_envs=2), frames_per_batch=256,
                               total_frames=512, eval_episodes=0,
                               collector=dataclasses.replace(base.collector, inference="torch"))
    runs = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        result = train(dataclasses.replace(base, compile=compiled))
        runs[compiled] = result
    eager, compiled = runs[False], runs[True]
    assert compiled.pipeline.collector.fast_policy.forward is not compiled.pipeline.collector.fast_policy.net
    for a, b in zip(eager.history, compiled.history, strict=True):
        for key in ("loss_policy", "loss_value", "kl_k3", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-3, abs=1e-5), key
    for (name, a), b in zip(eager.actor.state_dict().items(), compiled.actor.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


def test_terms_replayed_as_cuda_graphs_are_copies_that_the_next_replay_leaves_alone(monkeypatch):
    """cudagraphs=True: a CUDA graph writes every replay's outputs into the same memory, and the update keeps each
    minibatch's terms until the epoch's end. A stand-in for the graph (one set of output tensors, overwritten in place
    by each call) shows the kept terms are copies, and that each call marks a new step."""
    from ppo_td.training.objective import LeanTerms, _replayed

    out = LeanTerms(losses={"loss_objective": torch.zeros(())}, log_weight=torch.zeros(4), entropy=torch.zeros(4),
                    pre_clipped=None)
    loss = torch.zeros((), requires_grad=True)
    steps = []

    def graph(td):  # the graph's static outputs, written again by each replay
        value = float(len(steps))
        for t in (out.losses["loss_objective"], out.log_weight, out.entropy):
            t.fill_(value)
        return loss, out

    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: steps.append(1))
    kept = [_replayed(graph, None)[1] for _ in range(3)]
    assert len(steps) == 3
    for i, terms in enumerate(kept):  # each call's values, not the last replay's
        assert float(terms.losses["loss_objective"]) == i + 1 and terms.log_weight.tolist() == [i + 1.0] * 4
        assert terms.entropy.data_ptr() != out.entropy.data_ptr() and terms.pre_clipped is None


@pytest.mark.slow  # about 15 s of compiling
def test_the_loss_compiled_for_cuda_graphs_equals_eager_and_trains():
    """compiled_terms(cudagraphs=True) compiles ppo_td's loss with the CUDA graph options and goes through the
    replay wrapper; on a CPU torch.compile runs it without graphs, so this holds the options and the wrapper to the
    eager loss, terms and gradients (tests/test_device.py holds the graphs themselves to compile, on a GPU)."""
    p, minibatch = _first_minibatch("cleanrl")
    grads = {}
    for name, terms_of in (("eager", p.loss.fast.terms), ("graphs", p.loss.fast.compiled_terms(p.device,
                                                                                               cudagraphs=True))):
        for param in p.parameters:
            param.grad = None
        loss, terms = terms_of(minibatch)
        loss.backward()
        grads[name] = (loss.detach(), terms, [param.grad.clone() for param in p.parameters])
    (eager, eager_terms, eager_grads), (loss, terms, graph_grads) = grads["eager"], grads["graphs"]
    torch.testing.assert_close(loss, eager, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(terms.log_weight, eager_terms.log_weight, rtol=1e-5, atol=1e-6)
    for a, b in zip(eager_grads, graph_grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
