"""What a stored run's evaluation started from, read from its commit: ``eval_starts`` in each record of the returns
store (``benchmarks/results/returns/runs.jsonl``).

ppo_td's final evaluation seeded its env copy i with seed + 10,000 + i until commit 231c7a1 (2026-11-29), so runs of
seeds 1 to 5 shared most of their start states ("shared"); since, it seeds from the run's seed through numpy's
``SeedSequence`` ("per run"). SB3's evaluation steps one env, its episodes one after another from seed + 10,000
("sequential"). A record written before this field existed gets it here from its ``commit``: whether 231c7a1 is an
ancestor of it (git's own answer); new records carry it from :func:`benchmarks.returns.run.run_one`.

    python -m benchmarks store_history [--store benchmarks/results/returns]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SEEDED_PER_RUN = "231c7a1"
"""The commit from which ppo_td's evaluation seeds from the run's seed (``ppo_td.training.evaluation_seed``)."""


def eval_starts(record: dict[str, Any], root: Path = ROOT, since: str = SEEDED_PER_RUN) -> str:
    """``per run``, ``shared`` or ``sequential`` (SB3) for a stored run, from its library and commit (``per run`` where
    ``since`` is the commit or one of its ancestors, in the repository at ``root``).

    Raises:
        ValueError: a ppo_td run whose commit git does not know here (a shallow clone: fetch the history).
    """
    if record["library"] != "ppo_td":
        return "sequential"
    commit = str(record.get("commit") or "").split("+")[0].removesuffix("-dirty")  # (a dirty tree: its commit's)
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=root, capture_output=True)
    if not commit or known.returncode:
        raise ValueError(f"run {record['key']}: its commit {commit or '(none)'} is not in this repository's history; "
                         "fetch it (git fetch --unshallow) to read what its evaluation started from")
    after = subprocess.run(["git", "merge-base", "--is-ancestor", since, commit], cwd=root,
                           capture_output=True, text=True)
    if after.returncode not in (0, 1):  # 1: not an ancestor; else git could not tell
        raise ValueError(f"git cannot tell whether {since} is an ancestor of {commit}: {after.stderr.strip()}")
    return "per run" if after.returncode == 0 else "shared"


def mark(store: Path, root: Path = ROOT, since: str = SEEDED_PER_RUN) -> int:
    """Give every record of ``store`` without ``eval_starts`` its value; the store rewritten atomically. Returns how
    many records were marked."""
    from ppo_td.persist import write_atomically

    path = store / "runs.jsonl"
    lines, marked = [], 0
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            lines.append(line)  # a line a crash cut short: left as it is (the reader skips it)
            continue
        if "eval_starts" not in record:
            record["eval_starts"] = eval_starts(record, root, since)
            marked += 1
        lines.append(json.dumps(record))
    write_atomically(path, "\n".join(lines) + "\n")
    return marked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks store_history", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "benchmarks" / "results" / "returns")
    args = parser.parse_args(argv)
    print(f"{mark(args.store)} records of {args.store / 'runs.jsonl'} marked with what their evaluation started from")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
