"""The recurrent suite (``python -m benchmarks recurrent [--seeds ...] [--presets ...] [--out DIR]``): ppo_td's
recurrent PPO beside sb3-contrib's RecurrentPPO on CartPole and Pendulum without velocities (the ``cartpole-novel``
and ``pendulum-novel`` presets): frames/s, frames to solve, returns. Each run is a ``benchmarks.common.worker``
process; the options, the header and the files are the harness's (``benchmarks/common/harness.py``)."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks.common import run_worker
from benchmarks.common.harness import WINDOW, log_run, median_range, run, time_to_solve

RECURRENT_TASKS = {"cartpole-novel": ("CartPole-v1 without velocities", True),
                   "pendulum-novel": ("Pendulum-v1 without angular velocity", False)}


def recurrent(seeds: list[int], out: Path, presets: list[str] | None = None) -> list[str]:
    """ppo_td's recurrent PPO and sb3-contrib's RecurrentPPO, the same tasks and settings (the ``cartpole-novel`` and
    ``pendulum-novel`` presets, RL Zoo's tuned ppo_lstm settings): frames/s, frames to solve, final returns."""
    lines = []
    for preset in presets or list(RECURRENT_TASKS):
        task, solve = RECURRENT_TASKS[preset]
        pairs = []
        for seed in seeds:
            pair = {}
            for library in ("ppo_td", "sb3"):
                result = run_worker(dict(library=library, preset=preset, seed=seed, eval_episodes=10))
                result["solve"] = time_to_solve(result) if solve else None
                pair[library] = result
                log_run(out, f"recurrent_{preset}", library, result)
            pairs.append(pair)
        lines += [f"### {task} (`{preset}` preset, {pairs[0]['ppo_td']['frames']:,} frames)", "",
                  "| library | total frames/s | collection frames/s | update s per 1k frames | deterministic eval "
                  "| mean of last 20 training episodes | solved (last 20 >= 475) at frames |",
                  "|---|---|---|---|---|---|---|"]
        for library, name in (("ppo_td", "ppo_td"), ("sb3", "sb3-contrib RecurrentPPO")):
            rs = [p[library] for p in pairs]
            last = [statistics.fmean(e[2] for e in r["episodes"][-WINDOW:]) for r in rs]
            solved = [r["solve"][0] for r in rs if r["solve"]]
            lines.append(f"| {name} | {median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                         f"{median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                         f"{median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                         f"{median_range([r['eval_mean'] for r in rs], '.1f')} | {median_range(last, '.1f')} | "
                         + (f"{len(solved)}/{len(rs)}: {median_range(solved, ',.0f')} |" if solve else "- |"))
        ratios = {what: median_range([p["sb3"][what] / p["ppo_td"][what] for p in pairs], ".2f")
                  for what in ("train_seconds", "collect_seconds", "update_seconds")}
        lines += ["", f"ppo_td / sb3-contrib, pairwise per seed: total {ratios['train_seconds']}, collection "
                  f"{ratios['collect_seconds']}, update {ratios['update_seconds']} (speed ratios; above 1: ppo_td "
                  "faster).", ""]
    return lines


def sections(args: argparse.Namespace, out: Path) -> list[str]:
    """The recurrent suite's section."""
    return ["## Recurrent PPO: ppo_td vs sb3-contrib's RecurrentPPO", "", *recurrent(args.seeds, out, args.presets), ""]


def main(argv: list[str]) -> None:
    """``python -m benchmarks recurrent ...`` (``argv``: all after ``python -m benchmarks``)."""
    run(argv, {"recurrent": sections})
