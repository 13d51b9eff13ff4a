"""Masked vs unmasked PPO on ppo_td's trading env, same preset, budget and seeds.

Masked: ``ppo_td/Trading-v0`` (``examples/trading.py``) (the policy reads the mask). Unmasked baseline:
``ppo_td/TradingPenalty-v0`` (same dynamics; an invalid action costs 1 and does nothing).
Reports the mean return of the last 50 training episodes and the deterministic
evaluation (16 episodes) per seed, and the medians.

    python -m benchmarks masking --seeds 1 2 3
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

VARIANTS = {"masked": "examples.trading:ppo_td/Trading-v0",
            "unmasked (penalty)": "examples.trading:ppo_td/TradingPenalty-v0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    base = get_preset("trading")
    rows = []
    for seed in args.seeds:
        for name, env_id in VARIANTS.items():
            config = dataclasses.replace(base, seed=seed, eval_episodes=16,
                                         env=dataclasses.replace(base.env, env_id=env_id))
            result = train(config)
            returns = [e["return"] for e in result.episodes]
            row = {"variant": name, "seed": seed, "frames": result.history[-1]["frames"],
                   "last50": statistics.fmean(returns[-50:]), "eval": statistics.fmean(result.eval_returns)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| variant | frames | last-50 training return, median (per seed) | evaluation, median (per seed) |")
    print("|---|---|---|---|")
    for name in VARIANTS:
        mine = [r for r in rows if r["variant"] == name]
        cells = [f"{statistics.median(r[k] for r in mine):.1f} ({', '.join(f'{r[k]:.1f}' for r in mine)})"
                 for k in ("last50", "eval")]
        print(f"| {name} | {mine[0]['frames']:,} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
