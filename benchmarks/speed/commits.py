"""The same benchmark run at several commits, interleaved: did a change make a path slower?

    python -m benchmarks commits 6fee671 HEAD                      # CartPole at CleanRL's settings, seeds 1-3, 3 rounds
    python -m benchmarks commits 6fee671 . --libraries ppo_td      # '.': this working tree, uncommitted changes too

Each revision is checked out in a git worktree of its own (removed after), and every run is one worker process
started in that checkout (``benchmarks.common.worker``, or ``benchmarks.worker`` in a revision from before
2026-12-06), so ppo_td and the worker are the revision's (checked: the run fails if ``ppo_td`` is imported from
elsewhere); the Python environment is this one. Runs are interleaved (per
round and seed, every revision and library in turn), so a slow minute of a shared machine falls on all of them.
The report gives each revision's median seconds (collection, update, total, as the worker's timers split them:
``benchmarks quick``'s), SB3's seconds over ppo_td's per run (the speed ratio, above 1: ppo_td faster), and each
revision's ppo_td seconds over the first revision's, paired by seed and round, as median (min-max).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("collect_seconds", "update_seconds", "train_seconds")
RUN_TIMEOUT = 900.0
"""Seconds a run may take before it is stopped and reported as failed."""

_IN_CHECKOUT = ("import runpy, sys; checkout = sys.argv.pop(1); sys.path.insert(0, checkout); import ppo_td; "
                "from pathlib import Path; here = Path(ppo_td.__file__).resolve(); "
                "assert Path(checkout).resolve() in here.parents, f'ppo_td imported from {here}, not {checkout}'; "
                "moved = (Path(checkout) / 'benchmarks' / 'common' / 'worker.py').exists(); "  # since 2026-12-06
                "runpy.run_module('benchmarks.common.worker' if moved else 'benchmarks.worker', run_name='__main__')")


def run_in(checkout: Path, spec: dict[str, Any], timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
    """One worker run of ``spec`` with ``checkout``'s ppo_td and benchmarks; its JSON result.

    Raises:
        RuntimeError: the run failed, imported ppo_td from elsewhere, or passed ``timeout`` seconds.
    """
    try:
        proc = subprocess.run([sys.executable, "-c", _IN_CHECKOUT, str(checkout), json.dumps(spec)], cwd=checkout,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"run {spec} in {checkout} passed {timeout:.0f} s") from e
    if proc.returncode:
        raise RuntimeError(f"run {spec} in {checkout} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checkouts(revisions: list[str], into: Path) -> dict[str, Path]:
    """A checkout per revision: '.' is this working tree, any other a detached git worktree under ``into``.

    Raises:
        ValueError: git does not know a revision.
    """
    out = {}
    for rev in revisions:
        if rev == ".":
            out[rev] = ROOT
            continue
        known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=ROOT,
                               capture_output=True, text=True)
        if known.returncode:
            raise ValueError(f"git knows no commit {rev!r} here (a shallow clone: git fetch --unshallow)")
        path = into / rev.replace("/", "_")
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(path), rev], cwd=ROOT, check=True,
                       capture_output=True)
        out[rev] = path
    return out


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(results: dict[tuple[str, str], list[dict[str, Any]]], revisions: list[str],
           libraries: list[str]) -> list[str]:
    """The tables of a comparison: results by (revision, library), runs in the same order for every key."""
    lines = ["| revision | library | collection s | update s | total s | runs |", "|---|---|---|---|---|---|"]
    for (rev, library), runs in results.items():
        lines.append(f"| {rev} | {library} | " + " | ".join(
            f"{statistics.median(r[p] for r in runs):.3f}" for p in PARTS) + f" | {len(runs)} |")
    lines.append("")
    if "sb3" in libraries and "ppo_td" in libraries:
        lines += ["SB3 seconds over ppo_td's, per run (above 1: ppo_td faster), median (min-max):", "",
                  "| revision | collection | update | total |", "|---|---|---|---|"]
        for rev in revisions:
            mine, theirs = results[(rev, "ppo_td")], results[(rev, "sb3")]
            lines.append(f"| {rev} | " + " | ".join(_spread([t[p] / m[p] for m, t in zip(mine, theirs, strict=True)])
                                                    for p in PARTS) + " |")
        lines.append("")
    if len(revisions) > 1 and "ppo_td" in libraries:
        first = results[(revisions[0], "ppo_td")]
        lines += [f"ppo_td's seconds over {revisions[0]}'s, paired by seed and round (below 1: faster):", "",
                  "| revision | collection | update | total |", "|---|---|---|---|"]
        for rev in revisions[1:]:
            lines.append(f"| {rev} | " + " | ".join(
                _spread([b[p] / a[p] for a, b in zip(first, results[(rev, "ppo_td")], strict=True)]) for p in PARTS)
                + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks commits", description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="+", help="commits to compare ('.' for this working tree)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--preset", default="cleanrl")
    parser.add_argument("--frames", type=int, default=25_600, help="frames per run (benchmarks quick: 25,600)")
    parser.add_argument("--libraries", nargs="+", default=["ppo_td", "sb3"], choices=["ppo_td", "sb3"])
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.frames < 1:
        parser.error("--rounds and --frames take a positive count")
    into = Path(tempfile.mkdtemp(prefix="ppo_td_commits_"))
    try:
        try:
            trees = checkouts(args.revisions, into)
        except ValueError as e:
            parser.error(str(e))
        results: dict[tuple[str, str], list[dict[str, Any]]] = {
            (rev, lib): [] for rev in args.revisions for lib in args.libraries}
        for round_ in range(1, args.rounds + 1):
            for seed in args.seeds:
                for rev in args.revisions:
                    for library in args.libraries:
                        spec = {"library": library, "preset": args.preset, "seed": seed,
                                "total_frames": args.frames, "eval_episodes": 1}
                        out = run_in(trees[rev], spec)
                        results[(rev, library)].append(out)
                        print(f"round {round_} seed {seed} {rev} {library}: " + ", ".join(
                            f"{p.split('_')[0]} {out[p]:.3f} s" for p in PARTS), flush=True)
        command = " ".join(["python -m benchmarks commits", *(argv if argv is not None else sys.argv[1:])])
        print("\n".join(["", f"`{command}` ({args.preset}, "
                         f"{args.frames:,} frames, seeds {' '.join(map(str, args.seeds))}, {args.rounds} rounds)", "",
                         *report(results, args.revisions, args.libraries)]))
        return 0
    finally:
        for rev in args.revisions:
            path = into / rev.replace("/", "_")
            if rev != "." and path.exists():
                subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(into, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


if __name__ == "__main__":
    raise SystemExit(main())
