"""Benchmarks of ppo_td, run from the repository root: ``python -m benchmarks quick|mujoco|doctor``."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One ``benchmarks.worker`` run in a fresh process (its own imports, RNG and threads); its JSON result.

    Raises:
        RuntimeError: the run failed (with the end of its stderr).
    """
    proc = subprocess.run([sys.executable, "-m", "benchmarks.worker", json.dumps(spec)], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"benchmark run {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
