"""ppo_td's and Stable-Baselines3's frames/s on a returns suite's configs, paired: both libraries run the same config
and seed at the same time, one process each (one per core of a 2-core machine), so both see the same machine and the
same load; the ratio of the two is the comparison (issue 65, item 3).

    python -m benchmarks paired classic --envs MountainCarContinuous-v0 --frames 20000 --seeds 1 2 3 [--compile]

Each pair is two ``benchmarks.common.worker`` processes (``python -m benchmarks worker``), without the final
evaluation; frames/s is the frames over the training seconds each library measured (ppo_td's include the first
iteration, and with ``--compile`` the compilation). Each finished pair is appended to ``STORE/runs.jsonl``, keyed by the
env, the whole config (its digest), the frames, ``--compile``, the seed and the commit: a rerun at the same commit
skips what is there (a run of edited code, its commit marked ``-dirty``, is never reused). The table: per env, the
median over seeds of each library's frames/s and of the ratio, with its range.

The two runs share the machine until the faster one ends; the slower one then has it to itself, which flatters its
frames/s a little: the ratio leans toward the slower library, not the faster.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.store import append_run, measured_commit, stored_runs
from benchmarks.returns.suites import ROOT, SUITES, Task, config_digest, config_of

STORE = ROOT / "benchmarks" / "results" / "paired"
LIBRARIES = ("ppo_td", "sb3")


def run_pair(task: Task, frames: int, seed: int, compile: bool, timeout: float) -> dict[str, Any]:
    """Both libraries on ``task``'s config and ``seed`` at once; each one's frames/s and seconds. Each worker writes to
    files of its own (no pipe to fill and block it) in a session of its own (ended with everything it started), both
    within one ``timeout``.

    Raises:
        RuntimeError: a worker failed, printed no result, or the pair passed ``timeout`` (both are ended then).
    """
    from ppo_td.config import to_dict

    config = config_of(task)
    procs: dict[str, tuple[subprocess.Popen, Any, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        for library in LIBRARIES:
            spec = {"library": library, "config": to_dict(config), "seed": seed, "eval_episodes": 0,
                    "total_frames": frames, "compile": compile and library == "ppo_td"}
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            procs[library] = (subprocess.Popen([sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)],
                                               cwd=ROOT, stdout=out, stderr=err, text=True, start_new_session=True),
                              out, err)
        results = {}
        for library, (proc, out, err) in procs.items():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"{task.env_id} seed {seed}: over --timeout {timeout:.0f} s") from e
            out.seek(0), err.seek(0)
            results[library] = _result(library, task, seed, proc.returncode, out.read(), err.read())
        return results
    finally:
        for proc, out, err in procs.values():
            if proc.poll() is None:  # the worker and whatever it started (env processes)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            out.close(), err.close()


def _result(library: str, task: Task, seed: int, code: int, stdout: str, stderr: str) -> dict[str, Any]:
    """One worker's frames/s and seconds from its last output line; RuntimeError naming what went wrong."""
    what = f"{library} {task.env_id} seed {seed}"
    if code:
        raise RuntimeError(f"{what} failed (exit {code}):\n{stderr[-2000:]}")
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
        out = {key: result[key] for key in ("frames", "train_seconds", "collect_seconds", "update_seconds")}
        out["frames_per_second"] = out["frames"] / out["train_seconds"]
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        raise RuntimeError(f"{what}: no result line the benchmark can read ({err!r}; stdout ends "
                           f"{stdout[-300:]!r})") from err
    return out


def key_of(run: dict[str, Any]) -> tuple:
    return run["env"], run["config_digest"], run["frames"], run["compile"], run["seed"], run["commit"]


def table(runs: list[dict[str, Any]]) -> list[str]:
    """Per env: the medians over seeds of each library's frames/s and of ppo_td's over SB3's, with the range."""
    lines = ["| env (settings) | compile | seeds | ppo_td frames/s | SB3 frames/s | ppo_td / SB3 |",
             "|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["env"], run["settings"], run["compile"]), []).append(run)
    for (env, settings, compiled), group in groups.items():
        ratios = [r["ppo_td"]["frames_per_second"] / r["sb3"]["frames_per_second"] for r in group]
        ours = statistics.median(r["ppo_td"]["frames_per_second"] for r in group)
        theirs = statistics.median(r["sb3"]["frames_per_second"] for r in group)
        lines.append(f"| {env} ({settings}) | {'yes' if compiled else 'no'} | {len(group)} | {ours:,.0f} | "
                     f"{theirs:,.0f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks paired", description=__doc__.split("\n\n")[0])
    paired_suites = [s for s, tasks in SUITES.items() if any(t.sb3 for t in tasks)]
    parser.add_argument("suites", nargs="+", help=f"returns suites ({', '.join(paired_suites)})")
    parser.add_argument("--envs", nargs="+", help="only these env ids of the suites")
    parser.add_argument("--frames", type=int, default=30_000,
                        help="frames per run (30,000; the suite's budget where that is smaller)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--compile", action="store_true", help="ppo_td with compile=True (SB3 has none)")
    parser.add_argument("--store", type=Path, default=STORE, help=f"the result store's folder ({STORE})")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per pair before both are ended (1800)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.suites if s not in paired_suites]
    if unknown:
        parser.error(f"no such suite {unknown} with Stable-Baselines3 beside it: choose from "
                     f"{', '.join(paired_suites)}")
    if args.frames < 1:
        parser.error(f"--frames {args.frames}: a number of frames, at least 1")
    tasks = [t for s in args.suites for t in SUITES[s] if t.sb3 and (args.envs is None or t.env_id in args.envs)]
    if args.envs and len({t.env_id for t in tasks}) != len(set(args.envs)):
        parser.error(f"--envs {sorted(set(args.envs) - {t.env_id for t in tasks})}: not in {args.suites} beside SB3")
    commit = measured_commit(ROOT)
    done = stored_runs(args.store, key_of) if commit != "unknown" and not commit.endswith("-dirty") else {}
    runs, failed, interrupted = [], 0, False
    try:
        for task in tasks:
            config = config_of(task)
            frames = min(args.frames, task.frames)
            frames = max(config.frames_per_batch, frames // config.frames_per_batch * config.frames_per_batch)
            for seed in dict.fromkeys(args.seeds):
                run = {"env": task.env_id, "settings": task.settings, "config_digest": config_digest(config),
                       "frames": frames, "compile": args.compile, "seed": seed, "commit": commit}
                if key_of(run) in done:
                    runs.append(done[key_of(run)])
                    continue
                try:
                    run.update(run_pair(task, frames, seed, args.compile, args.timeout))
                except RuntimeError as err:
                    print(err, file=sys.stderr)
                    failed += 1
                    continue
                run["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
                append_run(args.store, run)
                done[key_of(run)] = run
                runs.append(run)
                print(f"{task.env_id} seed {seed}: ppo_td {run['ppo_td']['frames_per_second']:,.0f} frames/s, SB3 "
                      f"{run['sb3']['frames_per_second']:,.0f} "
                      f"({run['ppo_td']['frames_per_second'] / run['sb3']['frames_per_second']:.2f}x)", flush=True)
    except KeyboardInterrupt:  # the running pair's workers are ended (run_pair); what finished is stored and shown
        interrupted = True
        print(f"interrupted: {len(runs)} pairs stored or read; the same command at a clean commit goes on from there",
              file=sys.stderr)
    print("\n".join(["", f"`python -m benchmarks paired {' '.join(argv)}` at {commit}", "", *table(runs)]))
    return 130 if interrupted else 1 if failed else 0
