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


LINGERING = '''import threading
import time

import gymnasium as gym

THREAD = []


def make():
    """CartPole, and once a process a thread that outlives the run (as torch's C++ compiler threads can)."""
    if not THREAD:
        THREAD.append(threading.Thread(target=time.sleep, args=(120,), name="lingering"))
        THREAD[0].start()
    return gym.make("CartPole-v1")


class Slow(gym.Wrapper):
    def step(self, action):
        time.sleep(0.25)
        return self.env.step(action)


def make_slow():
    """make's, each step a quarter of a second: an iteration (16 steps of 4 copies) lasts 4 s."""
    return Slow(make())
'''


def _lingering_run(tmp_path, factory="make"):
    (tmp_path / "lingering.py").write_text(LINGERING)
    run = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    proc = subprocess.Popen([sys.executable, "-m", "ppo_td.cli", "train", *TINY, "--env.env-id", f"lingering:{factory}",
                             "--total-frames", "100000000", "--run-dir", str(run), "--checkpoint-every", "0",
                             "--no-compile"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, run


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_further_signal_ends_a_stopped_run_whose_process_waits_on_a_thread(tmp_path, sig):
    """Fault injection: a thread the run did not start (torch's C++ compiler threads, a user's) holds the process
    after the run stopped with its checkpoint; a second signal ends it at once with the signal's exit code, not a
    death by the signal (-15) nor a traceback from the interpreter's join."""
    proc, run = _lingering_run(tmp_path)
    out = []
    try:
        _wait_for_rows(run / "metrics.csv", 2)
        proc.send_signal(sig)
        for line in proc.stdout:  # the run's last line said, the process waits on the thread
            out.append(line)
            if line.startswith("continue with"):
                break
        time.sleep(0.5)
        assert proc.poll() is None, "the process ended without waiting for its thread: nothing tested"
        sent = time.monotonic()
        proc.send_signal(sig)
        rest, err = proc.communicate(timeout=10)
        waited = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    assert waited < 3.0 and "Traceback" not in err and "Exception ignored" not in err, (waited, err)
    assert load_checkpoint(run)["iteration"] >= 2


@pytest.mark.slow
def test_a_run_stopped_now_ends_its_process_within_seconds_though_a_thread_would_hold_it(tmp_path):
    """Fault injection: two SIGTERMs at once (stop now, no checkpoint) while a thread would hold the process for two
    minutes: it ends within the CLI's STOP_NOW_S, with SIGTERM's exit code and what it said kept."""
    from ppo_td.cli import STOP_NOW_S

    proc, run = _lingering_run(tmp_path, "make_slow")
    err = []
    try:
        _wait_for_rows(run / "metrics.csv", 1)
        proc.send_signal(signal.SIGTERM)
        for line in proc.stderr:  # the first one heard (two at once are one to Python)
            err.append(line)
            if "stopping at the end of this iteration" in line:
                break
        proc.send_signal(signal.SIGTERM)  # within the 4 s of the iteration
        sent = time.monotonic()
        _, rest = proc.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        proc.kill()
    err = "".join(err) + rest
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "ppo-td train: SIGTERM: stopped" in err and waited < STOP_NOW_S + 3.0, (waited, err)


def test_main_called_from_python_leaves_the_process_and_its_handlers_as_they_were(monkeypatch, capsys):
    """main() in a test or a notebook: a command that a signal stopped at once returns its code and changes nothing
    of the process (the script alone ends its process promptly); command() says how the signal ended it."""
    import importlib

    cli_main = importlib.import_module("ppo_td.cli.main")  # (the package's ``main`` is the function)

    def stopped(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_train", stopped)
    monkeypatch.setattr(cli_main, "_eval", lambda args: 128 + signal.SIGTERM)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    threads = threading.active_count()
    assert main(["train"]) == 130
    assert cli_main.command(["train"]) == (130, "now")
    assert cli_main.command(["eval", "runs/x"]) == (128 + signal.SIGTERM, "after")
    assert cli_main.command(["--help"]) == (0, None)
    time.sleep(1.5)  # past the script's STOP_NOW_S: this process goes on
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers and threading.active_count() == threads
    assert "ppo-td train: SIGINT: stopped" in capsys.readouterr().err
