"""Seconds per update with ``compile=True`` against eager, in one process, runs alternating: the first update (it
waits for torch.compile) and the median of the updates from the third on (the steady state).

    python -m benchmarks compile --preset cartpole --frames 20480
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

import torch

from ppo_td import get_preset
from ppo_td.training import train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--frames", type=int, default=20_480)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steady: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for compiled in (False, True):
            config = get_preset(args.preset)
            result = train(dataclasses.replace(config, total_frames=args.frames, eval_episodes=0, compile=compiled))
            updates = [h["update_seconds"] for h in result.history]
            steady[compiled].append(statistics.median(updates[2:]))
            print(f"{args.preset} {'compiled' if compiled else 'eager'}: first update {updates[0]:.2f} s, then "
                  f"{steady[compiled][-1] * 1e3:.1f} ms an update (median)", flush=True)
    eager, compiled = statistics.median(steady[False]), statistics.median(steady[True])
    print(f"{args.preset}: steady update {eager * 1e3:.1f} ms eager, {compiled * 1e3:.1f} ms compiled "
          f"({eager / compiled:.2f}x)")


if __name__ == "__main__":
    main()
