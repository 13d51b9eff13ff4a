"""ppo_td's fast paths on vs off, side by side: whole training runs, each in its own process.

``--compare step-loop``: the fast collector (``collector.step_loop='fast'``) vs TorchRL's
Collector (``'torchrl'``), the same batches either way.
``--compare fast-loss``: the fast loss forward (``loss.fast_forward=True``) vs ``ClipPPOLoss.forward``.
``--compare fast``: both fast paths (the defaults) vs neither (TorchRL's Collector and ClipPPOLoss.forward).
``--compare compile``: ``compile=True`` (the loss and the torch policy step through torch.compile) vs eager.

For each preset and seed, one run of each (order alternating by seed); the ratio is
taken pairwise.

    python -m benchmarks fast_paths --seeds 1 2 3 [--compare step-loop] [--presets mountaincar-continuous]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.common import run_worker

RUNS = {  # preset -> frames (None: the preset's budget)
    "cartpole": None,
    "cleanrl": 20_480,
    "halfcheetah": 10_240,
    "mountaincar-continuous": None,  # gSDE, one env copy, 8-frame batches: 20k frames
}
DEFAULT_RUNS = ["cartpole", "cleanrl", "halfcheetah"]


def one(preset: str, seed: int, frames: int | None, on: bool, compare: str = "fast") -> dict:
    spec = {"library": "ppo_td", "preset": preset, "seed": seed, "total_frames": frames, "eval_episodes": 1}
    if compare in ("step-loop", "fast"):
        spec["step_loop"] = "fast" if on else "torchrl"
    if compare in ("fast-loss", "fast"):
        spec["fast_forward"] = on
    if compare == "compile":
        spec["compile"] = on
    out = run_worker(spec)
    return {"preset": preset, "seed": seed, "on": on, "frames": out["frames"],
            "train_seconds": out["train_seconds"], "collect_seconds": out["collect_seconds"],
            "update_seconds": out["update_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--compare", choices=["step-loop", "fast-loss", "fast", "compile"], default="fast")
    parser.add_argument("--presets", nargs="+", choices=list(RUNS), default=DEFAULT_RUNS,
                        help=f"default: {' '.join(DEFAULT_RUNS)}")
    parser.add_argument("--out", default=None, help="default: bench_results/<compare>.md")
    args = parser.parse_args()
    args.out = args.out or f"bench_results/{args.compare}.md"
    rows = []
    for preset in args.presets:
        frames = RUNS[preset]
        for i, seed in enumerate(args.seeds):
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                rows.append(one(preset, seed, frames, on, args.compare))
                print(json.dumps(rows[-1]), flush=True)
    meaning = {"step-loop": "off: collector.step_loop='torchrl' (TorchRL's Collector); on: 'fast' (FastCollector)",
               "fast-loss": "off: loss.fast_forward=False (ClipPPOLoss.forward); on: True (FastLoss)",
               "fast": "off: TorchRL's Collector and ClipPPOLoss.forward; on: FastCollector and FastLoss",
               "compile": "off: eager; on: compile=True (torch.compile of the loss and the torch policy step)"}
    lines = [f"Compared: {meaning[args.compare]}. Seeds {args.seeds}.", "",
             "| preset | frames | train s, off | train s, on | speed-up (pairwise median, min-max) | "
             "collect s off -> on | update s off -> on |", "|---|---|---|---|---|---|---|"]
    for preset in args.presets:
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
