"""The scaling suite (``python -m benchmarks scaling [--seeds ...] [--out DIR]``): frames/s and peak RSS of ppo_td and
SB3 against the number of env copies in one process (1, 4, 16, 64 CartPole copies at CleanRL's settings; 1 and 8
HalfCheetah copies), a table and a plot (``env_scaling.png``). Each run is a ``benchmarks.common.worker`` process;
the options, the header and the files are the harness's (``benchmarks/common/harness.py``)."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks.common import run_worker
from benchmarks.common.harness import log_run, median_range, run


def env_scaling(seeds: list[int], out: Path) -> list[str]:
    """Frames/s and peak RSS of both libraries against the number of env copies (one process, one thread)."""
    settings = [("cartpole", "cleanrl", n, True, 25_600) for n in (1, 4, 16, 64)]
    settings += [("halfcheetah", "halfcheetah", n, False, 10_240) for n in (1, 8)]
    rows: dict[tuple, dict[str, list[dict]]] = {}
    for seed in seeds:
        for task, preset, n, keep, frames in settings:
            for library in ("ppo_td", "sb3"):
                spec = dict(library=library, preset=preset, seed=seed, num_envs=n, keep_steps=keep,
                            total_frames=frames, eval_episodes=0)
                result = run_worker(spec)
                log_run(out, "env_scaling", f"{library} {task} {n}", result)
                rows.setdefault((task, n), {}).setdefault(library, []).append(result)
    lines = ["| task | env copies | ppo_td frames/s | SB3 frames/s | ppo_td / SB3 | ppo_td peak RSS MB | "
             "SB3 peak RSS MB |", "|---|---|---|---|---|---|---|"]
    for (task, n), libs in rows.items():
        ours, theirs = libs["ppo_td"], libs["sb3"]
        ratio = [t["train_seconds"] / o["train_seconds"] for o, t in zip(ours, theirs, strict=True)]
        lines.append(f"| {task} | {n} | {median_range([r['frames'] / r['train_seconds'] for r in ours], ',.0f')} | "
                     f"{median_range([r['frames'] / r['train_seconds'] for r in theirs], ',.0f')} | "
                     f"{median_range(ratio, '.2f')} | {median_range([r['peak_rss_mb'] for r in ours], '.0f')} | "
                     f"{median_range([r['peak_rss_mb'] for r in theirs], '.0f')} |")
    _plot_scaling(rows, out / "env_scaling.png")
    lines.append("\nCartPole keeps 128 steps per copy (the batch grows with the copies); HalfCheetah keeps its "
                 "2,048-frame batch. Plot: env_scaling.png.")
    return lines


def _plot_scaling(rows: dict[tuple, dict[str, list[dict]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, task in zip(axes, ("cartpole", "halfcheetah"), strict=True):
        for library, color in (("ppo_td", "C0"), ("sb3", "C1")):
            points = sorted((n, statistics.median(r["frames"] / r["train_seconds"] for r in libs[library]))
                            for (t, n), libs in rows.items() if t == task)
            ax.plot([n for n, _ in points], [v for _, v in points], "o-", color=color, label=library)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("env copies")
        ax.set_ylabel("frames/s")
        ax.set_title(task)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)



def sections(args: argparse.Namespace, out: Path) -> list[str]:
    """The scaling suite's section."""
    return ["## Frames/s against env copies", "", *env_scaling(args.seeds, out), ""]


def main(argv: list[str]) -> None:
    """``python -m benchmarks scaling ...`` (``argv``: all after ``python -m benchmarks``)."""
    run(argv, {"scaling": sections})
