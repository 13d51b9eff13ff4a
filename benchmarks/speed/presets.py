"""Final score of presets over seeds: mean of the last 20 training episodes and the deterministic evaluation.

    python -m benchmarks presets --presets pendulum trading --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics

import torch

from ppo_td.presets import get_preset
from ppo_td.training import train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["pendulum"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    rows = []
    for name in args.presets:
        for seed in args.seeds:
            config = dataclasses.replace(get_preset(name), seed=seed, compile=False)  # eager, as stored
            result = train(config)
            row = {"preset": name, "env": config.env.env_id, "seed": seed, "frames": result.history[-1]["frames"],
                   "last20": statistics.fmean(e["return"] for e in result.episodes[-20:]),
                   "eval": statistics.fmean(result.eval_returns), "train_seconds": result.history[-1]["time"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| preset | env | frames | seed | last-20 training return | evaluation (10 episodes) | train seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['preset']} | {r['env']} | {r['frames']:,} | {r['seed']} | {r['last20']:.1f} | {r['eval']:.1f} | "
              f"{r['train_seconds']:.1f} |")

if __name__ == "__main__":
    main()
