"""What the kinds of benchmark share: the per-run worker (``benchmarks/common/worker.py``, one training run of a JSON
spec in a fresh process, ppo_td or a peer library, its numbers printed as one JSON line: ``python -m benchmarks
worker JSON``), :func:`run_worker` that starts it, and the harness of the suites that share one set of options
(``benchmarks/common/harness.py``: ``--seeds``, ``--out``, the results header and files, time to solve, the median
and range of a table cell). Nothing here imports a kind of benchmark; the kinds import from here."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def run_worker(spec: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """One ``benchmarks.common.worker`` run in a fresh process (its own imports, RNG and threads); its JSON result.
    ``timeout``: seconds it may take (None: no limit).

    Raises:
        RuntimeError: the run failed (with the end of its stderr) or passed ``timeout``.
    """
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)],
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as err:  # subprocess.run kills the process before raising
        raise RuntimeError(f"benchmark run {spec} passed its {timeout:.0f} s") from err
    if proc.returncode:
        raise RuntimeError(f"benchmark run {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
