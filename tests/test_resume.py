"""Resume exactly: a run interrupted at iteration k and resumed equals the uninterrupted run, bit for bit."""

import math

from conftest import small_config
from ppo_td.config import CollectorConfig
from ppo_td.persist import Checkpointer, load_checkpoint, resume_pipeline
from ppo_td.training import run, train

TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds"}


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

    stopper = Checkpointer(tmp_path, every=0, keep=2)

    def stop_at_3(metrics, pipeline):
        if metrics["iteration"] == 3:
            stopper.request_stop()
        stopper(metrics, pipeline)

    first = train(config, callbacks=[stop_at_3])
    assert first.stopped and len(first.history) == 3 and first.eval_returns == []
    assert load_checkpoint(tmp_path)["iteration"] == 3

    pipeline, frames, iteration, exact = resume_pipeline(tmp_path / "checkpoint.pt")
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
    stopper = Checkpointer(tmp_path, every=0, keep=2)

    def stop_at_2(metrics, pipeline):
        if metrics["iteration"] == 2:
            stopper.request_stop()
        stopper(metrics, pipeline)

    train(config, callbacks=[stop_at_2])
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not resumed.exact and "fresh episodes" in resumed.describe()
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in second.history] == [3, 4, 5] and second.history[-1]["frames"] == 64 * 5
    assert len(second.eval_returns) == 2
