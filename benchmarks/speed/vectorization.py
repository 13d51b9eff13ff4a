"""Collection frames/s with the env copies stepped in this process (``env.vectorization='sync'``), each in a
process of its own (``'async'``, Gymnasium's AsyncVectorEnv with shared memory), or, for Atari with EnvPool
installed, in EnvPool's threads (``'envpool'``), side by side, rounds alternating.

    python -m benchmarks vectorization --preset atari --rounds 2
    python -m benchmarks vectorization --preset atari --rounds 2 --ways sync envpool

Prints one line per measurement and the median of each (the policy's forward counts: on a CPU a CNN policy is
most of an Atari step).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import time

import torch

from ppo_td import get_preset
from ppo_td.training import build_pipeline


def rate(preset: str, vectorization: str, batches: int, env_id: str | None) -> float:
    config = get_preset(preset)
    env = dataclasses.replace(config.env, vectorization=vectorization, **({"env_id": env_id} if env_id else {}))
    config = dataclasses.replace(config, env=env, total_frames=config.frames_per_batch * (batches + 1))
    p = build_pipeline(config)
    try:
        batches_ = iter(p.collector)
        next(batches_)  # workers started, first batch
        start, frames = time.perf_counter(), 0
        for batch in batches_:
            frames += batch.numel()
        return frames / (time.perf_counter() - start)
    finally:
        p.collector.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="atari")
    parser.add_argument("--env-id", default=None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--ways", nargs="+", choices=["sync", "async", "envpool"], default=["sync", "async"],
                        help="the vectorizations to compare (the first is the baseline of the ratios)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    rates: dict[str, list[float]] = {how: [] for how in args.ways}
    for r in range(args.rounds):
        for how in (args.ways if r % 2 == 0 else list(reversed(args.ways))):
            rates[how].append(rate(args.preset, how, args.batches, args.env_id))
            print(f"round {r}: {how} {rates[how][-1]:,.0f} frames/s", flush=True)
    medians = {how: statistics.median(v) for how, v in rates.items()}
    base = args.ways[0]
    print(f"{args.preset}: " + ", ".join(f"{how} {m:,.0f}" for how, m in medians.items()) + " frames/s ("
          + ", ".join(f"{how}/{base} {m / medians[base]:.2f}x" for how, m in medians.items() if how != base)
          + f"), {torch.get_num_threads()} torch thread, {len(__import__('os').sched_getaffinity(0))} cores")

if __name__ == "__main__":
    main()
