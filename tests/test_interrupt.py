"""Interruption: SIGINT/SIGTERM write a checkpoint and exit cleanly; the CLI resumes exactly."""

import csv
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from ppo_td.cli import main
from ppo_td.persist import load_checkpoint

TINY = ["--preset", "cleanrl", "--model.hidden-sizes", "16", "16", "--env.num-envs", "4",
        "--frames-per-batch", "64", "--no-progress", "--eval-episodes", "2"]
TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds"}


def _rows(path):
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _wait_for_rows(path, n, timeout=60.0):
    deadline = time.monotonic() + timeout
    while len(_rows(path)) < n:
        assert time.monotonic() < deadline, f"{path} never reached {n} rows"
        time.sleep(0.005)


@pytest.mark.slow
def test_sigint_in_a_subprocess_checkpoints_and_exits(tmp_path, capsys):
    run = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "ppo_td.cli", "train", *TINY, "--total-frames", "1000000",
                             "--run-dir", str(run), "--checkpoint-every", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        _wait_for_rows(run / "metrics.csv", 2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode in (0, 130), err
    assert "continue with: ppo-td train --resume" in out
    state = load_checkpoint(run)
    assert state["iteration"] >= 2 and state["frames"] == 64 * state["iteration"]
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_in_a_subprocess_checkpoints_and_exits(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "ppo_td.cli", "train", *TINY, "--total-frames", "1000000",
                             "--run-dir", str(run), "--checkpoint-every", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        _wait_for_rows(run / "metrics.csv", 2)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode in (0, 128 + signal.SIGTERM)
    assert load_checkpoint(run)["iteration"] >= 2


def test_cli_resume_after_interrupt_matches_uninterrupted_run(tmp_path):
    budget = ["--total-frames", str(64 * 12), "--checkpoint-every", "0"]
    assert main(["train", *TINY, *budget, "--run-dir", str(tmp_path / "full")]) == 0

    run = tmp_path / "cut"
    watcher = threading.Thread(target=lambda: (_wait_for_rows(run / "metrics.csv", 3),
                                               os.kill(os.getpid(), signal.SIGINT)))
    watcher.start()
    code = main(["train", *TINY, *budget, "--run-dir", str(run)])
    watcher.join()
    assert code == 130
    stopped_at = load_checkpoint(run)["iteration"]
    assert 3 <= stopped_at < 12
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0

    strip = [{k: v for k, v in r.items() if k not in TIMING} for r in _rows(run / "metrics.csv")]
    expected = [{k: v for k, v in r.items() if k not in TIMING} for r in _rows(tmp_path / "full" / "metrics.csv")]
    assert strip == expected
    assert _rows(run / "episodes.csv") == _rows(tmp_path / "full" / "episodes.csv")
    full_summary = (tmp_path / "full" / "summary.json").read_text()
    assert '"eval_returns"' in full_summary
    import json

    assert json.loads((run / "summary.json").read_text())["eval_returns"] == json.loads(full_summary)["eval_returns"]
    info = json.loads((run / "run.json").read_text())  # what a resume would be, and what it was
    assert info["resume"] == {"exact": True, "why": ""}
    assert [(r["iteration"], r["exact"]) for r in info["resumes"]] == [(stopped_at, True)]


def test_a_run_that_cannot_resume_exactly_says_so_in_run_json_and_on_resume(tmp_path, capsys):
    import json

    assert main(["train", *TINY, "--total-frames", "128", "--collector.step-loop", "torchrl",
                 "--run-dir", str(tmp_path), "--checkpoint-every", "1"]) == 0
    assert "fresh episodes" not in capsys.readouterr().out  # not on every run: most are never resumed
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["resume"]["exact"] is False and "Collector" in info["resume"]["why"] and info["run_id"]
    (tmp_path / "summary.json").unlink()  # as if the run had stopped before its end
    state = load_checkpoint(tmp_path / "checkpoints" / "iter_000001.pt")
    (tmp_path / "checkpoint.pt").unlink()
    os.link(tmp_path / "checkpoints" / "iter_000001.pt", tmp_path / "checkpoint.pt")
    assert state["iteration"] == 1
    assert main(["train", "--resume", str(tmp_path), "--no-progress"]) == 0
    assert "with fresh episodes" in capsys.readouterr().out


def test_resume_of_a_finished_run_is_refused(tmp_path, capsys):
    assert main(["train", *TINY, "--total-frames", "128", "--run-dir", str(tmp_path)]) == 0
    assert main(["train", "--resume", str(tmp_path), "--no-progress"]) == 2
    assert "the run is complete" in capsys.readouterr().err


def test_resume_refuses_config_flags(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--optim.lr", "0.1"]) == 2
    assert "drop --optim.lr" in capsys.readouterr().err
    # a flag equal to the preset's default is refused too (it would otherwise be silently ignored)
    assert main(["train", "--resume", str(tmp_path), "--optim.lr", "0.003", "--seed=1", "--run-dir", "x"]) == 2
    assert "drop --optim.lr, --run-dir, --seed" in capsys.readouterr().err
