"""Cost of the FiniteCheck guard, side by side in one run: env steps/s and whole training runs.

    python -m benchmarks guard_overhead --repeats 3
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import time

import torch

from ppo_td.envs import make_env
from ppo_td.presets import get_preset
from ppo_td.training import train


def rollout_sps(check: bool, steps: int = 2000) -> float:
    config = dataclasses.replace(get_preset("cartpole").env, check_finite=check)
    env = make_env(config, seed=0)
    env.rollout(50, break_when_any_done=False)  # warm-up
    start = time.perf_counter()
    env.rollout(steps, break_when_any_done=False)
    seconds = time.perf_counter() - start
    env.close()
    return steps * config.num_envs / seconds


def train_seconds(check: bool) -> float:
    base = get_preset("cartpole")
    config = dataclasses.replace(base, env=dataclasses.replace(base.env, check_finite=check), eval_episodes=0)
    return train(config).history[-1]["time"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    results = {"rollout_on": [], "rollout_off": [], "train_on": [], "train_off": []}
    for _ in range(args.repeats):  # alternate on/off so drifts in machine load hit both
        results["rollout_on"].append(rollout_sps(True))
        results["rollout_off"].append(rollout_sps(False))
        results["train_on"].append(train_seconds(True))
        results["train_off"].append(train_seconds(False))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(json.dumps(med))
    print("\n| measure | guard on | guard off | on / off |")
    print("|---|---|---|---|")
    copies = get_preset("cartpole").env.num_envs
    print(f"| random-policy env steps/s ({copies} CartPoles) | {med['rollout_on']:.0f} | {med['rollout_off']:.0f} | "
          f"{med['rollout_on'] / med['rollout_off']:.3f} |")
    print(f"| cartpole preset training seconds | {med['train_on']:.2f} | {med['train_off']:.2f} | "
          f"{med['train_on'] / med['train_off']:.3f} |")


if __name__ == "__main__":
    main()
