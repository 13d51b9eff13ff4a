"""Two ways of running ppo_td, side by side: whole training runs, each in its own process.

``--compare speedups``: ``ppo_td.speedups`` on vs off (``PPO_TD_NO_SPEEDUPS=1``).
``--compare step-loop``: the lean step loop (``collector.step_loop='lean'``) vs TorchRL's
Collector (``'torchrl'``), the same batches either way.
``--compare lean-loss``: the lean loss forward (``loss.lean_forward=True``) vs ``ClipPPOLoss.forward``.
``--compare lean``: both lean paths (the defaults) vs neither (TorchRL's Collector and ClipPPOLoss.forward).

For each preset and seed, one run of each (order alternating by seed); the ratio is
taken pairwise.

    python -m benchmarks.speedups --seeds 1 2 3 [--compare step-loop]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

RUNS = {  # preset -> frames (None: the preset's budget)
    "cartpole": None,
    "cleanrl": 20_480,
    "halfcheetah": 10_240,
}


def one(preset: str, seed: int, frames: int | None, on: bool, compare: str = "speedups") -> dict:
    spec = {"library": "ppo_td", "preset": preset, "seed": seed, "total_frames": frames, "eval_episodes": 1}
    env = dict(os.environ)
    if compare == "speedups":
        env["PPO_TD_NO_SPEEDUPS"] = "0" if on else "1"
    if compare in ("step-loop", "lean"):
        spec["step_loop"] = "lean" if on else "torchrl"
    if compare in ("lean-loss", "lean"):
        spec["lean_forward"] = on
    proc = subprocess.run([sys.executable, "-m", "benchmarks.worker", json.dumps(spec)], capture_output=True,
                          text=True, check=False, env=env)
    if proc.returncode:
        raise RuntimeError(f"{spec} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"preset": preset, "seed": seed, "on": on, "frames": out["frames"],
            "train_seconds": out["train_seconds"], "collect_seconds": out["collect_seconds"],
            "update_seconds": out["update_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--compare", choices=["speedups", "step-loop", "lean-loss", "lean"], default="speedups")
    parser.add_argument("--out", default=None, help="default: bench_results/<compare>.md")
    args = parser.parse_args()
    args.out = args.out or f"bench_results/{args.compare}.md"
    rows = []
    for preset, frames in RUNS.items():
        for i, seed in enumerate(args.seeds):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                rows.append(one(preset, seed, frames, on, args.compare))
                print(json.dumps(rows[-1]), flush=True)
    meaning = {"speedups": "off: PPO_TD_NO_SPEEDUPS=1; on: ppo_td.speedups applied",
               "step-loop": "off: collector.step_loop='torchrl' (TorchRL's Collector); on: 'lean' (LeanCollector)",
               "lean-loss": "off: loss.lean_forward=False (ClipPPOLoss.forward); on: True (the lean forward)",
               "lean": "off: TorchRL's Collector and ClipPPOLoss.forward; on: LeanCollector and the lean loss forward"}
    lines = [f"Compared: {meaning[args.compare]}. Seeds {args.seeds}.", "",
             "| preset | frames | train s, off | train s, on | speed-up (pairwise median, min-max) | "
             "collect s off -> on | update s off -> on |", "|---|---|---|---|---|---|---|"]
    for preset in RUNS:
        pairs = [(next(r for r in rows if r["preset"] == preset and r["seed"] == s and not r["on"]),
                  next(r for r in rows if r["preset"] == preset and r["seed"] == s and r["on"]))
                 for s in args.seeds]
        ratios = [off["train_seconds"] / on["train_seconds"] for off, on in pairs]

        def med(key, which, pairs=pairs):
            return statistics.median(p[which][key] for p in pairs)

        lines.append(f"| {preset} | {pairs[0][0]['frames']:,} | {med('train_seconds', 0):.2f} | "
                     f"{med('train_seconds', 1):.2f} | {statistics.median(ratios):.2f}x "
                     f"({min(ratios):.2f}-{max(ratios):.2f}) | {med('collect_seconds', 0):.2f} -> "
                     f"{med('collect_seconds', 1):.2f} | {med('update_seconds', 0):.2f} -> "
                     f"{med('update_seconds', 1):.2f} |")
    table = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
