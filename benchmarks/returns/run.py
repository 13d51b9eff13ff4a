"""Multi-seed returns: ppo_td beside Stable-Baselines3 at the same settings, budget and seeds, against published PPO.

    python -m benchmarks returns classic                 # 5 seeds of every classic-control env, both libraries
    python -m benchmarks returns classic --jobs 2        # two runs at a time (one process per core, one thread each)
    python -m benchmarks returns mujoco --seeds 1 2 3 --libraries ppo_td
    python -m benchmarks returns classic --report        # tables, intervals and plots from what the store holds
    python -m benchmarks returns classic --jobs 2 --again-before 2026-12-07T09:00   # re-measure today's code

Every finished run is one JSON line in the result store (``--store``, default ``benchmarks/results/returns``:
``runs.jsonl``) with its command, commit, seed, training episodes (past 2,000, their curve) and final numbers; a
run already in the store is skipped, so the same command continues a suite after Ctrl-C, a crash or the next day.
``--again-before TIME`` runs again each run whose latest stored run started before ``TIME`` (UTC; a code change
re-measured, frames/s included): the new line is appended and the report reads the latest run of a key, and the same
command, restarted, skips what it has run again since ``TIME``.
A run is a ``benchmarks.common.worker`` process (``torch.set_num_threads(1)``), killed after ``--timeout`` seconds.

Per run: the mean of the last 100 training episodes (the statistic of CleanRL's tables and of the PPO paper) and a
deterministic evaluation of 10 episodes after training (RL Zoo's kind of number). ``--report`` gives per env: mean
+- std over seeds, median, IQM with a stratified-bootstrap 95% interval (rliable, the method of Agarwal et al.,
2021), the anchors (published PPO numbers, with their env versions), and ppo_td's probability of beating SB3
(rliable's probability of improvement); per suite: scores normalized per env (random policy 0, best published PPO
1), their IQM with its interval, a performance profile, and return curves against frames and seconds.

Each env trains on a ppo_td preset, which says where its settings come from: RL Zoo's tuned entries
(``hyperparams/ppo.yml`` at commit ``22e3ff2``: ``cartpole-zoo``, ``acrobot``, ``lunarlander``...), CleanRL's
MuJoCo settings (``hopper``...), or ppo_td's own (``pendulum``). Both libraries train from the same config (SB3
through ``benchmarks.common.worker``'s mapping), so the comparison is of implementations, not of settings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from benchmarks.common.store import measured_commit
from benchmarks.returns.suites import (
    DEFAULT_SEEDS,
    EVAL_EPISODES,
    ROOT,
    SEEDS,
    STORE,
    SUITES,
    Task,
    compact,
    config_of,
    key_of,
    read_store,
    settings_config,
    whole_evaluation,
    with_settings,
)


def _commit() -> str:
    return measured_commit(ROOT)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("ppo_td", "torch", "torchrl", "tensordict", "gymnasium", "stable-baselines3", "mujoco"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def last_mean(returns: list[float], n: int = 100) -> float:
    """The mean of the last ``n`` training episodes (all of them where fewer ended)."""
    tail = returns[-n:]
    return statistics.fmean(tail) if tail else math.nan



def run_one(suite: str, task: Task, library: str, seed: int, timeout: float) -> dict[str, Any]:
    """One run in its own worker process; its store record.

    Raises:
        RuntimeError: the run failed or passed ``timeout`` (with the end of its stderr).
    """
    from ppo_td.config import to_dict

    config = config_of(task)
    spec = {"library": library, "config": to_dict(config), "seed": seed, "eval_episodes": EVAL_EPISODES}
    command = [sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)]
    what = f"{library} {task.env_id} seed {seed}"
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with _LOCK:
        _RUNNING.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as err:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{what}: over --timeout {timeout:.0f} s") from err
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    if proc.returncode:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{stderr[-2000:]}")
    try:
        out = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as err:
        raise RuntimeError(f"{what}: the worker printed no result line (stdout ends {stdout[-500:]!r})") from err
    returns = [e[2] for e in out["episodes"]]
    return compact({
        "key": key_of(task, library, seed), "suite": suite, "env": task.env_id, "library": library,
        "settings": task.settings, "seed": seed, "frames": out["frames"], "budget": task.frames,
        "last100": last_mean(returns), "eval_returns": out["eval_returns"], "eval_mean": out["eval_mean"],
        "eval_cut": out.get("eval_cut", []),  # SB3's evaluate_policy runs every episode to its end
        "eval_starts": "per run" if library == "ppo_td" else "sequential",  # benchmarks.returns.store_history
        "episodes": [[int(f), round(float(s), 2), round(float(r), 4)] for f, s, r in out["episodes"]],
        "train_seconds": out["train_seconds"], "notes": [task.note] if task.note else [],
        "command": "python -m benchmarks worker " + shlex.quote(json.dumps(spec)), "commit": _commit(),
        "versions": _versions(), "host": platform.node(), "cpus": os.cpu_count(),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    })


_RUNNING: set[subprocess.Popen] = set()
"""The worker processes running now (ended at Ctrl-C or SIGTERM)."""
_LOCK = threading.Lock()


def _stop_workers() -> None:
    """End every running worker process: SIGTERM, then SIGKILL after 10 s."""
    with _LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _append(store: Path, record: dict[str, Any]) -> None:
    """One finished run onto the store, whole (one write, flushed and synced) or not at all."""
    line = json.dumps(record) + "\n"
    path = store / "runs.jsonl"
    with path.open("a") as f:
        if f.tell() and _last_byte(path) != b"\n":  # a line a crash cut short: left on a line of its own
            line = "\n" + line
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


def _eta(done: list[dict[str, Any]], left: list[tuple[str, Task, str, int]], jobs: int) -> str:
    """The time the runs left should take: seconds per frame of the finished runs of the same env and library (else
    of the same library, else of all), over ``jobs`` processes."""
    if not left:
        return "0 s"
    if not done:
        return "unknown until the first run ends"
    rate: dict[Any, list[float]] = {}
    for r in done:
        per = r["wall_seconds"] / max(r["frames"], 1)
        for key in ((r["library"], r["env"]), r["library"], None):
            rate.setdefault(key, []).append(per)
    seconds = 0.0
    for _, task, library, _ in left:
        per = rate.get((library, task.env_id)) or rate.get(library) or rate[None]
        seconds += statistics.fmean(per) * task.frames
    seconds /= jobs
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def stored_since(runs: list[dict[str, Any]], since: dt.datetime | None) -> set[str]:
    """The keys with a stored run that counts as done: a whole evaluation (:func:`whole_evaluation`), the latest such
    run of a key started at or after ``since`` where it is given (its finish less its wall seconds: a run that began
    on the code before ``since`` and ended after it is run again too)."""
    def started(run: dict[str, Any]) -> dt.datetime:
        return _utc(run["finished"]) - dt.timedelta(seconds=run.get("wall_seconds", 0.0))

    latest = {r["key"]: r for r in runs if whole_evaluation(r)}  # (in the order written: the last of a key)
    return {key for key, r in latest.items() if since is None or started(r) >= since}


def _utc(text: str) -> dt.datetime:
    """An ISO time (a trailing Z read as UTC, which Python 3.10's fromisoformat does not), UTC where it names no
    zone."""
    when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def parse_utc(text: str) -> dt.datetime:
    """``--again-before``'s time: an ISO date or date and time, UTC where it names no zone.

    Raises:
        ValueError: not an ISO date, or later than now (a restart would run again what it had just run).
    """
    try:
        when = _utc(text)
    except ValueError as err:
        raise ValueError(f"{text!r} is not an ISO date or date and time (e.g. 2026-12-07 or 2026-12-07T09:00)") from err
    now = dt.datetime.now(dt.timezone.utc)
    if when > now:
        raise ValueError(f"{text} is after now ({now.isoformat(timespec='minutes')}): the command, restarted, would "
                         "run again what it had just run; give the time the code to measure was in place")
    return when


def run_suites(suites: list[str], seeds: list[int] | None, libraries: list[str], jobs: int, store: Path,
               timeout: float, envs: list[str] | None = None, settings: str | None = None,
               again_before: dt.datetime | None = None) -> int:
    """Every (env, library, seed) of ``suites`` not in the store, ``jobs`` at a time; 0 when all succeeded.
    ``seeds``: None for each suite's own (:data:`SEEDS`); ``settings``: another preset for every env (an ablation,
    stored and reported beside the suite's own); ``again_before``: a stored run finished before it is run again."""
    store.mkdir(parents=True, exist_ok=True)
    finished = stored_since(read_store(store), again_before)
    plan = [(suite, task, library, seed) for suite in suites
            for task in (SUITES[suite] if settings is None else [with_settings(t, settings) for t in SUITES[suite]])
            for seed in (seeds or SEEDS.get(suite, DEFAULT_SEEDS))
            for library in libraries if (library == "ppo_td" or task.sb3) and (not envs or task.env_id in envs)]
    # env by env (a finished env has all its seeds), the libraries alternating seed by seed (noise hits both)
    left = [p for p in plan if key_of(p[1], p[2], p[3]) not in finished]
    since = "" if again_before is None else f" since {again_before.isoformat(timespec='minutes')}"
    print(f"{len(plan)} run{'' if len(plan) == 1 else 's'} in {', '.join(suites)}: {len(plan) - len(left)} in the "
          f"store{since} ({store / 'runs.jsonl'}), {len(left)} to run, {jobs} at a time", flush=True)
    done, failed = [], 0
    pool = ThreadPoolExecutor(max_workers=jobs)  # each thread waits on one worker process
    running: dict[Future, tuple[str, Task, str, int, float]] = {}
    queue = list(left)
    try:
        while queue or running:
            while queue and len(running) < jobs:
                suite, task, library, seed = queue.pop(0)
                future = pool.submit(run_one, suite, task, library, seed, timeout)
                running[future] = (suite, task, library, seed, time.monotonic())
            finished_now, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished_now:
                suite, task, library, seed, started = running.pop(future)
                try:
                    record = future.result()
                except RuntimeError as err:
                    failed += 1
                    print(f"FAILED {err}", file=sys.stderr, flush=True)
                    continue
                record["wall_seconds"] = time.monotonic() - started
                _append(store, record)
                done.append(record)
                pending = queue + [(s, t, lib, sd) for s, t, lib, sd, _ in running.values()]
                evaluation = "none ended" if record["eval_mean"] is None else f"{record['eval_mean']:.1f}"
                print(f"[{len(done) + failed}/{len(left)}] {library} {task.env_id} seed {seed}: last 100 episodes "
                      f"{record['last100']:.1f}, eval {evaluation}, {record['wall_seconds'] / 60:.1f} min"
                      f" | {len(pending)} left, about {_eta(done, pending, jobs)}", flush=True)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_workers()  # their runs are not stored: the next command runs them again
        print(f"\nstopped: {len(done)} runs stored this time in {store / 'runs.jsonl'}; the same command continues "
              "with the rest", file=sys.stderr, flush=True)
        return 130
    pool.shutdown()
    if failed:
        print(f"{failed} runs failed (above); the same command retries them", file=sys.stderr)
    return 1 if failed else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks returns", description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="+", choices=list(SUITES), metavar="SUITE",
                        help=f"one or more of {', '.join(SUITES)}")
    parser.add_argument("--seeds", type=int, nargs="+",
                        help=f"default: 1-5, or 1-3 where a suite's budget demands it ({', '.join(SEEDS)})")
    parser.add_argument("--libraries", nargs="+", choices=["ppo_td", "sb3"], default=["ppo_td", "sb3"])
    parser.add_argument("--envs", nargs="+", help="only these env ids of the suites")
    parser.add_argument("--settings", metavar="PRESET[+section.field=VALUE...]",
                        help="train the envs on this ppo_td preset instead of their own, with fields changed after a "
                             "+ (an ablation: its runs are stored under the label and reported beside the suite's "
                             "own), e.g. mountaincar-continuous+model.orthogonal_init=True")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (at most the CPU count; one thread each)")
    parser.add_argument("--store", type=Path, default=STORE, help="the result store's folder (runs.jsonl)")
    parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds one run may take")
    parser.add_argument("--report", action="store_true", help="write the report from the store; run nothing")
    parser.add_argument("--again-before", metavar="TIME",
                        help="run again each run whose latest stored run started before TIME (ISO, UTC unless it says "
                             "otherwise): today's code re-measured; the report reads the latest run of a key")
    args = parser.parse_args(argv)
    again_before = None
    if args.again_before is not None:
        if args.report:
            parser.error("--again-before runs again; --report runs nothing: give one of them")
        try:
            again_before = parse_utc(args.again_before)
        except ValueError as err:
            parser.error(f"--again-before: {err}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if not 1 <= args.jobs <= cpus:
        parser.error(f"--jobs {args.jobs}: between 1 and this machine's {cpus} CPUs (one run per core)")
    unknown = sorted(set(args.envs or ()) - {t.env_id for s in args.suites for t in SUITES[s]})
    if unknown:
        parser.error(f"--envs {unknown}: not in {', '.join(args.suites)} (its envs: "
                     f"{', '.join(t.env_id for s in args.suites for t in SUITES[s])})")
    if args.settings is not None:
        from ppo_td.presets import get_preset

        try:
            preset = settings_config(args.settings)
        except (ValueError, TypeError, AttributeError) as err:
            parser.error(f"--settings: {err}")
        agents = [s for s in args.suites if any(get_preset(t.settings).env.multiagent for t in SUITES[s])]
        if agents or preset.env.multiagent:
            parser.error(f"--settings {args.settings}: the presets of multi-agent envs name their envs, so they cannot "
                         f"be swapped ({', '.join(agents) or args.settings}); give one-agent suites and presets")
    if args.report:
        from benchmarks.returns.report import write_report

        if not any(r["suite"] in args.suites for r in read_store(args.store)):
            parser.error(f"--report: the store {args.store / 'runs.jsonl'} holds no run of {', '.join(args.suites)}; "
                         f"run them first (python -m benchmarks returns {' '.join(args.suites)}), or give --store")

        print(write_report(args.suites, args.store))
        return 0
    before = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM as Ctrl-C: the workers end, the store keeps what
    try:  # finished
        return run_suites(args.suites, args.seeds, args.libraries, args.jobs, args.store, args.timeout, args.envs,
                          args.settings, again_before)
    finally:
        signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
