"""One PPO run over 1, 2, ... ranks (issue 61): frames/s and the update's seconds, and returns on several seeds.

    python -m benchmarks distributed                                  # here: 1 and 2 ranks, HalfCheetah-v5
    python -m benchmarks distributed --ranks 1 2 4 8 16 --skip-learning   # a 16-core machine
    python -m benchmarks distributed --device cuda --ranks 1 2 4 8 --skip-learning   # one GPU per rank

Every run is ``torchrun --standalone --nproc-per-node N -m benchmarks.scaling.distributed rank SPEC`` (1 rank too: the
same launcher), the config the same whatever N (the whole run's batch, divided over the ranks), one run at a time.

Throughput (``--rounds`` rounds, the rank counts interleaved in each so the machine's noise hits all): frames/s
after the first iteration, the collection's and the update's seconds per iteration, and each count's speed-up over
1 rank within its round (the median and range over rounds) and its scaling efficiency (speed-up / ranks), at two
settings of HalfCheetah-v5:

- ``cleanrl``: CleanRL's MuJoCo settings (2,048 frames a batch, 32 minibatches of 64, 10 epochs) on 2 env copies
  (CleanRL's 1 does not divide over ranks);
- ``large``: rsl_rl's shape of update (16 copies, 16,384 frames a batch, 4 minibatches of 4,096, 5 epochs).

Learning (``--seeds``, ``--frames``): the ``cleanrl`` setting trained to ``--frames`` at each rank count, each
finished run written to ``DIR/runs.jsonl`` at once (a rerun skips finished runs, so it continues after a stop): the
mean return of the last 100 training episodes and of the final evaluation, and the seconds until the mean of the
last 10 episodes first reached the target (90% of the median last-100 return of the 1-rank runs).

Writes ``DIR/distributed.md`` (the tables, the date and the command) and ``DIR/more_ranks.sh`` (the commands for a
bigger machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SETTINGS: dict[str, dict[str, Any]] = {
    "cleanrl": {"num_envs": 2, "frames_per_batch": 2048, "num_minibatches": 32, "update_epochs": 10},
    "large": {"num_envs": 16, "frames_per_batch": 16384, "num_minibatches": 4, "update_epochs": 5},
}
TIMEOUT = 6 * 3600
"""Seconds one run may take before it is stopped (every wait has a timeout)."""


def config_of(spec: dict[str, Any]) -> Any:
    """The whole run's config of ``spec``: the preset with the setting, seed, frames and device."""
    from ppo_td import get_preset

    setting = SETTINGS[spec["setting"]]
    config = get_preset(spec.get("preset", "halfcheetah"))
    return dataclasses.replace(
        config, env=dataclasses.replace(config.env, num_envs=setting["num_envs"]),
        frames_per_batch=setting["frames_per_batch"], total_frames=spec["frames"], seed=spec["seed"],
        device=spec.get("device", "cpu"), eval_episodes=spec.get("eval_episodes", 0),
        optim=dataclasses.replace(config.optim, num_minibatches=setting["num_minibatches"],
                                  update_epochs=setting["update_epochs"]))


def rank_run(spec: dict[str, Any]) -> None:
    """One rank's part of a run (under torchrun); rank 0 writes the run's numbers to ``spec['out']``."""
    import torch

    from ppo_td import train

    rows: list[dict[str, float]] = []
    episodes: list[tuple[int, float, float]] = []

    def record(metrics: dict[str, Any], pipeline: Any) -> None:
        rows.append({k: float(metrics[k]) for k in ("frames", "time", "collect_seconds", "update_seconds")})
        episodes.extend((e["frames"], metrics["time"], e["return"]) for e in metrics["ended_episodes"])

    result = train(config_of(spec), callbacks=[record], progress=False)
    if os.environ.get("RANK", "0") != "0":
        return
    steady = rows[1:] or rows  # the first iteration pays for warm-up (allocation, first calls)
    frames = rows[-1]["frames"] - (rows[0]["frames"] if len(rows) > 1 else 0)
    seconds = rows[-1]["time"] - (rows[0]["time"] if len(rows) > 1 else 0)
    out = {**spec, "ranks": int(os.environ.get("WORLD_SIZE", "1")), "sps": frames / seconds,
           "collect_seconds": statistics.median(r["collect_seconds"] for r in steady),
           "update_seconds": statistics.median(r["update_seconds"] for r in steady),
           "seconds": rows[-1]["time"], "frames_trained": rows[-1]["frames"], "episodes": episodes,
           "eval_returns": list(result.eval_returns), "threads": torch.get_num_threads()}
    Path(spec["out"]).write_text(json.dumps(out))


