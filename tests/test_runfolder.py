"""Run folders are protected: one writer at a time, no silent reuse, no foreign checkpoint, nothing lost at the end,
history kept across resumes."""

import csv
import dataclasses
import json
import os
import shutil

import pytest

from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import EnvConfig, ModelConfig
from ppo_td.persist import Checkpointer, RunFolder, RunLogger, load_checkpoint
from ppo_td.presets import get_preset
from ppo_td.training import train

TINY = ["--preset", "cleanrl", "--model.hidden-sizes", "8", "--env.num-envs", "4", "--frames-per-batch", "64",
        "--no-progress", "--eval-episodes", "2"]


def _rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_a_folder_holding_a_run_is_refused_without_overwrite(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(run)]) == 0
    first_id = RunFolder(run).run_id
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and f"--resume {run}" in err and "--overwrite" in err
    assert RunFolder(run).run_id == first_id  # nothing was touched
    assert main(["train", *TINY, "--total-frames", "192", "--run-dir", str(run), "--overwrite"]) == 0
    assert RunFolder(run).run_id != first_id and len(_rows(run / "metrics.csv")) == 3


def test_a_folder_in_use_is_refused_and_a_dead_writers_lock_is_taken_over(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.lock").write_text(f"{os.getppid()}\n")  # a live process holds it
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(run)]) == 2
    assert f"in use by process {os.getppid()}" in capsys.readouterr().err
    (run / "run.lock").write_text("999999999\n")  # its writer died
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(run)]) == 0
    assert not (run / "run.lock").exists()  # released at the end


def test_a_checkpoint_of_another_run_is_refused(tmp_path, capsys):
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        folder = RunFolder(run)
        folder.create()
        stopper = Checkpointer(run, every=1, keep=1, run_id=folder.run_id)

        def stop(metrics, pipeline, stopper=stopper):
            if metrics["iteration"] == 1:
                stopper.request_stop()
            stopper(metrics, pipeline)

        train(small_config(total_frames=64 * 4), callbacks=[stop])
    shutil.copy(runs[0] / "checkpoint.pt", runs[1] / "checkpoint.pt")
    assert main(["train", "--resume", str(runs[1]), "--no-progress"]) == 2
    assert "belongs to run" in capsys.readouterr().err


def test_the_final_checkpoint_comes_before_the_evaluation_and_resume_finishes_the_run(tmp_path, monkeypatch, capsys):
    """An evaluation that crashes loses nothing: the final checkpoint is written first, and --resume runs the
    evaluation, the summary and the plot of the finished training."""
    import ppo_td.training

    run = tmp_path / "run"

    def broken(*args, **kwargs):
        raise RuntimeError("the evaluation env crashed")

    monkeypatch.setattr(ppo_td.training, "evaluate", broken)
    with pytest.raises(RuntimeError, match="evaluation env crashed"):
        main(["train", *TINY, "--total-frames", "192", "--run-dir", str(run), "--checkpoint-every", "0"])
    assert load_checkpoint(run)["frames"] == 192 and not (run / "summary.json").exists()
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert "deterministic evaluation:" in capsys.readouterr().out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frames"] == 192 and len(summary["eval_returns"]) == 2
    assert (run / "learning_curve.png").exists()
    assert main(["train", "--resume", str(run), "--no-progress"]) == 2  # now complete: nothing to resume
    assert "the run is complete" in capsys.readouterr().err


