"""The same run from ``ppo-td train`` and from the Python API, side by side: frames/s of each and their ratio.

Each run is a fresh process left on torch's default threads (nothing set by the harness: what a user's script
gets), on the same preset and seed, both writing a run folder; frames/s is read from the same place for both (the
last row of ``metrics.csv``: frames over training seconds). The entry points alternate seed by seed, beside
``--busy`` CPU-bound processes (a shared machine), and the ratio is taken pairwise within a seed.

    python -m benchmarks entry_points --seeds 1 2 3 --busy 1

Ways (``--ways``): ``cli`` (``ppo-td train --preset P``), ``python`` (``ppo_td.train(get_preset(P), run_dir=...)``),
``pipeline`` (``build_pipeline`` + ``run``, the README's composition; no run folder, frames/s from its history),
``make_vec`` (``ppo_td.train(config, env=gym.make_vec(ENV, N))``, the object a Gymnasium user passes).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CONFIG = "c = dataclasses.replace(get_preset({preset!r}), seed={seed}, total_frames={frames}, eval_episodes=0)\n"
_PY = {
    "python": ("import ppo_td\nfrom ppo_td import get_preset\nimport dataclasses\n"
               + _CONFIG + "ppo_td.train(c, run_dir={run_dir!r})\n"),
    "pipeline": ("import json, dataclasses\nfrom ppo_td import get_preset\n"
                 "from ppo_td.training import build_pipeline, run\n"
                 + _CONFIG + "h = run(build_pipeline(c)).history[-1]\nprint(json.dumps(h['frames'] / h['time']))\n"),
    "make_vec": ("import ppo_td, dataclasses\nimport gymnasium as gym\nfrom ppo_td import get_preset\n"
                 + _CONFIG + "env = gym.make_vec(c.env.env_id, c.env.num_envs, vectorization_mode='sync')\n"
                 "ppo_td.train(c, env=env, run_dir={run_dir!r})\n"),
}


def _spin() -> None:
    while True:
        pass


def one_run(way: str, preset: str, seed: int, frames: int, folder: Path) -> float:
    """Frames/s of one run of ``way`` in a fresh process (the training seconds only, as both entry points count)."""
    run_dir = folder / f"{way}-{seed}"
    if way == "cli":
        cmd = [sys.executable, "-m", "ppo_td.cli", "train", "--preset", preset, "--seed", str(seed), "--total-frames",
               str(frames), "--eval-episodes", "0", "--no-progress", "--run-dir", str(run_dir)]
    else:
        cmd = [sys.executable, "-c", _PY[way].format(preset=preset, seed=seed, frames=frames, run_dir=str(run_dir))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode:
        raise RuntimeError(f"{way} seed {seed} failed:\n{proc.stderr[-3000:]}")
    if way == "pipeline":
        return float(proc.stdout.strip().splitlines()[-1])
    with open(run_dir / "metrics.csv") as f:
        last = list(csv.DictReader(f))[-1]
    return float(last["frames"]) / float(last["time"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks entry_points", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--frames", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--ways", nargs="+", choices=["cli", *_PY], default=["cli", "python", "pipeline", "make_vec"])
    parser.add_argument("--busy", type=int, default=1, help="CPU-bound processes beside (a shared machine)")
    parser.add_argument("--out", default=None, help="a JSON file for the results (default: print only)")
    args = parser.parse_args()
    if args.ways[0] != "cli":
        parser.error("--ways: start with cli (the others are compared with it)")
    busy = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    sps: dict[str, list[float]] = {w: [] for w in args.ways}
    try:
        with tempfile.TemporaryDirectory(prefix="ppo_td-entry-") as tmp:
            for seed in args.seeds:
                for way in args.ways if seed % 2 else list(reversed(args.ways)):  # alternating: order bias cancels
                    sps[way].append(one_run(way, args.preset, seed, args.frames, Path(tmp)))
                    print(f"seed {seed} {way}: {sps[way][-1]:,.0f} frames/s", flush=True)
    finally:
        for p in busy:
            p.terminate()
    rows = [f"{args.preset}, {args.frames:,} frames, {args.busy} busy process(es) beside, seeds "
            f"{' '.join(map(str, args.seeds))}; frames/s median (min-max); ratio to cli pairwise per seed", "",
            "| entry point | frames/s | / cli |", "|---|---|---|"]
    for way in args.ways:
        ratios = [a / b for a, b in zip(sps[way], sps["cli"], strict=True)]
        rows.append(f"| {way} | {statistics.median(sps[way]):,.0f} ({min(sps[way]):,.0f}-{max(sps[way]):,.0f}) | "
                    f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
    print("\n".join(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "sps": sps, "time": time.time()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
