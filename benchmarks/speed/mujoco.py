"""MuJoCo presets at their full budget (1M frames), reported as CleanRL reports PPO.

The score is the mean return of the last 100 training episodes. Prints one JSON line
per run (and appends it to --out), then a Markdown table beside CleanRL's published
PPO numbers (ppo_continuous_action.py, v4 tasks, mean +- std over seeds).

    python -m benchmarks mujoco_full --presets halfcheetah hopper --seeds 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import time
from pathlib import Path

import torch

from ppo_td.presets import get_preset
from ppo_td.training import train

CLEANRL_PUBLISHED = {"halfcheetah": "1443 +- 46", "hopper": "2383 +- 272"}  # CleanRL docs, PPO, v4 tasks


def run_one(preset: str, seed: int, total_frames: int | None) -> dict:
    config = dataclasses.replace(get_preset(preset), seed=seed, eval_episodes=10, compile=False)  # (as stored)
    if total_frames:
        config = dataclasses.replace(config, total_frames=total_frames)
    started = time.perf_counter()
    result = train(config)
    returns = [e["return"] for e in result.episodes]
    return {
        "preset": preset, "env": config.env.env_id, "seed": seed, "frames": result.history[-1]["frames"],
        "last100_mean": statistics.fmean(returns[-100:]), "episodes": len(returns),
        "eval_mean": statistics.fmean(result.eval_returns), "train_seconds": result.history[-1]["time"],
        "total_seconds": time.perf_counter() - started, "sps": result.history[-1]["sps"],
        "curve": [(e["frames"], e["return"]) for e in result.episodes[::10]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["halfcheetah", "hopper"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--total-frames", type=int, default=None, help="override the budget (smoke runs)")
    parser.add_argument("--out", default="bench_results/mujoco.jsonl")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for preset in args.presets:
        for seed in args.seeds:
            row = run_one(preset, seed, args.total_frames)
            rows.append(row)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
    print("\n| task | seeds | frames | ppo_td last-100 mean | CleanRL PPO (published) | eval mean | train time |")
    print("|---|---|---|---|---|---|---|")
    for preset in args.presets:
        mine = [r for r in rows if r["preset"] == preset]
        scores = [r["last100_mean"] for r in mine]
        spread = f" +- {statistics.pstdev(scores):.0f}" if len(scores) > 1 else ""
        print(f"| {mine[0]['env']} | {', '.join(str(r['seed']) for r in mine)} | {mine[0]['frames']:,} | "
              f"{statistics.fmean(scores):.0f}{spread} | {CLEANRL_PUBLISHED.get(preset, '-')} | "
              f"{statistics.fmean(r['eval_mean'] for r in mine):.0f} | "
              f"{statistics.fmean(r['train_seconds'] for r in mine) / 60:.1f} min |")


if __name__ == "__main__":
    main()
