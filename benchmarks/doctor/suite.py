"""The doctor suite (``python -m benchmarks doctor [--out DIR]``): the cost of the doctor's audit per update, on the
cartpole and cleanrl presets, each measured in a process of its own (``benchmarks/doctor/overhead.py``, ``python -m
benchmarks doctor_overhead``); the options, the header and the files are the harness's
(``benchmarks/common/harness.py``)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common.harness import log_run, run


def doctor(out: Path) -> list[str]:
    lines = []
    for preset in ("cartpole", "cleanrl"):
        proc = subprocess.run([sys.executable, "-m", "benchmarks.doctor.overhead", "--preset", preset],
                              capture_output=True, text=True, check=True)
        rows = [line for line in proc.stdout.splitlines() if line.startswith("|")]
        lines += rows if not lines else rows[2:]
        log_run(out, "doctor", preset, json.loads(proc.stdout.splitlines()[0]))
    return lines


def sections(args: argparse.Namespace, out: Path) -> list[str]:
    """The doctor suite's section."""
    return ["## Doctor overhead", "", *doctor(out), ""]


def main(argv: list[str]) -> None:
    """``python -m benchmarks doctor ...`` (``argv``: all after ``python -m benchmarks``)."""
    run(argv, {"doctor": sections})
