"""Episodes that never end: evaluation is capped (a cut episode is said as cut, never counted as a return), and
SIGINT/SIGTERM stop any evaluation at once, leaving the run folder resumable."""

import dataclasses
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ppo_td.cli import main
from ppo_td.config import EnvConfig
from ppo_td.experiment.report import format_evaluation
from ppo_td.training import Evaluation, build_pipeline, evaluate, step_cap

TESTS = Path(__file__).parent
ENDLESS = ["--env.env-id", "endless_envs:endless", "--preset", "cleanrl", "--model.hidden-sizes", "8",
           "--env.num-envs", "2", "--frames-per-batch", "64", "--total-frames", "128", "--no-progress",
           "--eval-episodes", "4"]
STOP_BOUND = 2.0  # seconds from the signal to the process's end (measured about 0.9 s on 2 idle cores)
HANG = 90


def _actor(config):
    pipeline = build_pipeline(config)
    pipeline.collector.shutdown()
    return pipeline.actor


def test_episodes_that_never_end_are_cut_at_the_cap_and_kept_apart(tiny_config):
    env = EnvConfig("endless_envs:endless", num_envs=2)
    config = dataclasses.replace(tiny_config, env=env)
    assert step_cap(env, 300) == (300, False)
    ev = evaluate(_actor(config), env, 4, seed=0, max_steps=300)
    assert ev.returns == [] and len(ev.cut) == 4 and ev.max_steps == 300
    assert all(0 <= r <= 300 for r in ev.cut)  # reward 0 or 1 a step: the reward summed over the 300 steps
    # some copies end (even reset seeds end at step 50), the others are cut: two lists, in copy order
    mixed_env = dataclasses.replace(env, kwargs=("end_at=50",))
    mixed = evaluate(_actor(dataclasses.replace(config, env=mixed_env)), mixed_env, 4, seed=0, max_steps=300)
    assert len(mixed.returns) == 2 and len(mixed.cut) == 2 and all(r <= 50 for r in mixed.returns)
    # sampled actions: the same cap; the caller's RNG untouched
    state = torch.get_rng_state()
    sampled = evaluate(_actor(config), env, 4, seed=0, sampled=True, max_steps=300)
    assert len(sampled.cut) == 4 and torch.equal(torch.get_rng_state(), state)


def test_an_env_with_its_own_limit_runs_to_it_whatever_the_cap(tiny_config):
    env = EnvConfig("CartPole-v1", num_envs=2)
    assert step_cap(env, 3) == (500, True)  # the registered limit, not the cap
    limited = dataclasses.replace(env, env_id="endless_envs:endless", max_episode_steps=40)
    ev = evaluate(_actor(dataclasses.replace(tiny_config, env=limited)), limited, 2, seed=0, max_steps=10_000)
    assert ev.cut == [] and len(ev.returns) == 2 and all(r <= 40 for r in ev.returns)
    assert step_cap(EnvConfig("ALE/Pong-v5", atari=True, kwargs=("frameskip=1",)), 5)[0] == 27_000  # 108,000 frames


def test_cut_episodes_are_reported_as_cut():
    assert format_evaluation(Evaluation([1.0, 3.0])) == "deterministic evaluation: 2.0 +- 1.0 over 2 episodes"
    some = format_evaluation(Evaluation([1.0, 3.0], [7.0], 10_000))
    assert some.startswith("deterministic evaluation: 2.0 +- 1.0 over 2 episodes; 1 more cut at 10,000 steps")
    none = format_evaluation(Evaluation([], [7.0, 9.0], 10_000), "sampled")
    assert none.startswith("sampled evaluation: no episode ended: all 2 were cut at 10,000 steps") and "8.0" in none


