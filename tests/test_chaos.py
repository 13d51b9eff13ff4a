"""Chaos: signals and kills at random moments of many short runs. No run hangs, and every run can be resumed
to its end and evaluated afterwards.

Seeded, CI-sized: each case starts a real `ppo-td train` process, waits a random time (after its first
checkpoint, so there is something to resume), then does one of: SIGINT, SIGTERM, SIGINT twice, SIGKILL of the
trainer, SIGKILL of one of its two collection worker processes (wherever the run is: collecting, pushing
weights, updating). Every wait has a timeout: a process that does not end in time fails the test as a hang.
(tests/test_workers.py kills workers at chosen moments: during collection and right before the weight push.)
"""

import contextlib
import csv
import io
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ppo_td.cli import main

pytestmark = pytest.mark.slow  # the quick tier (pytest -m 'not slow') skips this module

ROOT = Path(__file__).parent.parent
TRAIN = ["--preset", "cleanrl", "--model.hidden-sizes", "8", "--env.num-envs", "4", "--frames-per-batch", "64",
         "--no-progress", "--eval-episodes", "2", "--checkpoint-every", "1"]
HANG = 90  # seconds: any step of a case taking longer is a hang


def _cli(*args):
    return [sys.executable, "-m", "ppo_td.cli", *args]


def _rows(path):
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        return []


def _wait_for_checkpoint(run, proc):
    deadline = time.monotonic() + HANG
    while not (run / "checkpoint.pt").exists():
        assert proc.poll() is None, f"the run ended before its first checkpoint: {proc.stderr.read()}"
        assert time.monotonic() < deadline, "no checkpoint appeared: a hang"
        time.sleep(0.05)


def _resume_to_the_end(run, *flags):
    """Resume (as many times as it takes) until summary.json exists; then ppo-td eval must work."""
    for _ in range(3):
        if (run / "summary.json").exists():
            break
        done = subprocess.run(_cli("train", "--resume", str(run), "--no-progress", *flags), capture_output=True,
                              text=True, timeout=HANG, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["eval_returns"]) == 2
    out = io.StringIO()  # ppo-td eval in this process: two CartPole episodes end by the env's own limit
    with contextlib.redirect_stdout(out):
        assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "over 2 episodes" in out.getvalue()


def _workers(proc):
    """The trainer's collection worker processes (spawned by multiprocessing; not its resource tracker)."""
    children = psutil.Process(proc.pid).children()
    return [c for c in children if any("spawn_main" in part for part in c.cmdline())]


ACTIONS = ["sigint", "sigterm", "sigint-twice", "kill-trainer", "kill-worker", "sigint", "sigterm", "kill-worker"]
CASES = list(enumerate(ACTIONS))  # eight CI-sized cases (each starts three or four processes)


@pytest.mark.parametrize(("seed", "action"), CASES, ids=[f"{s}-{a}" for s, a in CASES])
def test_a_run_hit_at_a_random_moment_ends_and_can_be_finished(tmp_path, seed, action):
    rng = random.Random(seed)
    run = tmp_path / "run"
    iterations = 100
    args = ["train", *TRAIN, "--total-frames", str(64 * iterations), "--run-dir", str(run)]
    if action == "kill-worker":
        args += ["--collector", "process", "--workers", "2"]
    proc = subprocess.Popen(_cli(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_checkpoint(run, proc)
        time.sleep(rng.uniform(0.0, 1.5))
        if action == "kill-trainer":
            proc.kill()
        elif action == "kill-worker":
            workers = _workers(proc)
            assert len(workers) == 2, [c.cmdline() for c in psutil.Process(proc.pid).children()]
            rng.choice(workers).kill()
        else:
            proc.send_signal(signal.SIGTERM if action == "sigterm" else signal.SIGINT)
            if action == "sigint-twice":
                time.sleep(rng.uniform(0.0, 0.3))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=HANG)  # a hang fails here
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    err = proc.stderr.read()
    if action != "sigint-twice":  # a second Ctrl-C aborts with Python's KeyboardInterrupt traceback, as promised
        assert "Traceback" not in err, err[-3000:]
    expected = {"sigint": {130}, "sigterm": {143}, "sigint-twice": {130, -2}, "kill-trainer": {-9},
                "kill-worker": {1}}[action]
    assert code in expected, (code, err[-2000:])
    if action == "kill-worker":  # named, with the signal, and the way on
        assert "worker" in err and "SIGKILL" in err and "continue with: ppo-td train --resume" in err, err[-2000:]
    assert not (run / "run.lock").exists() or action == "kill-trainer"  # a killed trainer leaves it: taken over
    _resume_to_the_end(run, *(["--collector", "inprocess"] if action == "kill-worker" else []))
    rows = _rows(run / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == list(range(1, iterations + 1))  # the whole history, once each
