"""Where collection runs: in-process vs 2 local worker processes vs 2 Ray workers, on HalfCheetah-v5.

The halfcheetah preset (CleanRL's MuJoCo settings: 2048 frames per batch, 10 epochs x 32
minibatches) with 2 env copies, so every setting steps the same copies and collects the
same ``[2, 1024]`` batches; the preset's own 1-copy in-process run is the reference.
Each run is its own process; settings alternate round by round so machine noise hits
all of them. Reported per setting (medians over rounds): set-up time (build to first
batch), collection steps/s, update seconds per iteration and total steps/s, all over
the iterations after the first.

    python -m benchmarks scaling_workers --iterations 6 --rounds 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

SETTINGS = {
    "in-process, 1 copy (preset)": dict(backend="inprocess", num_envs=1),
    "in-process, 2 copies": dict(backend="inprocess", num_envs=2),
    "2 local worker processes": dict(backend="process", num_envs=2),
    "2 Ray workers (local Ray)": dict(backend="ray", num_envs=2),
}


def one_run(backend: str, num_envs: int, iterations: int, seed: int) -> dict:
    """Train ``iterations`` iterations of the halfcheetah preset with the given collection; timings."""
    from ppo_td.config import CollectorConfig
    from ppo_td.presets import get_preset
    from ppo_td.training import build_pipeline, run

    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    config = get_preset("halfcheetah")
    config = dataclasses.replace(
        config, seed=seed, eval_episodes=0, total_frames=iterations * config.frames_per_batch,
        env=dataclasses.replace(config.env, num_envs=num_envs),
        collector=CollectorConfig(backend, num_workers=None if backend == "inprocess" else 2))
    started = time.perf_counter()
    pipeline = build_pipeline(config)
    first: list[float] = []
    result = run(pipeline, callbacks=[lambda m, p: first or first.append(time.perf_counter() - started)])
    later = result.history[1:]
    frames = sum(config.frames_per_batch for _ in later)
    seconds = sum(m["collect_seconds"] + m["update_seconds"] for m in later)
    return {"backend": backend, "num_envs": num_envs, "seed": seed, "iterations": len(result.history),
            "setup_and_first_iteration_s": first[0],
            "collect_sps": frames / sum(m["collect_seconds"] for m in later),
            "update_s": statistics.fmean(m["update_seconds"] for m in later),
            "total_sps": frames / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="bench_results/scaling")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one setting in this process
    args = parser.parse_args()
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(one_run(**spec)), flush=True)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for round_ in range(args.rounds):
        order = list(SETTINGS.items())
        order = order if round_ % 2 == 0 else order[::-1]
        for name, setting in order:
            spec = dict(setting, iterations=args.iterations, seed=1)
            proc = subprocess.run([sys.executable, "-m", "benchmarks.scaling.workers", "--one", json.dumps(spec)],
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                raise RuntimeError(f"{name} failed:\n{proc.stderr[-3000:]}")
            row = dict(json.loads(proc.stdout.strip().splitlines()[-1]), setting=name, round=round_)
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = _table(rows, args)
    (out / "results.md").write_text(table)
    print(table)


def _table(rows: list[dict], args: argparse.Namespace) -> str:
    base = statistics.median(r["total_sps"] for r in rows if r["setting"] == "in-process, 2 copies")
    lines = [
        f"HalfCheetah-v5, halfcheetah preset (2048 frames/batch, 10 x 32 minibatches), {args.iterations} iterations, "
        f"medians of {args.rounds} rounds; {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}. Timings exclude the first iteration.",
        "",
        "| collection | set-up + 1st iteration | collect steps/s | update s/iter | total steps/s | vs in-process |",
        "|---|---|---|---|---|---|",
    ]
    for name in SETTINGS:
        mine = [r for r in rows if r["setting"] == name]
        med = {k: statistics.median(r[k] for r in mine) for k in
               ("setup_and_first_iteration_s", "collect_sps", "update_s", "total_sps")}
        lines.append(f"| {name} | {med['setup_and_first_iteration_s']:.1f} s | {med['collect_sps']:,.0f} | "
                     f"{med['update_s']:.2f} | {med['total_sps']:,.0f} | {med['total_sps'] / base:.2f}x |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
