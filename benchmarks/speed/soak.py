"""Memory over a long run: RSS of a CartPole training sampled every iteration, its slope after a warm-up.

    python -m benchmarks soak [--minutes 5] [--warmup 0.2] [--preset cartpole]

Trains the preset with an endless budget (``total_frames`` large, no evaluation) in this process for
``--minutes``, reads the resident set size from /proc/self/statm after every iteration, and fits a
least-squares line to the samples after the first ``--warmup`` fraction of the run. Prints the slope in
KB per iteration and MB per hour, and the slope of each quarter of the fitted part: a leak keeps its slope
from quarter to quarter, an allocator settling in does not. A run of days needs it flat within noise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import tempfile
import time

import torch

from ppo_td.presets import get_preset
from ppo_td.training import StopTraining, train

PAGE_KB = os.sysconf("SC_PAGE_SIZE") / 1024


def rss_kb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_KB


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the run left out of the fit")
    parser.add_argument("--preset", default="cartpole")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    base = get_preset(args.preset)
    config = dataclasses.replace(base, total_frames=base.frames_per_batch * 10_000_000, eval_episodes=0)
    # the samples go to a file as they are taken: a list of them in this process would grow by ~170 bytes per
    # iteration itself (a tuple of three numbers), which is what a first soak measured
    log = tempfile.TemporaryFile("w+")
    start = time.perf_counter()

    def sample(metrics, pipeline):
        now = time.perf_counter() - start
        log.write(f"{now} {metrics['iteration']} {rss_kb()}\n")
        if now > args.minutes * 60:
            raise StopTraining

    train(config, callbacks=[sample])
    log.seek(0)
    samples = [(float(t), int(i), float(r)) for t, i, r in (line.split() for line in log)]
    kept = [s for s in samples if s[0] >= args.warmup * samples[-1][0]]
    per_iteration = slope([s[1] for s in kept], [s[2] for s in kept])
    per_second = slope([s[0] for s in kept], [s[2] for s in kept])
    row = {"preset": args.preset, "minutes": round(samples[-1][0] / 60, 2), "iterations": samples[-1][1],
           "rss_start_mb": round(kept[0][2] / 1024, 1), "rss_end_mb": round(kept[-1][2] / 1024, 1),
           "kb_per_iteration": round(per_iteration, 3), "mb_per_hour": round(per_second * 3600 / 1024, 2)}
    quarters = [kept[i * len(kept) // 4:(i + 1) * len(kept) // 4] for i in range(4)]
    row["quarters"] = [{"iterations": f"{q[0][1]}-{q[-1][1]}", "rss_mb": f"{q[0][2] / 1024:.1f}-{q[-1][2] / 1024:.1f}",
                        "kb_per_iteration": round(slope([s[1] for s in q], [s[2] for s in q]), 3)}
                       for q in quarters if len(q) > 2]
    print(json.dumps(row))
    print("\n| preset | minutes | iterations | RSS after warm-up -> end (MB) | slope KB/iteration | MB/hour |")
    print("|---|---|---|---|---|---|")
    print(f"| {row['preset']} | {row['minutes']} | {row['iterations']:,} | {row['rss_start_mb']} -> "
          f"{row['rss_end_mb']} | {row['kb_per_iteration']} | {row['mb_per_hour']} |")
    print("\n| quarter of the fit | iterations | RSS (MB) | slope KB/iteration |\n|---|---|---|---|")
    for i, q in enumerate(row["quarters"], 1):
        print(f"| {i} | {q['iterations']} | {q['rss_mb']} | {q['kb_per_iteration']} |")


if __name__ == "__main__":
    main()
