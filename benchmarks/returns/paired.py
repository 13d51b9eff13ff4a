"""ppo_td's and Stable-Baselines3's frames/s on a returns suite's configs, paired: both libraries run the same config
and seed at the same time, one process each (one per core of a 2-core machine), so both see the same machine and the
same load; the ratio of the two is the comparison (issue 65, item 3).

    python -m benchmarks paired classic --envs MountainCarContinuous-v0 --frames 20000 --seeds 1 2 3 [--compile]

Each pair is two ``benchmarks.common.worker`` processes (``python -m benchmarks worker``), without the final
evaluation; frames/s is the frames over the training seconds each library measured (ppo_td's include the first
iteration, and with ``--compile`` the compilation). The seconds to a return: each run's training seconds until the
mean of its last 100 episodes first reached the returns report's threshold (90% of the way from a random policy's
score to the best published PPO one); ``--frames`` must leave the runs time to get there. ``--compile auto``: ppo_td
with its default, compile='auto'. Each finished pair is appended to ``STORE/runs.jsonl``, keyed by the env, the whole
config (its digest), the frames, ``--compile``, the seed and the commit: a rerun at the same commit skips what is
there (a run of edited code, its commit marked ``-dirty``, is never reused). The table: per env, the median over
seeds of each library's frames/s and of the ratio, with its range; each run's seconds and seconds to the threshold.

``--against eager``: ppo_td compiled (``compile=True``, torch's compile cache emptied first: the compilation as a first
run on a machine pays it) against ppo_td eager, the same way: whether compiling pays in a whole run's wall time at
that length (the threshold of ``compile='auto'``, ``ppo_td.training.COMPILE_PAYS_STEPS``). ``--against skrl``: ppo_td
against skrl's PPO the same way (configs without gSDE, which skrl lacks; skrl scales no rewards either), its episodes
recorded by a wrapper on each env copy (``benchmarks.common.worker.EpisodeLog``) for its seconds to the threshold.

The two runs share the machine until the faster one ends; the slower one then has it to itself, which flatters its
frames/s a little: the ratio leans toward the slower library, not the faster.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
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
from benchmarks.returns.report import seconds_to, threshold_of
from benchmarks.returns.suites import ROOT, SUITES, Task, config_digest, config_of
from benchmarks.returns.suites import STORE as RETURNS_STORE

STORE = ROOT / "benchmarks" / "results" / "paired"
SIDES = {"sb3": {"ppo_td": "ppo_td", "sb3": "sb3"}, "skrl": {"ppo_td": "ppo_td", "skrl": "skrl"},
         "eager": {"compiled": "ppo_td", "eager": "ppo_td"}}
"""Per ``--against``: each side's name in a stored pair and the library it runs; the first side's frames/s over the
second's is the ratio."""


def run_pair(task: Task, frames: int, seed: int, compile: bool | str, timeout: float,
             against: str = "sb3") -> dict[str, Any]:
    """Both sides of ``against`` (:data:`SIDES`) on ``task``'s config and ``seed`` at once; each one's frames/s and
    seconds. Each worker writes to files of its own (no pipe to fill and block it) in a session of its own (ended with
    everything it started), both within one ``timeout``. The compiled side of ``against='eager'`` starts with an
    empty compile cache of its own (a temporary folder).

    Raises:
        RuntimeError: a worker failed, printed no result, or the pair passed ``timeout`` (both are ended then).
    """
    from ppo_td.config import to_dict

    config = config_of(task)
    threshold = threshold_of(task, RETURNS_STORE)
    procs: dict[str, tuple[subprocess.Popen, Any, Any]] = {}
    deadline = time.monotonic() + timeout
    cache = tempfile.TemporaryDirectory(prefix="ppo_td_compile_cache_")
    try:
        for side, library in SIDES[against].items():
            compiled = True if side == "compiled" else compile if library == "ppo_td" else False
            spec = {"library": library, "config": to_dict(config), "seed": seed, "eval_episodes": 0,
                    "total_frames": frames, "compile": compiled}
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache.name} if side == "compiled" else None
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            procs[side] = (subprocess.Popen([sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)],
                                            cwd=ROOT, stdout=out, stderr=err, text=True, start_new_session=True,
                                            env=env), out, err)
        results = {}
        for side, (proc, out, err) in procs.items():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as e:
                raise RuntimeError(f"{task.env_id} seed {seed}: over --timeout {timeout:.0f} s") from e
            out.seek(0), err.seek(0)
            results[side] = _result(side, task, seed, proc.returncode, out.read(), err.read(), threshold)
        return results
    finally:
        for proc, out, err in procs.values():
            if proc.poll() is None:  # the worker and whatever it started (env processes)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            out.close(), err.close()
        cache.cleanup()