def latency_run(spec: dict[str, Any]) -> None:
    """One all-reduce of a HalfCheetah actor and critic's gradients (the ``cleanrl`` setting's networks), timed idle
    and between two ranks each busy with a minibatch's worth of matrix products; rank 0 writes the microseconds."""
    import time

    import torch
    import torch.distributed as dist

    from ppo_td.training.ranks import launched

    ranks = launched()
    assert ranks is not None, "run under torchrun with 2 or more ranks"
    grads = torch.randn(spec["numel"])
    work = torch.randn(64, 64)
    out = {}
    for busy in (False, True):
        for _ in range(50):
            dist.all_reduce(grads)
        timed = 0.0
        for _ in range(spec["calls"]):
            for _ in range(200 if busy else 0):
                work = torch.tanh(work @ work.T / 64)
            started = time.perf_counter()
            dist.all_reduce(grads)
            timed += time.perf_counter() - started
        out["busy" if busy else "idle"] = timed / spec["calls"] * 1e6
    if ranks.main:
        Path(spec["out"]).write_text(json.dumps({**spec, **out, "ranks": ranks.world}))


def launch(spec: dict[str, Any], ranks: int) -> dict[str, Any]:
    """One run over ``ranks`` ranks in a fresh torchrun; its numbers (rank 0's)."""
    with tempfile.TemporaryDirectory() as folder:
        spec = {**spec, "out": str(Path(folder) / "run.json")}
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
                   "-m", "benchmarks.scaling.distributed", "rank", json.dumps(spec)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        if done.returncode:
            raise RuntimeError(f"{ranks}-rank run {spec} failed:\n{done.stderr[-3000:]}")
        return json.loads(Path(spec["out"]).read_text())


def throughput(counts: list[int], settings: list[str], rounds: int, frames: dict[str, int], device: str,
               say: Any) -> list[dict[str, Any]]:
    results = []
    for round_ in range(rounds):
        for setting in settings:
            for ranks in counts:
                run = launch({"setting": setting, "seed": 1, "frames": frames[setting], "device": device}, ranks)
                run["round"] = round_
                results.append(run)
                say(f"round {round_ + 1} {setting} {ranks} rank(s): {run['sps']:,.0f} frames/s, update "
                    f"{run['update_seconds']:.2f} s, collect {run['collect_seconds']:.2f} s an iteration")
    return results


def throughput_table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| setting | ranks | frames/s | collect s/iteration | update s/iteration | speed-up over 1 rank | "
             "efficiency |", "|---|---:|---:|---:|---:|---:|---:|"]
    for setting in dict.fromkeys(r["setting"] for r in results):
        runs = [r for r in results if r["setting"] == setting]
        for ranks in sorted({r["ranks"] for r in runs}):
            mine = [r for r in runs if r["ranks"] == ranks]
            ups = [r["sps"] / one["sps"] for r in mine for one in runs
                   if one["ranks"] == 1 and one["round"] == r["round"]]
            speed = (f"{statistics.median(ups):.2f}x ({min(ups):.2f}-{max(ups):.2f})" if ups else "-")
            efficiency = f"{statistics.median(ups) / ranks:.0%}" if ups else "-"
            lines.append(f"| {setting} | {ranks} | {_median_range([r['sps'] for r in mine], ',.0f')} | "
                         f"{_median_range([r['collect_seconds'] for r in mine], '.2f')} | "
                         f"{_median_range([r['update_seconds'] for r in mine], '.2f')} | {speed} | {efficiency} |")
    return lines


