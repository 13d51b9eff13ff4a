"""Frames and seconds for a preset to solve CartPole-v1, over several seeds, one run at a time.

Solved: the mean return of the last 20 training episodes reaches 475; the
deterministic evaluation after training is reported beside it. Prints one JSON
line per seed and a Markdown summary (median and min-max).

    python -m benchmarks.cartpole_solve --preset cartpole --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import time

import torch

from ppo_td.presets import get_preset
from ppo_td.trainer import TrainResult, train

WINDOW, THRESHOLD = 20, 475.0


def time_to_solve(result: TrainResult) -> tuple[int, float] | None:
    """(frames, training seconds) at the iteration where the 20-episode mean first reached 475."""
    returns = [e["return"] for e in result.episodes]
    for i in range(WINDOW, len(returns) + 1):
        if sum(returns[i - WINDOW:i]) / WINDOW >= THRESHOLD:
            frames = result.episodes[i - 1]["frames"]
            seconds = next(m["time"] for m in result.history if m["frames"] == frames)
            return frames, seconds
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    rows = []
    for seed in args.seeds:
        config = dataclasses.replace(get_preset(args.preset), seed=seed)
        started = time.perf_counter()
        result = train(config)
        solved = time_to_solve(result)
        row = {
            "preset": args.preset, "seed": seed,
            "solve_frames": solved[0] if solved else None, "solve_seconds": solved[1] if solved else None,
            "train_seconds": result.history[-1]["time"], "total_seconds": time.perf_counter() - started,
            "sps": result.history[-1]["sps"], "eval_mean": statistics.fmean(result.eval_returns),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| preset | seeds | solved | frames to solve | seconds to solve | steps/s | eval mean |")
    print("|---|---|---|---|---|---|---|")
    solved_rows = [r for r in rows if r["solve_frames"] is not None]

    def spread(key: str, fmt: str) -> str:
        values = [r[key] for r in solved_rows] if key.startswith("solve") else [r[key] for r in rows]
        if not values:
            return "-"
        return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"

    print(f"| {args.preset} | {args.seeds} | {len(solved_rows)}/{len(rows)} | {spread('solve_frames', '.0f')} | "
          f"{spread('solve_seconds', '.1f')} | {spread('sps', '.0f')} | {spread('eval_mean', '.1f')} |")


if __name__ == "__main__":
    main()
