"""Resume exactly: a run interrupted at iteration k and resumed equals the uninterrupted run, bit for bit."""

import math

import pytest

from conftest import small_config
from ppo_td.config import CollectorConfig
from ppo_td.persist import Checkpointer, load_checkpoint, resume_pipeline
from ppo_td.training import run, train

TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds"}


def stop_after(run_dir, iteration):
    """A callback that checkpoints into ``run_dir`` and stops the run after ``iteration`` (as Ctrl-C would)."""
    stopper = Checkpointer(run_dir, every=0, keep=2)

    def callback(metrics, pipeline):
        if metrics["iteration"] == iteration:
            stopper.request_stop()
        stopper(metrics, pipeline)

    return callback


def _strip(history):
    return [{k: v for k, v in m.items() if k not in TIMING} for m in history]


def _equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            same = x[key] == y[key] or (isinstance(x[key], float) and math.isnan(x[key]) and math.isnan(y[key]))
            assert same, f"iteration {x['iteration']}: {key} {x[key]!r} != {y[key]!r}"


def test_interrupted_and_resumed_run_matches_uninterrupted(tmp_path):
    config = small_config(total_frames=64 * 8, eval_episodes=3)
    full = train(config)

    stop_at_3 = stop_after(tmp_path, 3)
    first = train(config, callbacks=[stop_at_3])
    assert first.stopped and len(first.history) == 3 and first.eval_returns == []
    assert load_checkpoint(tmp_path)["iteration"] == 3

    pipeline, frames, iteration, exact, _ = resume_pipeline(tmp_path / "checkpoint.pt")
    assert exact
    second = run(pipeline, frames=frames, iteration=iteration)
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns
    assert first.episodes + second.episodes == full.episodes


def test_periodic_checkpoints_keep_the_last_k(tmp_path):
    train(small_config(total_frames=64 * 7, eval_episodes=0), callbacks=[Checkpointer(tmp_path, every=2, keep=2)])
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["iter_000004.pt", "iter_000006.pt"]
    assert load_checkpoint(tmp_path / "checkpoint.pt")["iteration"] == 6


def test_a_resume_that_cannot_be_exact_says_so_and_finishes(tmp_path):
    """TorchRL's Collector keeps its current step where no public API reaches: the resume continues from the
    last completed iteration with fresh episodes, says so, and completes the run's budget."""
    config = small_config(total_frames=64 * 5, eval_episodes=2, collector=CollectorConfig(step_loop="torchrl"))
    stop_at_2 = stop_after(tmp_path, 2)
    train(config, callbacks=[stop_at_2])
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not resumed.exact and "fresh episodes" in resumed.describe()
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in second.history] == [3, 4, 5] and second.history[-1]["frames"] == 64 * 5
    assert len(second.eval_returns) == 2


def test_rotation_keeps_the_newest_by_iteration_number_past_six_digits(tmp_path):
    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(small_config())
    checkpointer = Checkpointer(tmp_path, every=1, keep=2)
    for iteration in (999_998, 999_999, 1_000_000, 1_000_001):
        checkpointer.save(pipeline, frames=iteration * 64, iteration=iteration)
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["iter_1000000.pt", "iter_1000001.pt"]
    assert load_checkpoint(tmp_path)["iteration"] == 1_000_001
    pipeline.collector.shutdown()


def test_checkpoints_follow_the_umask_and_stale_temporaries_are_removed(tmp_path):
    import os

    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(small_config())
    (tmp_path / "checkpoints").mkdir(parents=True)
    dead = tmp_path / "checkpoints" / ".iter_000003.pt.999999999.x1y2.tmp"  # a writer that no longer runs
    live = tmp_path / "checkpoints" / f".iter_000004.pt.{os.getppid()}.x1y2.tmp"  # a writer that still runs
    dead.write_bytes(b"partial")
    live.write_bytes(b"partial")
    old = os.umask(0o027)
    try:
        checkpointer = Checkpointer(tmp_path, every=1, keep=2)
        path = checkpointer.save(pipeline, frames=64, iteration=1)
    finally:
        os.umask(old)
    assert not dead.exists() and live.exists()
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    pipeline.collector.shutdown()


@pytest.mark.slow
def test_mujoco_resume_is_not_claimed_exact_and_runs(tmp_path):
    """MuJoCo envs pickle their constructor arguments only (EzPickle): their simulator state cannot be restored
    through a pickle, so the snapshot records no simulator state, the resume says it is not exact, and the run
    continues with fresh episodes instead of stepping unreset simulators."""
    pytest.importorskip("mujoco")
    import dataclasses

    from ppo_td.presets import get_preset

    base = get_preset("halfcheetah")
    config = dataclasses.replace(base, frames_per_batch=256, total_frames=256 * 3, eval_episodes=0,
                                 optim=dataclasses.replace(base.optim, num_minibatches=4, update_epochs=1))
    stop_at_1 = stop_after(tmp_path, 1)
    first = train(config, callbacks=[stop_at_1])
    assert load_checkpoint(tmp_path)["snapshot"]["exact"] is False
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not resumed.exact and "fresh episodes" in resumed.describe()
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in first.history + second.history] == [1, 2, 3]


def _cartpole_with_a_lambda(**kwargs):
    import gymnasium as gym
    from gymnasium.envs.classic_control import CartPoleEnv

    env = CartPoleEnv(**kwargs)
    return gym.wrappers.TransformObservation(env, lambda obs: obs * 1.0, env.observation_space)


def test_an_env_that_cannot_be_pickled_checkpoints_and_resumes_with_fresh_episodes(tmp_path):
    """A wrapper holding a lambda used to crash the run at its first checkpoint: now the checkpoint holds no
    simulator state, says so, and the resume continues with fresh episodes."""
    import dataclasses

    import gymnasium as gym

    from ppo_td.config import EnvConfig

    gym.register("ppo_td_test/LambdaCartPole-v0", entry_point=_cartpole_with_a_lambda, max_episode_steps=200)
    config = small_config(env=EnvConfig("ppo_td_test/LambdaCartPole-v0", num_envs=4), total_frames=64 * 3,
                          eval_episodes=1)
    config = dataclasses.replace(config, env=dataclasses.replace(config.env, vectorization="sync"))
    stop_at_1 = stop_after(tmp_path, 1)
    train(config, callbacks=[stop_at_1])
    assert load_checkpoint(tmp_path)["snapshot"]["exact"] is False
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not resumed.exact
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in second.history] == [2, 3]