def test_the_cli_caps_evaluation_and_says_so(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *ENDLESS, "--eval-max-steps", "200", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "evaluating: 4 deterministic and 4 sampled episodes, each cut at 200 steps if still running" in out
    assert "deterministic evaluation: no episode ended: all 4 were cut at 200 steps" in out
    assert ("note: 4 of 4 deterministic and 4 of 4 sampled evaluation episodes were still running at 200 steps and "
            "were cut there, without a return (change where with eval_max_steps, --eval-max-steps") in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["eval_returns"] == [] and len(summary["eval_cut"]) == 4 and summary["eval_max_steps"] == 200
    assert main(["eval", str(run), "--episodes", "2", "--max-steps", "30"]) == 0
    assert "all 2 were cut at 30 steps" in capsys.readouterr().out
    assert main(["eval", str(run), "--max-steps", "0"]) == 2


def test_an_env_that_ends_its_episodes_itself_is_told_nothing_about_cuts(tmp_path, capsys):
    """Its truncation is its own (no TimeLimit ppo_td can read): no episode is cut, so no note says one was."""
    args = [a for a in ENDLESS if a != "endless_envs:endless"]
    assert main(["train", *args[:args.index("--env.env-id") + 1], "endless_envs:truncating",
                 *args[args.index("--env.env-id") + 1:], "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out and "were cut" not in out and "more cut at" not in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["eval_returns"]) == 4 and "eval_cut" not in summary and max(summary["eval_returns"]) <= 30


def _start(args, out_file, err_file):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "ppo_td.cli", *args], stdout=out_file, stderr=err_file, env=env,
                            cwd=TESTS.parent)


def _signal_during_evaluation(args, tmp_path, sig, marker):
    """Start ``ppo-td ARGS``, wait for ``marker`` on its stdout (its evaluation runs), send ``sig``: returns the
    exit code, the seconds from the signal to the end, stdout and stderr."""
    out_path, err_path = tmp_path / f"{sig.name}.out", tmp_path / f"{sig.name}.err"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = _start(args, out_file, err_file)
        try:
            deadline = time.monotonic() + HANG
            while marker not in out_path.read_text():
                assert proc.poll() is None, f"ended before its evaluation: {err_path.read_text()[-2000:]}"
                assert time.monotonic() < deadline, "the evaluation never began: a hang"
                time.sleep(0.05)
            time.sleep(0.5)  # well inside the episodes
            sent = time.monotonic()
            proc.send_signal(sig)
            code = proc.wait(timeout=HANG)
            took = time.monotonic() - sent
        finally:
            proc.kill()
    return code, took, out_path.read_text(), err_path.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_final_evaluation_and_resume_finishes_it(tmp_path, sig):
    run = tmp_path / "run"
    code, took, out, err = _signal_during_evaluation(
        ["train", *ENDLESS, "--eval-max-steps", "100000000", "--run-dir", str(run)], tmp_path, sig, "cut at")
    assert code == 128 + sig, err
    assert took < STOP_BOUND, f"{took:.1f} s from {sig.name} to the end"
    assert f"{sig.name}: the final evaluation stopped" in err and f"ppo-td train --resume {run}" in err
    assert "leaked semaphore" not in err and "Traceback" not in err
    assert not (run / "summary.json").exists() and (run / "checkpoint.pt").exists()
    done = subprocess.run([sys.executable, "-m", "ppo_td.cli", "train", "--resume", str(run), "--eval-max-steps",
                           "100"], capture_output=True, text=True, timeout=HANG, cwd=TESTS.parent,
                          env=dict(os.environ, PYTHONPATH=str(TESTS)))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "all 4 were cut at 100 steps" in done.stdout
    assert json.loads((run / "summary.json").read_text())["eval_max_steps"] == 100


@pytest.mark.slow
def test_a_signal_stops_ppo_td_eval(tmp_path):
    run = tmp_path / "run"
    assert main(["train", *ENDLESS, "--eval-episodes", "0", "--run-dir", str(run)]) == 0
    code, took, out, err = _signal_during_evaluation(
        ["eval", str(run), "--episodes", "3", "--max-steps", "100000000"], tmp_path, signal.SIGTERM, "cut at")
    assert code == 128 + signal.SIGTERM and took < STOP_BOUND, (code, took, err)
    assert "ppo-td eval: SIGTERM: the deterministic evaluation stopped" in err
    assert "leaked semaphore" not in err and "Traceback" not in err


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("moviepy", "pygame")), reason="the video extra")
def test_videos_are_capped_and_dropped_on_a_stop(tmp_path, capsys, monkeypatch):
    from ppo_td.deploy import load_policy
    from ppo_td.deploy.video import record_video

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    run = tmp_path / "run"
    assert main(["train", "--preset", "pendulum", "--env.env-id", "endless_envs:endless_pendulum", "--env.num-envs",
                 "1", "--frames-per-batch", "64", "--total-frames", "64", "--optim.num-minibatches", "2",
                 "--eval-episodes", "0", "--no-progress", "--run-dir", str(run)]) == 0
    assert main(["eval", str(run), "--episodes", "1", "--max-steps", "25", "--video", str(tmp_path / "v")]) == 0
    assert "(cut at 25 steps, reward so far " in capsys.readouterr().out
    policy = load_policy(run)
    [video] = record_video(policy, tmp_path / "w", max_steps=40)
    assert video.cut and video.steps == 40 and video.path.is_file()
    calls = []
    stopped = record_video(policy, tmp_path / "x", max_steps=40, should_stop=lambda: calls.append(1) or len(calls) > 5)
    assert stopped == []
    assert len(calls) == 6 and not (tmp_path / "x").exists()  # the episode being recorded is dropped unwritten
