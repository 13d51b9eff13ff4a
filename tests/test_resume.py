"""Resume exactly: a run interrupted at iteration k and resumed equals the uninterrupted run, bit for bit."""

import math

from conftest import small_config
from ppo_td.persist import Checkpointer, load_checkpoint, resume_pipeline
from ppo_td.train import run, train

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

    pipeline, frames, iteration = resume_pipeline(tmp_path / "checkpoint.pt")
    second = run(pipeline, frames=frames, iteration=iteration)
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns
    assert first.episodes + second.episodes == full.episodes


def test_periodic_checkpoints_keep_the_last_k(tmp_path):
    train(small_config(total_frames=64 * 7, eval_episodes=0), callbacks=[Checkpointer(tmp_path, every=2, keep=2)])
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["iter_000004.pt", "iter_000006.pt"]
    assert load_checkpoint(tmp_path / "checkpoint.pt")["iteration"] == 6