def _result(library: str, task: Task, seed: int, code: int, stdout: str, stderr: str,
            threshold: float | None = None) -> dict[str, Any]:
    """One worker's frames/s and seconds from its last output line, and its seconds to ``threshold`` (None: never
    reached, or no threshold); RuntimeError naming what went wrong."""
    what = f"{library} {task.env_id} seed {seed}"
    if code:
        raise RuntimeError(f"{what} failed (exit {code}):\n{stderr[-2000:]}")
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
        out = {key: result[key] for key in ("frames", "train_seconds", "collect_seconds", "update_seconds")}
        out["frames_per_second"] = out["frames"] / out["train_seconds"]
        if threshold is not None:
            reached = seconds_to(result, threshold)
            out["threshold"], out["seconds_to_threshold"] = threshold, None if math.isinf(reached) else reached
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError) as err:
        raise RuntimeError(f"{what}: no result line the benchmark can read ({err!r}; stdout ends "
                           f"{stdout[-300:]!r})") from err
    return out


def key_of(run: dict[str, Any]) -> tuple:
    return (run["env"], run["config_digest"], run["frames"], run["compile"], run["seed"], run["commit"],
            run.get("against", "sb3"))  # (pairs stored before --against: against SB3)


def table(runs: list[dict[str, Any]], against: str = "sb3") -> list[str]:
    """Per env: the medians over seeds of each side's frames/s and of the first's over the second's (ppo_td over SB3,
    or compiled over eager), with the range; and the seconds each took, for a whole run's wall time."""
    first, second = SIDES[against]
    name = {"ppo_td": "ppo_td", "sb3": "SB3", "skrl": "skrl", "compiled": "compiled", "eager": "eager"}
    lines = [f"| env (settings) | compile | seeds | frames (minibatch steps) | {name[first]} frames/s | "
             f"{name[second]} frames/s | {name[first]} / {name[second]} | seconds, {name[first]} and {name[second]} | "
             f"seconds to the threshold, {name[first]} and {name[second]} | {name[second]} / {name[first]} (above 1: "
             f"{name[first]} sooner) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["env"], run["settings"], run["compile"], run["frames"]), []).append(run)
    for (env, settings, compiled, frames), group in groups.items():
        ratios = [r[first]["frames_per_second"] / r[second]["frames_per_second"] for r in group]
        ours = statistics.median(r[first]["frames_per_second"] for r in group)
        theirs = statistics.median(r[second]["frames_per_second"] for r in group)
        seconds = "; ".join(f"{r[first]['train_seconds']:.1f} and {r[second]['train_seconds']:.1f}" for r in group)
        compiled = ("compiled side" if against == "eager" else "auto" if compiled == "auto" else "yes" if compiled
                    else "no")
        steps = f" ({group[0]['steps']:,})" if "steps" in group[0] else ""
        lines.append(f"| {env} ({settings}) | {compiled} | {len(group)} | {frames:,}{steps} | "
                     f"{ours:,.0f} | {theirs:,.0f} | {statistics.median(ratios):.2f}x "
                     f"({min(ratios):.2f}-{max(ratios):.2f}) | {seconds} | {_reached(group, first, second)} |")
    return lines


def _compile_value(text: str) -> bool | str:
    """``--compile``'s value: auto, True or False."""
    values = {"auto": "auto", "true": True, "false": False}
    if text.lower() not in values:
        raise argparse.ArgumentTypeError(f"{text!r}: give auto, True or False")
    return values[text.lower()]


def _reached(group: list[dict[str, Any]], first: str, second: str) -> str:
    """Each side's seconds to the threshold per seed (``never`` where a run did not reach it), and the median over
    seeds of the second's over the first's where both reached it; ``-`` where no threshold was kept."""
    if not all("seconds_to_threshold" in r[first] and "seconds_to_threshold" in r[second] for r in group):
        return "- | -"

    def cell(x: float | None) -> str:
        return "never" if x is None else f"{x:.1f}"

    both = "; ".join(f"{cell(r[first]['seconds_to_threshold'])} and {cell(r[second]['seconds_to_threshold'])}"
                     for r in group)
    ratios = [r[second]["seconds_to_threshold"] / r[first]["seconds_to_threshold"] for r in group
              if r[first]["seconds_to_threshold"] and r[second]["seconds_to_threshold"]]
    ratio = (f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}; {len(ratios)} of {len(group)} "
             "seeds both reached it)" if ratios else "-")
    return f"{both} (threshold {group[0][first]['threshold']:,.1f}) | {ratio}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks paired", description=__doc__.split("\n\n")[0])
    paired_suites = [s for s, tasks in SUITES.items() if any(t.sb3 for t in tasks)]
    parser.add_argument("suites", nargs="+", help=f"returns suites ({', '.join(paired_suites)})")
    parser.add_argument("--envs", nargs="+", help="only these env ids of the suites")
    parser.add_argument("--frames", type=int, default=30_000,
                        help="frames per run (30,000; the suite's budget where that is smaller)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--compile", nargs="?", const=True, default=False, type=_compile_value,
                        help="ppo_td with compile=True (SB3 has none); --compile auto: the default's choice "
                             "(compile='auto'); without it: eager, as the pairs stored before")
    parser.add_argument("--against", choices=sorted(SIDES), default="sb3",
                        help="sb3: ppo_td against Stable-Baselines3 (default); skrl: against skrl (its PPO has no "
                             "gSDE and no reward scaling); eager: ppo_td compiled, its compile cache empty, against "
                             "ppo_td eager")
    parser.add_argument("--store", type=Path, default=STORE, help=f"the result store's folder ({STORE})")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per pair before both are ended (1800)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.suites if s not in paired_suites]
    if unknown:
        parser.error(f"no such suite {unknown} with Stable-Baselines3 beside it: choose from "
                     f"{', '.join(paired_suites)}")
    if args.against == "eager" and args.compile:
        parser.error("--against eager compiles one side and not the other: drop --compile")
    if args.frames < 1:
        parser.error(f"--frames {args.frames}: a number of frames, at least 1")
    tasks = [t for s in args.suites for t in SUITES[s] if t.sb3 and (args.envs is None or t.env_id in args.envs)]
    if args.envs and len({t.env_id for t in tasks}) != len(set(args.envs)):
        parser.error(f"--envs {sorted(set(args.envs) - {t.env_id for t in tasks})}: not in {args.suites} beside SB3")
    gsde = [t.env_id for t in tasks if config_of(t).model.exploration == "gsde"]
    if args.against == "skrl" and gsde:
        parser.error(f"--against skrl: {gsde} train with gSDE, which skrl's PPO does not have; leave them out "
                     "(--envs)")
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
                       "frames": frames, "compile": args.compile, "seed": seed, "commit": commit,
                       "against": args.against,
                       "steps": frames // config.frames_per_batch * config.optim.update_epochs
                       * config.optim.num_minibatches}
                if key_of(run) in done:
                    runs.append(done[key_of(run)])
                    continue
                try:
                    run.update(run_pair(task, frames, seed, args.compile, args.timeout, args.against))
                except RuntimeError as err:
                    print(err, file=sys.stderr)
                    failed += 1
                    continue
                run["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
                append_run(args.store, run)
                done[key_of(run)] = run
                runs.append(run)
                first, second = SIDES[args.against]
                print(f"{task.env_id} seed {seed}: {first} {run[first]['frames_per_second']:,.0f} frames/s, {second} "
                      f"{run[second]['frames_per_second']:,.0f} "
                      f"({run[first]['frames_per_second'] / run[second]['frames_per_second']:.2f}x)", flush=True)
    except KeyboardInterrupt:  # the running pair's workers are ended (run_pair); what finished is stored and shown
        interrupted = True
        print(f"interrupted: {len(runs)} pairs stored or read; the same command at a clean commit goes on from there",
              file=sys.stderr)
    print("\n".join(["", f"`python -m benchmarks paired {' '.join(argv)}` at {commit}", "",
                     *table(runs, args.against)]))
    return 130 if interrupted else 1 if failed else 0
