"""A benchmark's result store: ``STORE/runs.jsonl``, one finished run a line, read keyed so a rerun skips what is
there, appended one run at a time (a run is kept as soon as it ends)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any


def stored_runs(store: Path, key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, dict[str, Any]]:
    """The runs in ``store/runs.jsonl`` by ``key(run)`` (the last of equal keys); empty where there is none."""
    path = store / "runs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {key(run): run for run in (json.loads(line) for line in lines if line.strip())}


def append_run(store: Path, run: dict[str, Any]) -> None:
    """``run`` as one more line of ``store/runs.jsonl`` (the folder made where missing)."""
    store.mkdir(parents=True, exist_ok=True)
    with (store / "runs.jsonl").open("a") as f:
        f.write(json.dumps(run) + "\n")


def measured_commit(root: Path) -> str:
    """The commit of the checkout at ``root`` a run measures, with ``-dirty`` where tracked files were edited since (a
    run of edited code is not that commit's), or ``unknown`` where git cannot say. The result stores under
    ``benchmarks/results/`` are not code: a run stored there does not make the next one's commit dirty."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")
