"""The KL-adaptive learning rate (optim.desired_kl; rsl_rl's schedule="adaptive"): the rule against rsl_rl's code
written out by hand, the update applying it to each minibatch's KL before that minibatch's step (or once an epoch),
the rate carried through a checkpoint, the refusals, the command line."""

import dataclasses
import json
import math

import pytest
import torch

import ppo_td
from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import EnvConfig, OptimConfig
from ppo_td.persist import Checkpointer, load_checkpoint, resume_pipeline
from ppo_td.training import build_pipeline, run, train
from ppo_td.training.loop import update
from ppo_td.training.schedules import KLAdaptiveLR


def rsl_rl_rule(lr: float, kl_mean: float, desired_kl: float) -> float:
    """rsl_rl's PPO.update (rsl_rl/algorithms/ppo.py, schedule == "adaptive"), as it is written there."""
    if kl_mean > desired_kl * 2.0:
        lr = max(1e-5, lr / 1.5)
    elif kl_mean < desired_kl / 2.0 and kl_mean > 0.0:
        lr = min(1e-2, lr * 1.5)
    return lr


def test_the_rule_is_rsl_rls_at_its_edges_and_bounds():
    net = torch.nn.Linear(2, 2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    schedule = KLAdaptiveLR(opt, desired_kl=0.01)
    kls = [0.05, 0.02, 0.0200001, 0.005, 0.0049999, 0.0, -1e-4, 0.01, *[1.0] * 30, *[1e-6] * 40, 0.03]
    lr, rates = 1e-3, []
    for kl in kls:
        lr = rsl_rl_rule(lr, kl, 0.01)
        rates.append(schedule.adapt(kl))
        assert rates[-1] == lr, kl
    assert 1e-5 in rates and 1e-2 in rates  # the floor and the cap were reached on the way
    schedule.adapt(float("nan"))
    assert opt.param_groups[0]["lr"] == lr  # a NaN KL changes nothing
    opt.step()
    schedule.step()  # an iteration's step leaves the adapted rate
    assert opt.param_groups[0]["lr"] == lr and schedule.get_last_lr() == [lr]


def pendulum(**optim) -> object:
    base = small_config(env=EnvConfig("Pendulum-v1", num_envs=4), frames_per_batch=256, total_frames=256 * 4)
    return dataclasses.replace(base, optim=dataclasses.replace(base.optim, anneal_lr=False, **optim))


def recorded_update(config) -> tuple[list, list, dict]:
    """One update of a fresh pipeline: each adaptation (KL, rate before, rate after), the rate each optimizer step
    took, and the update's metrics."""
    p = build_pipeline(config, ranks=None)
    adaptations, steps = [], []
    adapt = p.scheduler.adapt

    def recording(kl):
        before = p.optimizer.param_groups[0]["lr"]
        adaptations.append((kl, before, adapt(kl)))
        return adaptations[-1][2]

    p.scheduler.adapt = recording  # the test's own record of ppo_td's object
    p.optimizer.register_step_pre_hook(lambda opt, args, kwargs: steps.append(opt.param_groups[0]["lr"]))
    try:
        batch = next(iter(p.collector))
        with torch.no_grad():
            p.advantage(batch)
        return adaptations, steps, update(p, batch)
    finally:
        p.collector.shutdown()


def test_each_minibatch_adapts_the_rate_its_own_step_takes():
    config = pendulum(lr=1e-2, desired_kl=0.005)  # a large rate: the KL passes twice the target, the rate falls
    adaptations, steps, out = recorded_update(config)
    assert len(adaptations) == len(steps) == config.optim.update_epochs * config.optim.num_minibatches
    assert adaptations[0][0] == 0.0  # before any step the policy is the one that collected: no rise on 0
    for (kl, before, after), taken in zip(adaptations, steps, strict=True):
        assert after == rsl_rl_rule(before, kl, 0.005) and taken == after  # this minibatch's step takes it
    assert [a for _, _, a in adaptations][-1] < 1e-2 and len({a for _, _, a in adaptations}) > 1
    # the KL each adaptation read is the minibatch's k3 estimate the update reports (their mean, float rounding)
    assert math.isclose(sum(k for k, _, _ in adaptations) / len(adaptations), out["kl_k3"], rel_tol=1e-5)


def test_each_epoch_adapts_on_the_mean_kl_of_its_minibatches():
    config = pendulum(lr=1e-4, desired_kl=0.05, kl_lr_every="epoch")  # a small rate: the KL stays low, it rises
    adaptations, steps, out = recorded_update(config)
    assert len(adaptations) == config.optim.update_epochs and len(steps) == len(adaptations) * 4
    n = config.optim.num_minibatches
    for epoch, (kl, before, after) in enumerate(adaptations):
        assert after == rsl_rl_rule(before, kl, 0.05) and after == pytest.approx(before * 1.5)
        assert steps[epoch * n:(epoch + 1) * n] == [before] * n  # the epoch's steps took the rate it began with
    assert math.isclose(sum(k for k, _, _ in adaptations) / len(adaptations), out["kl_k3"], rel_tol=1e-5)


def test_the_adapted_rate_is_checkpointed_and_a_resume_is_exact(tmp_path):
    config = pendulum(lr=1e-2, desired_kl=0.002)
    full = train(config)
    # stopped after the first iteration whose next one starts at an adapted rate (history[s]: iteration s + 1's),
    # so a resume from the configured 1e-2 would show (the rate can climb back to its cap, 1e-2, within an update)
    stop = next(s for s in range(1, len(full.history)) if full.history[s]["lr"] != 1e-2)
    stopper = Checkpointer(tmp_path, every=0, keep=2)

    def stop_after(metrics, pipeline):
        if metrics["iteration"] == stop:
            stopper.request_stop()
        stopper(metrics, pipeline)

    first = train(config, callbacks=[stop_after])
    assert len(first.history) == stop and load_checkpoint(tmp_path)["iteration"] == stop
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert resumed.exact and resumed.pipeline.optimizer.param_groups[0]["lr"] == full.history[stop]["lr"] != 1e-2
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    timing = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds"}

    def rows(history):  # as text: a NaN (no episode ended yet) equals itself
        return [json.dumps({k: v for k, v in m.items() if k not in timing}) for m in history]

    assert rows(first.history + second.history) == rows(full.history)


def test_a_schedule_it_would_fight_and_a_rate_outside_its_bounds_are_refused():
    with pytest.raises(ValueError, match=r"optim.anneal_lr=False \(--optim.no-anneal-lr\)"):
        OptimConfig(desired_kl=0.01)
    with pytest.raises(ValueError, match=r"optim.lr=0.05 is invalid.*\[1e-05, 0.01\]"):
        OptimConfig(desired_kl=0.01, anneal_lr=False, lr=0.05)
    with pytest.raises(ValueError, match="optim.min_lr"):
        OptimConfig(min_lr=0.1, max_lr=0.01)
    with pytest.raises(ValueError, match="optim.kl_lr_every"):
        OptimConfig(kl_lr_every="batch")


def test_the_command_line_trains_with_it_and_records_it(tmp_path, capsys):
    folder = tmp_path / "run"
    assert main(["train", "--env.env-id", "Pendulum-v1", "--optim.desired-kl", "0.01", "--optim.no-anneal-lr",
                 "--total-frames", "4096", "--eval-episodes", "1", "--run-dir", str(folder)]) == 0
    state = load_checkpoint(folder / "checkpoint.pt")
    assert state["config"]["optim"]["desired_kl"] == 0.01
    assert state["optimizer"]["param_groups"][0]["lr"] != 1e-3  # the pendulum preset's rate, adapted


def test_many_adaptations_an_update_are_said_at_the_start(capsys):
    ppo_td.train(pendulum(lr=1e-3, desired_kl=0.01, update_epochs=10, num_minibatches=8), progress="lines")
    assert "note: optim.desired_kl adapts the learning rate 80 times an update (10 epochs x 8 minibatches)" in \
        capsys.readouterr().out
    ppo_td.train(pendulum(lr=1e-3, desired_kl=0.01), progress="lines")  # 4 x 4: as rsl_rl's few
    ppo_td.train(pendulum(lr=1e-3, desired_kl=0.01, update_epochs=10, num_minibatches=8, kl_lr_every="epoch"),
          progress="lines")
    assert "adapts the learning rate" not in capsys.readouterr().out


@pytest.mark.parametrize("scope", ["all", "each"])
def test_gradients_are_clipped_over_all_parameters_or_each_networks_apart(scope):
    """optim.grad_clip_scope: 'all' bounds one norm over every parameter (CleanRL, SB3); 'each' bounds the actor's
    and the critic's norms apart (rsl_rl's update), so the critic's large gradient leaves the actor's alone."""
    from ppo_td.training import build_pipeline
    from ppo_td.training.loop import _clip_gradients

    config = small_config(optim=dataclasses.replace(small_config().optim, max_grad_norm=1.0, grad_clip_scope=scope))
    p = build_pipeline(config)
    try:
        actor = list(p.actor.parameters())
        critic = [t for t in p.critic.parameters() if all(t is not a for a in actor)]
        for t in actor:
            t.grad = torch.full_like(t, 0.001)  # a small policy gradient
        for t in critic:
            t.grad = torch.full_like(t, 10.0)  # a large value gradient
        before = [t.grad.clone() for t in actor]
        norm = _clip_gradients(p, actor + critic, 1.0)
        actor_norm = torch.stack([t.grad.norm() for t in actor]).norm()
        critic_norm = torch.stack([t.grad.norm() for t in critic]).norm()
        if scope == "each":  # the policy's gradient (under the bound) untouched, the value's brought to it
            assert all(torch.equal(t.grad, b) for t, b in zip(actor, before, strict=True))
            assert critic_norm == pytest.approx(1.0, rel=1e-5)
        else:  # one bound: the value's gradient shrinks the policy's too
            assert torch.stack([actor_norm, critic_norm]).norm() == pytest.approx(1.0, rel=1e-5)
            assert actor_norm < 0.01 * torch.stack([b.norm() for b in before]).norm()
        assert float(norm) > 1.0
    finally:
        p.env.close()


def test_a_scalar_std_is_learned_as_itself_and_runs_on_torchs_path():
    """model.std_type='scalar' (rsl_rl's): the std is the parameter (its first value exp(log_std_init)), clamped at
    1e-6, its gradient that of the std; collection runs it on torch (the numpy path reads a log-std)."""
    from ppo_td.config import ModelConfig
    from ppo_td.envs import build_env
    from ppo_td.models import make_actor_critic
    from ppo_td.models.inference import NumpyPolicy
    from ppo_td.models.networks import ScalarStdHead

    built = build_env(EnvConfig("Pendulum-v1", num_envs=2), seed=1)
    try:
        actor, _ = make_actor_critic(built.description, ModelConfig(hidden_sizes=(8,), std_type="scalar",
                                                                    log_std_init=math.log(0.5)))
        td = built.env.reset()
    finally:
        built.env.close()
    net = actor.module[0].module
    head = net.head
    assert isinstance(head, ScalarStdHead) and torch.allclose(head.std, torch.full((1,), 0.5))
    scale = actor(td.clone())["scale"]
    assert torch.allclose(scale, torch.full_like(scale, 0.5))
    scale.sum().backward()
    assert torch.allclose(head.std.grad, torch.full((1,), 2.0))  # d(sum of 2 rows' std)/d std: the std's own
    with torch.no_grad():
        head.std.fill_(-1.0)
    assert float(actor(td.clone())["scale"].min()) == pytest.approx(ScalarStdHead.MIN_STD)
    assert NumpyPolicy.of(net, 2) is None
    with pytest.raises(ValueError, match=r"model.std_type='scalar' is invalid: it must be 'log' with gSDE"):
        ModelConfig(std_type="scalar", exploration="gsde")


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("shuffle", ["update", "epoch"])
def test_one_order_an_update_gives_every_epoch_the_same_minibatches(shuffle, lean):
    """optim.shuffle='update' (rsl_rl's): one random order an update, its minibatches taken again by every epoch,
    unchanged by the steps between; 'epoch': a fresh order each epoch. On ppo_td's lean loss path and on the loss
    module's own forward alike."""
    from ppo_td.training.loop import update

    base = ppo_td.get_preset("cartpole")
    config = dataclasses.replace(base, frames_per_batch=256, optim=dataclasses.replace(
        base.optim, shuffle=shuffle, update_epochs=3, num_minibatches=4))
    p = build_pipeline(config, ranks=None)
    seen = []
    if lean:
        terms = p.loss.fast.terms

        def recording(minibatch):
            seen.append(minibatch["observation"].clone())
            return terms(minibatch)

        p.loss.fast.terms = recording  # the test's own record of ppo_td's object
    else:
        forward = p.loss.forward

        def recording(minibatch):
            seen.append(minibatch["observation"].clone())
            return forward(minibatch)

        p.loss.forward = recording  # an instance forward: the update calls the module, not the lean path
    try:
        batch = next(iter(p.collector))
        with torch.no_grad():
            p.advantage(batch)
        out = update(p, batch)
    finally:
        p.collector.shutdown()
    assert out["epochs"] == 3 and len(seen) == 12
    epochs = [torch.cat(seen[i:i + 4]) for i in (0, 4, 8)]
    for later in epochs[1:]:  # every epoch sees the whole batch once
        assert sorted(later.sum(-1).tolist()) == pytest.approx(sorted(epochs[0].sum(-1).tolist()))
    same = all(torch.equal(epochs[0], later) for later in epochs[1:])
    assert same == (shuffle == "update")