def _median_range(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def learning(counts: list[int], seeds: list[int], frames: int, device: str, store: Path, say: Any,
             launch_missing: bool = True) -> list[dict[str, Any]]:
    """Every (ranks, seed) run at ``frames``, finished ones read from ``store`` (one JSON line each);
    ``launch_missing=False``: only those."""
    done = [json.loads(line) for line in store.read_text().splitlines() if line.strip()] if store.exists() else []
    for seed in seeds:
        for ranks in counts:
            finished = any(r["ranks"] == ranks and r["seed"] == seed and r["frames"] == frames for r in done)
            if finished or not launch_missing:
                continue
            run = launch({"setting": "cleanrl", "seed": seed, "frames": frames, "device": device,
                          "eval_episodes": 10}, ranks)
            run["last100"] = statistics.fmean(e[2] for e in run["episodes"][-100:])
            with store.open("a") as f:
                f.write(json.dumps(run) + "\n")
            done.append(run)
            say(f"seed {seed} {ranks} rank(s): last-100 return {run['last100']:.1f} in {run['seconds']:.0f} s")
    return [r for r in done if r["frames"] == frames and r["ranks"] in counts and r["seed"] in seeds]


def seconds_to(episodes: list[list[float]], target: float, window: int = 10) -> float | None:
    """Training seconds when the mean of the last ``window`` episodes first reached ``target``; None: never."""
    returns = [e[2] for e in episodes]
    for i in range(window, len(returns) + 1):
        if statistics.fmean(returns[i - window:i]) >= target:
            return episodes[i - 1][1]
    return None


def learning_table(runs: list[dict[str, Any]]) -> list[str]:
    ones = [r["last100"] for r in runs if r["ranks"] == 1]
    if not ones:
        return ["(no 1-rank runs: no target)"]
    target = 0.9 * statistics.median(ones)
    lines = [f"Target: {target:.1f} (90% of the median last-100 return of the 1-rank runs).", "",
             "| ranks | seeds | last-100 return | evaluation (10 episodes) | seconds to the target (reached) | "
             "run seconds |", "|---:|---|---:|---:|---:|---:|"]
    for ranks in sorted({r["ranks"] for r in runs}):
        mine = sorted((r for r in runs if r["ranks"] == ranks), key=lambda r: r["seed"])
        last = [r["last100"] for r in mine]
        evals = [statistics.fmean(r["eval_returns"]) for r in mine if r["eval_returns"]]
        reached = [s for s in (seconds_to(r["episodes"], target) for r in mine) if s is not None]
        lines.append(f"| {ranks} | {', '.join(str(r['seed']) for r in mine)} | {_mean_std(last)} | "
                     f"{_mean_std(evals) if evals else '-'} | "
                     f"{statistics.median(reached):.0f} ({len(reached)} of {len(mine)}) | "
                     f"{_median_range([r['seconds'] for r in mine], '.0f')} |" if reached else
                     f"| {ranks} | {', '.join(str(r['seed']) for r in mine)} | {_mean_std(last)} | "
                     f"{_mean_std(evals) if evals else '-'} | never (0 of {len(mine)}) | "
                     f"{_median_range([r['seconds'] for r in mine], '.0f')} |")
    return lines


def paired_lines(runs: list[dict[str, Any]], resamples: int = 10_000) -> list[str]:
    """Each count of ranks against 1, paired by seed on the last-100 return: the mean difference with a 95%
    bootstrap interval (``resamples`` resamples of the seeds, a fixed generator) and on how many seeds it was higher."""
    ones = {r["seed"]: r["last100"] for r in runs if r["ranks"] == 1}
    lines = []
    for ranks in sorted({r["ranks"] for r in runs} - {1}):
        diffs = [r["last100"] - ones[r["seed"]] for r in sorted(runs, key=lambda r: r["seed"])
                 if r["ranks"] == ranks and r["seed"] in ones]
        if not diffs:
            continue
        draw = random.Random(0)
        means = sorted(statistics.fmean(draw.choices(diffs, k=len(diffs))) for _ in range(resamples))
        low, high = means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]
        lines.append(f"{ranks} ranks against 1, paired by seed (last-100 return): mean difference "
                     f"{statistics.fmean(diffs):+.1f}, 95% bootstrap interval [{low:+.1f}, {high:+.1f}]; higher on "
                     f"{sum(d > 0 for d in diffs)} of {len(diffs)} seeds.")
    return lines


