"""Collection in worker processes and on Ray: layout, learning, statistics, weight sync, failures."""

import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control import CartPoleEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict.nn import TensorDictModule

from conftest import small_config
from ppo_td.cli import main
from ppo_td.collect import WorkerError, make_collector, push_to_workers, shutdown
from ppo_td.config import CollectorConfig, EnvConfig
from ppo_td.envs import ReturnScaling, RunningObsNorm, find_transform, make_env, merge_moments, moments_since
from ppo_td.persist import load_checkpoint, resume_pipeline
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, make_train_env, run, train

pytestmark = pytest.mark.slow  # the quick tier (pytest -m 'not slow') skips this module


def _moments(x: np.ndarray) -> dict:
    x = torch.as_tensor(x, dtype=torch.float64)
    return {"count": torch.tensor(float(len(x)), dtype=torch.float64), "mean": x.mean(0), "var": x.var(0, correction=0)}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=2, max_size=5), st.integers(0, 2**31 - 1))
def test_merged_moments_equal_numpy_on_the_whole_stream(sizes, seed):
    """A base stream plus each worker's additions, recovered by difference and merged, equals numpy's moments."""
    rng = np.random.default_rng(seed)
    base = rng.normal(3.0, 2.0, size=(50, 3))
    adds = [rng.normal(rng.uniform(-5, 5), rng.uniform(0.1, 4), size=(n, 3)) for n in sizes]
    base_m = _moments(base)
    merged = base_m
    for add in adds:  # each worker holds base + its own additions
        merged = merge_moments(merged, moments_since(_moments(np.concatenate([base, add])), base_m))
    expected = _moments(np.concatenate([base, *adds]))
    assert float(merged["count"]) == float(expected["count"])
    torch.testing.assert_close(merged["mean"], expected["mean"], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(merged["var"], expected["var"], rtol=1e-10, atol=1e-12)


def test_moments_since_an_unchanged_stream_is_empty():
    m = _moments(np.arange(12.0).reshape(4, 3))
    since = moments_since(m, m)
    assert float(since["count"]) == 0
    merged = merge_moments(m, since)
    torch.testing.assert_close(merged, m)


def process_config(**overrides):
    return small_config(collector=CollectorConfig("process", num_workers=2), **overrides)


class ConstantLeft(TensorDictModule):
    """Always action 0 with log-prob 0: episodes then depend only on the env seeds, not on sampling."""

    def __init__(self):
        super().__init__(torch.nn.Linear(4, 1), in_keys=["observation"], out_keys=["_unused"])

    def forward(self, td, *args, **kwargs):
        td.set("action", torch.zeros(td.batch_size, dtype=torch.long))
        td.set("action_log_prob", torch.zeros(td.batch_size))
        return td


def test_worker_statistics_merge_to_the_single_process_statistics():
    """2 workers x 2 CartPoles, merged after each batch, equal one process stepping the same 4 seeded copies."""
    env_config = EnvConfig("CartPole-v1", num_envs=4, vectorization="sync", normalize_observations=True,
                           normalize_rewards=True)
    config = process_config(env=env_config, frames_per_batch=64, total_frames=192, eval_episodes=0)
    actor = ConstantLeft()
    env = make_train_env(config)
    pipeline = build_pipeline(config, env=env, collector=make_collector(env, actor, config))  # collects with it
    batches = []
    run(pipeline, callbacks=[lambda metrics, p: batches.append(metrics["frames"])])
    assert batches == [64, 128, 192]
    reference = make_env(env_config, seed=config.seed, gamma=config.loss.gamma)
    td = reference.reset()
    for _ in range(192 // 4):  # the same policy, the same 4 copies, the same seeds, in one process
        td = reference.step_and_maybe_reset(actor(td))[1]
    for kind in (RunningObsNorm, ReturnScaling):
        merged, single = find_transform(pipeline.env, kind).moments(), find_transform(reference, kind).moments()
        assert float(merged["count"]) == pytest.approx(float(single["count"]), abs=1e-9), kind
        torch.testing.assert_close(merged["mean"], single["mean"], rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(merged["var"], single["var"], rtol=1e-9, atol=1e-12)
    assert float(find_transform(pipeline.env, RunningObsNorm).count) > 192  # steps plus reset observations


def test_two_worker_processes_solve_cartpole_like_in_process():
    """The default preset, collected by 2 local worker processes, reaches >= 475 in the same 50k frames."""
    config = get_preset("cartpole")
    config = dataclasses.replace(config, collector=CollectorConfig("process", num_workers=2))
    result = train(config)
    assert result.history[-1]["frames"] == 49_664  # the in-process budget
    assert statistics.fmean(result.eval_returns) >= 475, result.eval_returns


def test_ray_workers_use_the_learners_weights_after_every_update():
    """Ray started locally with 2 CPUs: after each push both workers' policy and statistics equal the learner's."""
    pytest.importorskip("ray")
    import ray

    env_config = EnvConfig("CartPole-v1", num_envs=4, normalize_observations=True)
    config = small_config(env=env_config, collector=CollectorConfig("ray", num_workers=2), eval_episodes=0)
    checks = []
    try:
        pipeline = build_pipeline(config)
        start = {k: v.clone() for k, v in pipeline.actor.state_dict().items()}
        collector = pipeline.collector
        push_weights = collector.update_policy_weights_

        def push_then_compare(*args, **kwargs):  # the last step of run()'s push to the workers
            push_weights(*args, **kwargs)
            learner = pipeline.actor.state_dict()
            for worker_policy in collector.collector.get_distant_attr("policy"):
                remote = worker_policy.state_dict()
                checks.append(all(torch.equal(remote[k], v) for k, v in learner.items()))
            moments = find_transform(pipeline.env, RunningObsNorm).moments()
            for remote in collector.collector.map_fn(f"env.transform[{_index(pipeline.env, RunningObsNorm)}].moments"):
                checks.append(all(torch.equal(remote[k], v) for k, v in moments.items()))

        collector.update_policy_weights_ = push_then_compare
        result = run(pipeline)
        assert ray.is_initialized() is False  # the local instance ppo_td started is shut down with the collector
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert len(result.history) == 3 and len(checks) == 3 * 4 and all(checks), checks
    assert any(not torch.equal(start[k], v) for k, v in pipeline.actor.state_dict().items())  # it did train
    assert float(find_transform(pipeline.env, RunningObsNorm).count) > 192  # statistics of both workers' steps


def _index(env, kind):
    return next(i for i, t in enumerate(env.transform) if isinstance(t, kind))


gym.register("PpoTdTest/OnlyInThisProcess-v0", entry_point=CartPoleEnv, max_episode_steps=500)


def test_workers_that_cannot_build_their_env_fail_fast_with_the_fix():
    """An id registered only in this process: the spawned workers cannot make it; the error says 'module:EnvId'."""
    config = process_config(env=EnvConfig("PpoTdTest/OnlyInThisProcess-v0", num_envs=4))
    with pytest.raises(WorkerError, match="(?s)could not start: .*unknown Gymnasium env id.*'module:EnvId'"):
        build_pipeline(config)


def test_an_exception_in_a_worker_names_the_worker_and_the_cause():
    """Worker 1 (seeds 3, 4) raises at its 40th step: WorkerError(1) carries the env's error, no hang."""
    config = process_config(env=EnvConfig("failing_envs:PpoTdTest/RaiseInWorker-v0", num_envs=4, vectorization="sync"),
                            frames_per_batch=64, total_frames=640)
    pipeline = build_pipeline(config)
    with pytest.raises(WorkerError) as info:
        run(pipeline)
    err = info.value
    assert err.worker == 1 and "simulator diverged" in err.cause and "PpoTdTest/RaiseInWorker-v0" in err.cause
    assert err.iteration == 2 and err.frames == 128  # 16 steps per iteration per copy: the 40th is in the 3rd


def test_a_killed_worker_stops_training_with_a_clear_error_and_a_loadable_checkpoint(tmp_path, capsys):
    """SIGKILL of worker 1 mid-run (CLI): exit 1, the error names worker 1 and SIGKILL, the checkpoint resumes."""
    out = tmp_path / "run"
    code = main(["train", "--preset", "cleanrl", "--env.env-id", "failing_envs:PpoTdTest/KillWorker-v0",
                 "--env.num-envs", "4", "--env.vectorization", "sync", "--env.normalize-observations",
                 "--frames-per-batch", "64", "--total-frames", "640", "--model.hidden-sizes", "16", "16",
                 "--collector", "process", "--workers", "2", "--run-dir", str(out), "--no-progress",
                 "--checkpoint-every", "0", "--eval-episodes", "2"])
    err = capsys.readouterr().err
    assert code == 1
    assert "collection worker 1 failed: the process was killed by SIGKILL" in err, err
    assert "training stopped after iteration 2" in err and f"--resume {out}" in err
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["iteration"] == 2 and state["frames"] == 128
    assert state["elapsed"] > 0  # the training clock goes on after the resume
    # resumed on new workers: they get the checkpoint's weights and normalization statistics
    pipeline, frames, iteration, exact, *_ = resume_pipeline(out)
    try:
        assert (frames, iteration) == (128, 2) and pipeline.config.collector.backend == "process"
        assert not exact  # the simulators lived in the dead workers: fresh episodes
        for policy in pipeline.collector.collector.get_distant_attr("policy"):
            torch.testing.assert_close(policy.state_dict(), state["actor"])
        saved = state["env_state"]
        index = _index(pipeline.env, RunningObsNorm)
        assert float(saved[f"transforms.{index}.count"]) > 128
        for moments in pipeline.collector.collector.map_fn(f"env.transform[{index}].moments"):
            for name in ("count", "mean", "var"):
                torch.testing.assert_close(moments[name], saved[f"transforms.{index}.{name}"])
    finally:
        shutdown(pipeline.collector)
    # and the run can finish in-process (--collector changes where collection runs, nothing else)
    assert main(["train", "--resume", str(out), "--collector", "inprocess", "--no-progress"]) == 0
    assert load_checkpoint(out)["frames"] == 640


def test_a_worker_that_died_during_the_update_is_reported_not_waited_for():
    """TorchRL's weight push waits for every worker without a timeout: a dead worker must be caught before it."""
    pipeline = build_pipeline(process_config())
    try:
        victim = pipeline.collector.collector.procs[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=10)
        with pytest.raises(WorkerError, match="collection worker 1 failed: the process was killed by SIGKILL"):
            push_to_workers(pipeline.collector, pipeline.env)
    finally:
        shutdown(pipeline.collector)


def test_a_worker_that_dies_during_the_weight_push_is_reported_within_seconds():
    """The race the check before the push cannot see: the worker dies while TorchRL's push waits for its answer
    (simulated: the push kills worker 1 and then waits forever). The watchdog names it within seconds."""
    import time

    pipeline = build_pipeline(process_config())
    inner = pipeline.collector.collector
    real_push = inner.update_policy_weights_

    def push_and_lose_a_worker(*args, **kwargs):
        os.kill(inner.procs[1].pid, signal.SIGKILL)
        time.sleep(3600)  # TorchRL's push waiting for an answer that never comes
        return real_push(*args, **kwargs)

    try:
        pipeline.collector.update_policy_weights_ = push_and_lose_a_worker
        started = time.monotonic()
        with pytest.raises(WorkerError, match="collection worker 1 failed: the process was killed by SIGKILL"):
            push_to_workers(pipeline.collector, pipeline.env)
        assert time.monotonic() - started < 15
    finally:
        shutdown(pipeline.collector)


def test_an_unanswered_call_to_live_workers_times_out():
    from ppo_td.collect.failures import watched

    pipeline = build_pipeline(process_config())
    try:
        with pytest.raises(WorkerError, match="no answer from the workers within 2 s"):
            watched(pipeline.collector, "a test call", lambda: __import__("time").sleep(3600), timeout=2.0)
    finally:
        shutdown(pipeline.collector)


def test_a_killed_ray_worker_is_named():
    """SIGKILL of Ray worker 1's process after iteration 2: WorkerError(1) with Ray's account of the death."""
    pytest.importorskip("ray")
    import ray

    def kill_worker_1(metrics, p):
        if metrics["iteration"] == 2:
            pid = ray.get(p.collector.collector.remote_collectors[1].__ray_call__.remote(lambda actor: os.getpid()))
            os.kill(pid, signal.SIGKILL)

    config = small_config(collector=CollectorConfig("ray", num_workers=2), total_frames=640, eval_episodes=0)
    try:
        with pytest.raises(WorkerError) as info:
            run(build_pipeline(config), callbacks=[kill_worker_1])
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert info.value.worker == 1 and "died" in info.value.cause, info.value
    assert (info.value.iteration, info.value.frames) == (2, 128)


def test_ctrl_c_on_the_terminal_checkpoints_with_worker_processes(tmp_path):
    """SIGINT to the whole process group (what Ctrl-C does): workers ignore it; the learner checkpoints, exits 130."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ppo_td.cli", "train", "--preset", "cleanrl", "--model.hidden-sizes", "16", "16",
         "--env.num-envs", "4", "--frames-per-batch", "64", "--total-frames", "1000000", "--no-progress",
         "--collector", "process", "--workers", "2", "--run-dir", str(run_dir), "--checkpoint-every", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        deadline = time.monotonic() + 90
        while not (run_dir / "metrics.csv").exists() or len((run_dir / "metrics.csv").read_text().splitlines()) < 3:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.05)
        workers = _spawned_children(proc.pid)
        assert len(workers) == 2, workers
        for pid in workers:  # Ctrl-C reaches them too: they must survive it
            os.kill(pid, signal.SIGINT)
        time.sleep(1.0)
        assert all(Path(f"/proc/{pid}").exists() for pid in workers) and proc.poll() is None
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "continue with: ppo-td train --resume" in out
    assert load_checkpoint(run_dir)["iteration"] >= 2


def _spawned_children(pid):
    """Pids of the multiprocessing-spawned children of ``pid`` (the collection workers), from /proc."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def test_a_torchrl_multi_collector_passed_in_is_driven_like_ppo_tds_own():
    """A MultiSyncCollector built by the user and passed to build_pipeline is wrapped: the loop pushes the new
    weights to its workers after every update."""
    from torchrl.collectors import MultiSyncCollector

    from ppo_td.collect import WorkerCollector
    from ppo_td.collect.workers import worker_envs
    from ppo_td.models import make_actor_critic

    config = small_config(env=EnvConfig("CartPole-v1", num_envs=4), collector=CollectorConfig("process",
                          num_workers=2), eval_episodes=0, total_frames=64 * 3)
    env = make_train_env(config)
    actor, critic = make_actor_critic(env.description, config.model)
    collector = MultiSyncCollector(worker_envs(config), actor, frames_per_batch=64, total_frames=64 * 3,
                                   cat_results=0)
    p = build_pipeline(config, env=env, actor=actor, critic=critic, collector=collector)
    assert isinstance(p.collector, WorkerCollector)
    pushes = []
    real = p.collector.update_policy_weights_
    p.collector.update_policy_weights_ = lambda: (pushes.append(1), real())
    run(p)
    assert len(pushes) == 3


def test_workers_act_with_a_cpu_copy_refreshed_from_the_learner_at_every_push():
    """What a learner on a GPU does (here forced on the CPU, the same code): the workers get a CPU copy of the
    policy, and each push copies the learner's weights into it first, so the next batch is collected with them."""
    from ppo_td.collect.workers import make_worker_collector

    config = small_config(env=EnvConfig("CartPole-v1", num_envs=4), collector=CollectorConfig("process", num_workers=2),
                          eval_episodes=0)
    from ppo_td.models import make_actor_critic

    p = build_pipeline(config)
    p.collector.shutdown()
    cpu_actor, _ = make_actor_critic(p.description, config.model)  # the copy make_collector builds for a GPU learner
    cpu_actor.load_state_dict(p.actor.state_dict())
    collector = make_worker_collector(config, cpu_actor, total_frames=config.frames_per_batch * 3,
                                      learner=(p.actor, None))
    try:
        source, copy_ = collector.mirror
        assert copy_ is cpu_actor and source is p.actor
        batches = iter(collector)
        first = next(batches)
        assert set(first["action"].unique().tolist()) == {0, 1}
        with torch.no_grad():  # the learner now always pushes left
            head = p.actor.module[0].module.head[-1]
            head.weight.zero_()
            head.bias.copy_(torch.tensor([50.0, -50.0]))
        collector.update_policy_weights_()
        assert torch.equal(copy_.module[0].module.head[-1].bias, head.bias)
        assert set(next(batches)["action"].unique().tolist()) == {0}
    finally:
        collector.shutdown()