def test_resume_keeps_history_drops_a_partial_row_and_continues_the_clock(tmp_path):
    run = tmp_path / "run"
    budget = ["--total-frames", str(64 * 6), "--checkpoint-every", "2"]
    folder = RunFolder(run)
    folder.create()
    # a run killed after iteration 3 (its last checkpoint at iteration 2), with a half-written row 4
    stopper = Checkpointer(run, every=2, keep=2, run_id=folder.run_id)

    def stop(metrics, pipeline):
        if metrics["iteration"] == 3:
            raise KeyboardInterrupt
        stopper(metrics, pipeline)

    config = dataclasses.replace(get_preset("cleanrl"), env=EnvConfig(num_envs=4),
                                 model=ModelConfig(hidden_sizes=(8,)), frames_per_batch=64, total_frames=64 * 6,
                                 eval_episodes=2)
    logger = RunLogger(run, config)
    with pytest.raises(KeyboardInterrupt):
        train(config, callbacks=[logger, stop])
    logger.close()
    with (run / "metrics.csv").open("a") as f:
        f.write("4,256,0.9")  # cut off mid-row
    before = _rows(run / "metrics.csv")
    assert len(before) == 4
    elapsed = load_checkpoint(run)["elapsed"]
    assert elapsed > 0
    assert main(["train", "--resume", str(run), *budget[2:], "--no-progress"]) == 0
    rows = _rows(run / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [1, 2, 3, 4, 5, 6]  # 3 (after the checkpoint) redone, 4 whole
    assert all(r["loss_policy"] not in ("", None) for r in rows)
    assert float(rows[2]["time"]) > elapsed  # the clock goes on from the checkpoint's training seconds
    assert rows[:2] == before[:2]


def test_ctrl_c_during_the_final_evaluation_stops_at_once_and_resume_finishes(tmp_path, monkeypatch, capsys):
    """Ctrl-C in the final evaluation is acted on at once (the signal guard ends with training): exit 130, the
    checkpoint holds the trained run, and --resume produces the evaluation and summary."""
    import ppo_td.training

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what Python's default SIGINT handler raises

    run = tmp_path / "run"
    monkeypatch.setattr(ppo_td.training, "evaluate", interrupted)
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(run)]) == 130
    assert "ppo-td train --resume" in capsys.readouterr().err and not (run / "summary.json").exists()
    monkeypatch.undo()
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert len(json.loads((run / "summary.json").read_text())["eval_returns"]) == 2


def test_a_run_refused_while_building_leaves_the_folder_free(tmp_path, capsys):
    """A config refused when the pipeline is built (here: numpy inference for a policy it cannot run) writes
    nothing that blocks the same run folder: the corrected command runs there, without --overwrite."""
    run_dir = tmp_path / "run"
    refused = ["train", "--run-dir", str(run_dir), "--total-frames", "512", "--collector.inference", "numpy",
               "--model.shared-trunk"]
    assert main(refused) == 2
    assert "collector.inference='numpy' runs a small feed-forward MLP policy" in capsys.readouterr().err
    assert not run_dir.exists()  # made for the run, left empty: removed
    run_dir.mkdir()
    assert main(refused) == 2 and list(run_dir.iterdir()) == []  # the user's own folder stays, empty
    assert main(["train", "--run-dir", str(run_dir), "--total-frames", "512", "--eval-episodes", "1"]) == 0
    assert (run_dir / "checkpoint.pt").exists()


def test_a_resume_keeps_the_rows_of_a_history_written_before_a_column_was_added(tmp_path):
    """A metrics.csv an earlier ppo_td wrote lacks the columns added since (advantage_seconds): its rows are whole by
    their own columns and kept, nan in the new one; a row cut short is still dropped."""
    from ppo_td.persist.runlog import METRIC_COLUMNS

    old = [c for c in METRIC_COLUMNS if c != "advantage_seconds"]
    (tmp_path / "metrics.csv").write_text(",".join(old) + "\n" + "".join(
        ",".join(str(i) if c == "iteration" else "0.5" for c in old) + "\n" for i in (1, 2, 3)) + "4,256\n")
    (tmp_path / "episodes.csv").write_text("iteration,frames,return,length\n1,64,10.0,10\n")
    RunLogger(tmp_path, small_config(), resume_iteration=2).close()
    rows = _rows(tmp_path / "metrics.csv")
    assert [r["iteration"] for r in rows] == ["1", "2"] and [r["advantage_seconds"] for r in rows] == ["nan", "nan"]
    assert rows[0]["loss_policy"] == "0.5" and _rows(tmp_path / "episodes.csv")[0]["return"] == "10.0"