def _mean_std(values: list[float]) -> str:
    return f"{statistics.fmean(values):.1f} +- {statistics.pstdev(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rank"]:
        spec = json.loads(argv[1])
        latency_run(spec) if spec.get("kind") == "latency" else rank_run(spec)
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks distributed", description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=["cleanrl", "large"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput-iterations", type=int, default=8, help="iterations of each throughput run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--frames", type=int, default=500_000, help="frames of each learning run")
    parser.add_argument("--skip-learning", action="store_true")
    parser.add_argument("--latency-only", action="store_true", help="only the all-reduce's microseconds")
    parser.add_argument("--report-only", action="store_true",
                        help="only the learning table of the finished runs in DIR/runs.jsonl (nothing runs)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: one GPU per rank")
    parser.add_argument("--out", default="bench_results/distributed")
    args = parser.parse_args(argv)
    if 1 not in args.ranks:
        parser.error("--ranks must include 1: every count is compared with one rank")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks distributed " + shlex.join(argv)
    frames = {s: SETTINGS[s]["frames_per_batch"] * args.throughput_iterations for s in args.settings}
    say = _say
    lines = [f"# Data-parallel PPO over ranks ({datetime.date.today()})", "", f"`{command}`, torch "
             f"{_torch_version()}, {os.cpu_count()} CPUs, device {args.device}.", "", "## Throughput (HalfCheetah-v5)",
             ""]
    if args.report_only:
        runs = learning(args.ranks, args.seeds, args.frames, args.device, out / "runs.jsonl", say, launch_missing=False)
        lines += ["", f"## Learning (HalfCheetah-v5, the cleanrl setting, {args.frames:,} frames)", ""]
        lines = [line for line in lines if not line.startswith("## Throughput")] + learning_table(runs)
        lines += ["", *paired_lines(runs)]
        (out / "learning.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0
    numel = _gradient_numel()
    for ranks in (r for r in args.ranks if r > 1):
        timed = launch({"kind": "latency", "numel": numel, "calls": 500}, ranks)
        lines += [f"One all-reduce of the {numel:,} gradient numbers, {ranks} ranks: {timed['idle']:.0f} us idle, "
                  f"{timed['busy']:.0f} us between busy ranks (an update makes one every minibatch).", ""]
    if args.latency_only:
        print("\n".join(lines))
        return 0
    lines += throughput_table(throughput(args.ranks, args.settings, args.rounds, frames, args.device, say))
    if not args.skip_learning:
        runs = learning(args.ranks, args.seeds, args.frames, args.device, out / "runs.jsonl", say)
        lines += ["", f"## Learning (HalfCheetah-v5, the cleanrl setting, {args.frames:,} frames)", ""]
        lines += learning_table(runs) + ["", *paired_lines(runs)]
    (out / "distributed.md").write_text("\n".join(lines) + "\n")
    more = ["#!/bin/sh", "# Scaling per rank on a bigger machine: run from the repository root.",
            "python -m benchmarks distributed --ranks 1 2 4 8 16 --settings large cleanrl --skip-learning "
            "--out bench_results/distributed-16cpu",
            "python -m benchmarks distributed --device cuda --ranks 1 2 4 8 --settings large --skip-learning "
            "--out bench_results/distributed-gpus"]
    (out / "more_ranks.sh").write_text("\n".join(more) + "\n")
    print("\n".join(lines))
    return 0


def _gradient_numel() -> int:
    """The trained numbers of the ``cleanrl`` setting's actor and critic (one flat all-reduce a minibatch)."""
    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(config_of({"setting": "cleanrl", "seed": 1, "frames": 2048}), ranks=None)
    pipeline.collector.shutdown()
    return sum(q.numel() for q in pipeline.parameters)


def _say(line: str) -> None:
    print(line, flush=True)


def _torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    sys.exit(main())
