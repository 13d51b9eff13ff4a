"""Multi-seed returns: ppo_td beside Stable-Baselines3 at the same settings, budget and seeds, against published PPO.

    python -m benchmarks returns classic                 # 5 seeds of every classic-control env, both libraries
    python -m benchmarks returns classic --jobs 2        # two runs at a time (one process per core, one thread each)
    python -m benchmarks returns mujoco --seeds 1 2 3 --libraries ppo_td
    python -m benchmarks returns classic --report        # tables, intervals and plots from what the store holds

Every finished run is one JSON line in the result store (``--store``, default ``benchmarks/results/returns``:
``runs.jsonl``) with its command, commit, seed, training episodes (past 2,000, their curve) and final numbers; a
run already in the store is skipped, so the same command continues a suite after Ctrl-C, a crash or the next day.
A run is a ``benchmarks.worker`` process (``torch.set_num_threads(1)``), killed after ``--timeout`` seconds.

Per run: the mean of the last 100 training episodes (the statistic of CleanRL's tables and of the PPO paper) and a
deterministic evaluation of 10 episodes after training (RL Zoo's kind of number). ``--report`` gives per env: mean
+- std over seeds, median, IQM with a stratified-bootstrap 95% interval (rliable, the method of Agarwal et al.,
2021), the anchors (published PPO numbers, with their env versions), and ppo_td's probability of beating SB3
(rliable's probability of improvement); per suite: scores normalized per env (random policy 0, best published PPO
1), their IQM with its interval, a performance profile, and return curves against frames and seconds.

Each env trains on a ppo_td preset, which says where its settings come from: RL Zoo's tuned entries
(``hyperparams/ppo.yml`` at commit ``22e3ff2``: ``cartpole-zoo``, ``acrobot``, ``lunarlander``...), CleanRL's
MuJoCo settings (``hopper``...), or ppo_td's own (``pendulum``). Both libraries train from the same config (SB3
through ``benchmarks.worker``'s mapping), so the comparison is of implementations, not of settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
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

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "results" / "returns"


@dataclasses.dataclass(frozen=True)
class Task:
    """One env of a suite: its id, where its settings come from, its frame budget."""

    env_id: str
    settings: str
    """The ppo_td preset it trains with (each says where its settings come from)."""
    frames: int
    kwargs: tuple[str, ...] = ()
    max_episode_steps: int | None = None
    sb3: bool = True
    """Whether Stable-Baselines3 runs beside it (not for envs it cannot take as they are, e.g. MiniGrid's Dict)."""
    note: str = ""


SUITES: dict[str, list[Task]] = {
    "classic": [
        Task("CartPole-v1", "cartpole-zoo", 100_000, note="RL Zoo anneals the clip range (lin_0.2); constant here"),
        Task("Acrobot-v1", "acrobot", 1_000_000),
        Task("MountainCar-v0", "mountaincar", 1_000_000),
        Task("MountainCarContinuous-v0", "mountaincar-continuous", 20_000, note="gSDE, as RL Zoo's entry"),
        Task("Pendulum-v1", "pendulum", 100_352, note="ppo_td's pendulum preset (RL Zoo's uses gSDE)"),
    ],
    "box2d": [
        Task("LunarLander-v3", "lunarlander", 1_000_000),
        Task("LunarLanderContinuous-v3", "lunarlander-continuous", 1_000_000),
        Task("BipedalWalker-v3", "bipedalwalker", 2_000_000, note="RL Zoo trains 5M steps; run at 2M here"),
    ],
    "mujoco": [
        Task("Hopper-v5", "hopper", 1_000_000),
        Task("Walker2d-v5", "walker2d", 1_000_000),
        Task("HalfCheetah-v5", "halfcheetah", 1_000_000),
        Task("Ant-v5", "ant", 1_000_000, note="v4's observation (the ant preset: no contact forces)"),
        Task("Swimmer-v5", "swimmer", 1_000_000, note="RL Zoo's Swimmer-v4 entry on v5"),
    ],
    "minatar": [  # MinAtar's 10x10 games at 10M frames, PureJaxRL's budget (on one core about 7.5 min a Breakout
        # run, 14 a SpaceInvaders one, 2026-11-29); no PPO table is published for them (MinAtar's paper reports DQN
        # and AC(lambda) curves at 5M frames)
        Task("MinAtar/Breakout-v1", "minatar", 10_000_000, sb3=False),
        Task("MinAtar/SpaceInvaders-v1", "minatar", 10_000_000, sb3=False),
    ],
    "toytext": [  # CleanRL's ppo.py settings (the cleanrl preset), CliffWalking on the settings `ppo-td tune` found
        # for it (the cliffwalking preset, at the 200k frames it was tuned at); no published PPO numbers exist for these
        Task("Taxi-v4", "cleanrl", 500_000, sb3=False),
        Task("FrozenLake8x8-v1", "cleanrl", 500_000, sb3=False, note="slippery, Gymnasium's 200-step limit"),
        Task("CliffWalking-v1", "cliffwalking", 200_000, sb3=False,
             note="tuned on the cleanrl preset (docs/tuning.md); a 500-step limit (none is registered)"),
        Task("Blackjack-v1", "cleanrl", 500_000, sb3=False),
    ],
    "minigrid": [  # RL Zoo's entry: the 7x7x3 image and the mission flattened (FlatObsWrapper), normalized; SB3
        # takes the same wrapped env (benchmarks.worker builds it as ppo_td's user sees it)
        Task("minigrid:MiniGrid-Empty-Random-5x5-v0", "minigrid", 100_000),
        Task("minigrid:MiniGrid-DoorKey-5x5-v0", "minigrid", 100_000),
    ],
    "multiagent": [  # reward per agent; BenchMARL is the peer here (python -m benchmarks multiagent)
        Task("navigation", "vmas-navigation", 600_000, sb3=False),
        Task("balance", "vmas-light", 2_048_000, sb3=False, note="2M frames: at 409,600 one seed of three learned"),
        Task("mpe2.simple_spread_v3", "mpe-spread", 400_000, sb3=False),
    ],
}
"""The suites: each env with its settings and budget. MuJoCo at 1M frames on ppo_td's presets (CleanRL's
``ppo_continuous_action.py`` settings, the PPO paper's); Humanoid and Atari are left out of these suites on two
cores (Atari at 10M frames is about a day a seed here); MinAtar stands in for Atari, at 10M frames."""

DEFAULT_SEEDS = [1, 2, 3, 4, 5]
SEEDS = {"mujoco": [1, 2, 3], "multiagent": [1, 2, 3]}
"""Fewer seeds where a suite's budget demands it, on one core a run: MuJoCo's 1M frames take 9-18 min for ppo_td and
13-26 min for SB3 (the stored runs of 2026-11-28); VMAS navigation's 600k frames 22 min (2026-11-29)."""

ANCHORS: dict[str, list[tuple[str, float, float | None, str]]] = {
    # env: [(source, mean, std or None, what)], copied from the sources named
    "CartPole-v1": [("CleanRL ppo.py", 490.04, 6.12, "500k steps, last 100 train episodes, 3 seeds"),
                    ("RL Zoo", 500.0, 0.0, "100k steps, 1 seed, deterministic eval")],
    "Acrobot-v1": [("CleanRL ppo.py", -86.36, 1.32, "500k steps, last 100 train episodes, 3 seeds"),
                   ("RL Zoo", -73.506, 18.201, "1M steps, 1 seed, deterministic eval")],
    "MountainCar-v0": [("CleanRL ppo.py", -200.0, 0.0, "500k steps, last 100 train episodes, 3 seeds"),
                       ("RL Zoo", -110.423, 19.473, "1M steps, 1 seed, deterministic eval")],
    "MountainCarContinuous-v0": [("RL Zoo", 88.343, 2.572, "20k steps, 1 seed, deterministic eval, gSDE")],
    "Pendulum-v1": [("RL Zoo", -172.225, 104.159, "100k steps, 1 seed, deterministic eval, gSDE"),
                    ("CleanRL (8M)", -1141.98, 135.55, "8M steps, last 100 train episodes")],
    "LunarLander-v3": [("RL Zoo (v2)", 242.119, 31.823, "1M steps, 1 seed, deterministic eval")],
    "LunarLanderContinuous-v3": [("RL Zoo (v2)", 270.863, 32.072, "1M steps, 1 seed, deterministic eval")],
    "BipedalWalker-v3": [("RL Zoo", 287.939, 2.448, "5M steps, 1 seed, deterministic eval"),
                         ("CleanRL (8M)", 172.12, 96.05, "8M steps, last 100 train episodes")],
    "Hopper-v5": [("CleanRL (v4)", 2051.80, 313.94, "1M steps, last 100 train episodes, 3 seeds"),
                  ("RL Zoo (v3)", 2410.435, 10.026, "1M steps, 1 seed, deterministic eval"),
                  ("OpenAI baselines ppo2 (v2)", 2316.16, None, "1M steps, 6 seeds")],
    "Walker2d-v5": [("CleanRL (v4)", 2890.97, 231.40, "1M steps, last 100 train episodes, 3 seeds"),
                    ("RL Zoo (v3)", 3478.798, 821.708, "1M steps, 1 seed, deterministic eval"),
                    ("OpenAI baselines ppo2 (v2)", 3424.95, None, "1M steps, 6 seeds")],
    "HalfCheetah-v5": [("CleanRL (v4)", 2905.85, 1129.37, "1M steps, last 100 train episodes, 3 seeds"),
                       ("RL Zoo (v3)", 5819.099, 663.530, "1M steps, 1 seed, deterministic eval"),
                       ("OpenAI baselines ppo2 (v2)", 1668.58, None, "1M steps, 6 seeds")],
    "Ant-v5": [("RL Zoo (v3)", 1327.158, 451.577, "1M steps, 1 seed, deterministic eval"),
               ("CleanRL (v4, 8M)", 1824.17, 905.78, "8M steps, last 100 train episodes")],
    "Swimmer-v5": [("RL Zoo (v3)", 281.561, 9.671, "1M steps, 1 seed, deterministic eval (before its tuning)"),
                   ("OpenAI baselines ppo2 (v2)", 111.19, None, "1M steps, 6 seeds")],
    "minigrid:MiniGrid-Empty-Random-5x5-v0": [("RL Zoo", 0.968, 0.013, "100k steps, 1 seed, FlatObsWrapper")],
    "minigrid:MiniGrid-DoorKey-5x5-v0": [("RL Zoo", 0.964, 0.006, "100k steps, 1 seed, FlatObsWrapper")],
}
"""Published PPO numbers. CleanRL: ``docs/rl-algorithms/ppo.md`` (classic control at pr-424; MuJoCo v4 at commit
5e49edd5) and ``rpo.md`` (8M columns); RL Zoo: ``benchmark.md`` (one agent per env, its std over evaluation
episodes, not seeds); OpenAI baselines: ``benchmarks_mujoco1M.htm`` (ppo2). Where the version differs from the run's
env, the source says which it used."""

BEST = {"FrozenLake8x8-v1": (0.85, "Gymnasium's solved threshold"), "Taxi-v4": (8.0, "Gymnasium's solved threshold"),
        "CliffWalking-v1": (-13.0, "the shortest path")}
"""A best score where no PPO number is published: Gymnasium's ``reward_threshold`` for the id (FrozenLake8x8-v1
0.85, Taxi-v4 8: what it registers as solved, not an optimum), or the shortest path (CliffWalking, 13 steps at
-1)."""


def settings_config(settings: str) -> Any:
    """The config a settings label names: a preset, or a preset with fields changed, ``PRESET+section.field=VALUE+...``
    (an ablation: ``mountaincar-continuous+model.orthogonal_init=True``; each value a Python literal).

    Raises:
        ValueError: an unknown preset, field, or a value the field refuses (the config's own message).
    """
    import ast

    from ppo_td.presets import get_preset

    preset, *changes = settings.split("+")
    config = get_preset(preset)
    fields: dict[str, dict[str, Any]] = {}  # section ("" for the top) -> its changed fields, set together (a field
    for change in changes:                  # checked against another, such as optim.desired_kl and anneal_lr)
        path, sep, text = change.partition("=")
        *sections, name = path.split(".")
        if not sep or len(sections) > 1:
            raise ValueError(f"--settings {settings}: {change!r} is not section.field=VALUE (or field=VALUE)")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        fields.setdefault(sections[0] if sections else "", {})[name] = value
    parts = {section: dataclasses.replace(getattr(config, section), **changed)
             for section, changed in fields.items() if section}
    return dataclasses.replace(config, **fields.get("", {}), **parts)


def config_of(task: Task) -> Any:
    """The ppo_td config ``task`` trains (both libraries): its preset (:func:`settings_config`: maybe with fields
    changed), on its env, at its budget."""
    config = settings_config(task.settings)
    env = config.env if config.env.multiagent else dataclasses.replace(config.env, env_id=task.env_id)
    env = dataclasses.replace(env, kwargs=task.kwargs or env.kwargs,
                              max_episode_steps=task.max_episode_steps or env.max_episode_steps)
    return dataclasses.replace(config, env=env, total_frames=task.frames)


def with_settings(task: Task, settings: str) -> Task:
    """``task`` trained on the preset ``settings`` instead of its own (same env, kwargs, limit and budget)."""
    return dataclasses.replace(task, settings=settings, note=f"on the {settings} preset (the suite's: {task.settings})")


def key_of(task: Task, library: str, seed: int) -> str:
    """A run's identity in the store: the library, the env, the preset, the whole config it trains (a digest of
    ``identity_dict``: a preset changed since is run again, a field added to the config since at its default is
    not a change), the seed."""
    from ppo_td.config import identity_dict

    digest = hashlib.sha1(json.dumps(identity_dict(config_of(task)), sort_keys=True).encode()).hexdigest()[:12]
    return f"{library}|{task.env_id}|{task.settings}|{digest}|{seed}"


EVAL_EPISODES = 10
"""Deterministic evaluation episodes after each run."""


def whole_evaluation(run: dict[str, Any]) -> bool:
    """Whether a stored run says what became of each of its evaluation episodes: every one ended, or the ones cut at
    the step cap are recorded (``eval_cut``, with the reward each reached). A run stored before ``eval_cut`` existed
    with fewer returns than episodes left its cut ones nowhere: it is run again (the report reads the latest run of
    a key)."""
    return "eval_cut" in run or run["library"] != "ppo_td" or len(run["eval_returns"]) >= EVAL_EPISODES


def read_store(store: Path) -> list[dict[str, Any]]:
    """The runs in the store (a line cut short by a crash is left out)."""
    path = store / "runs.jsonl"
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return runs


def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


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


CURVE_POINTS = 2_000
"""A run with more training episodes keeps its curve, not each episode: the mean of the last 100 episodes at
2,000 evenly spaced episodes (the last included), what the report plots (a toy-text run ends 100,000+ episodes)."""


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``episodes`` ([frames, seconds, return] each) replaced by ``curve`` ([frames, seconds, mean of
    the last 100 returns] at :data:`CURVE_POINTS` episodes) and ``episodes_total``, where it has more episodes."""
    episodes = record.get("episodes")
    if episodes is None or len(episodes) <= CURVE_POINTS:
        return record
    n = len(episodes)
    sums = [0.0]
    for e in episodes:
        sums.append(sums[-1] + e[2])
    picks = sorted({round(i * (n - 1) / (CURVE_POINTS - 1)) for i in range(CURVE_POINTS)})
    curve = [[episodes[i][0], episodes[i][1], round((sums[i + 1] - sums[max(0, i + 1 - 100)]) / min(100, i + 1), 4)]
             for i in picks]
    out = {k: v for k, v in record.items() if k != "episodes"}
    return {**out, "curve": curve, "episodes_total": n}


def run_one(suite: str, task: Task, library: str, seed: int, timeout: float) -> dict[str, Any]:
    """One run in its own worker process; its store record.

    Raises:
        RuntimeError: the run failed or passed ``timeout`` (with the end of its stderr).
    """
    from ppo_td.config import to_dict

    config = config_of(task)
    spec = {"library": library, "config": to_dict(config), "seed": seed, "eval_episodes": EVAL_EPISODES}
    command = [sys.executable, "-m", "benchmarks.worker", json.dumps(spec)]
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
        "eval_starts": "per run" if library == "ppo_td" else "sequential",  # benchmarks.store_history
        "episodes": [[int(f), round(float(s), 2), round(float(r), 4)] for f, s, r in out["episodes"]],
        "train_seconds": out["train_seconds"], "notes": [task.note] if task.note else [],
        "command": "python -m benchmarks.worker " + shlex.quote(json.dumps(spec)), "commit": _commit(),
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


def run_suites(suites: list[str], seeds: list[int] | None, libraries: list[str], jobs: int, store: Path,
               timeout: float, envs: list[str] | None = None, settings: str | None = None) -> int:
    """Every (env, library, seed) of ``suites`` not in the store, ``jobs`` at a time; 0 when all succeeded.
    ``seeds``: None for each suite's own (:data:`SEEDS`); ``settings``: another preset for every env (an ablation,
    stored and reported beside the suite's own)."""
    store.mkdir(parents=True, exist_ok=True)
    finished = {r["key"] for r in read_store(store) if whole_evaluation(r)}
    plan = [(suite, task, library, seed) for suite in suites
            for task in (SUITES[suite] if settings is None else [with_settings(t, settings) for t in SUITES[suite]])
            for seed in (seeds or SEEDS.get(suite, DEFAULT_SEEDS))
            for library in libraries if (library == "ppo_td" or task.sb3) and (not envs or task.env_id in envs)]
    # env by env (a finished env has all its seeds), the libraries alternating seed by seed (noise hits both)
    left = [p for p in plan if key_of(p[1], p[2], p[3]) not in finished]
    print(f"{len(plan)} run{'' if len(plan) == 1 else 's'} in {', '.join(suites)}: {len(plan) - len(left)} in the "
          f"store ({store / 'runs.jsonl'}), {len(left)} to run, {jobs} at a time", flush=True)
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
    args = parser.parse_args(argv)
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
        from benchmarks.returns_report import write_report

        if not any(r["suite"] in args.suites for r in read_store(args.store)):
            parser.error(f"--report: the store {args.store / 'runs.jsonl'} holds no run of {', '.join(args.suites)}; "
                         f"run them first (python -m benchmarks returns {' '.join(args.suites)}), or give --store")

        print(write_report(args.suites, args.store))
        return 0
    before = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM as Ctrl-C: the workers end, the store keeps what
    try:  # finished
        return run_suites(args.suites, args.seeds, args.libraries, args.jobs, args.store, args.timeout, args.envs,
                          args.settings)
    finally:
        signal.signal(signal.SIGTERM, before)


if __name__ == "__main__":
    sys.exit(main())
