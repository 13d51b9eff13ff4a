"""The harness the suites ``quick``, ``mujoco``, ``atari``, ``scaling``, ``recurrent``, ``multiagent`` and ``doctor``
share: one set of options (``python -m benchmarks SUITE [--seeds 1 2 3] [--out DIR]`` and each suite's own, every
suite taking all of them, as when one parser read them all), the results file ``DIR/results_SUITE.md`` with its
machine and command header, ``DIR/results.jsonl`` (one line per run), time to solve CartPole and a table cell's
median (range). Each kind's suite module gives its sections to :func:`run`; nothing here imports a kind."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DESCRIPTION = "ppo_td's benchmark harness: ``python -m benchmarks SUITE [--seeds 1 2 3] [--out DIR]``."
SUITES = ["quick", "mujoco", "atari", "scaling", "recurrent", "multiagent", "doctor"]
"""The suites that share these options, in the order of the parser's choices."""

SOLVED, WINDOW = 475.0, 20

BENCHMARL_VENV = ("python3 -m venv .venv-benchmarl && .venv-benchmarl/bin/pip install torch==2.13.0 benchmarl==1.5.2 "
                  "vmas==1.5.2")

MULTIAGENT_TASKS = {
    "navigation": ("vmas-navigation", "VMAS navigation (3 agents, 100 steps)"),
    "simple_tag": ("vmas-tag", "VMAS simple_tag (two groups: 3 adversaries, which share their reward, chase 1 agent; "
                               "100 steps)"),
}
"""BenchMARL's VMAS tasks the multiagent suite runs: the ppo_td preset at the same settings, and a description."""


def time_to_solve(result: dict[str, Any]) -> tuple[int, float] | None:
    """(frames, seconds) when the mean of the last 20 training episodes first reached 475."""
    returns = [e[2] for e in result["episodes"]]
    for i in range(WINDOW, len(returns) + 1):
        if sum(returns[i - WINDOW:i]) / WINDOW >= SOLVED:
            return result["episodes"][i - 1][0], result["episodes"][i - 1][1]
    return None


def median_range(values: list[float], fmt: str) -> str:
    """A table cell: the median of ``values`` and their range, ``median (min-max)``; ``-`` for none."""
    if not values:
        return "-"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def log_run(out: Path, suite: str, name: str, result: dict[str, Any]) -> None:
    """One run's result onto ``out/results.jsonl``, and a line of it (its episodes left out) printed."""
    with (out / "results.jsonl").open("a") as f:
        f.write(json.dumps({"suite": suite, "name": name, **result}) + "\n")
    short = {k: v for k, v in result.items() if k not in ("episodes", "eval_returns")}
    print(f"{suite} | {name} | {json.dumps(short)}", flush=True)


def parser() -> argparse.ArgumentParser:
    """The options of every shared suite (each suite reads its own and takes the others')."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=DESCRIPTION)
    parser.add_argument("suite", choices=SUITES)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default="bench_results")
    parser.add_argument("--full", action="store_true", help="mujoco: also the 1M-frame runs")
    parser.add_argument("--presets", nargs="+", choices=["cartpole-novel", "pendulum-novel"], default=None,
                        help="recurrent: only these tasks (default both)")
    parser.add_argument("--benchmarl-python", default=".venv-benchmarl/bin/python",
                        help=f"multiagent: BenchMARL's virtualenv Python (create it with: {BENCHMARL_VENV})")
    parser.add_argument("--algorithms", nargs="+", choices=["mappo", "ippo"], default=["mappo"],
                        help="multiagent: which algorithms (default mappo)")
    parser.add_argument("--task", choices=sorted(MULTIAGENT_TASKS), default="navigation",
                        help="multiagent: BenchMARL's VMAS task (simple_tag: two agent groups, the vmas-tag preset)")
    parser.add_argument("--frames", type=int, default=None,
                        help="multiagent: frames per run, a multiple of the preset's batch (6,000 frames; default "
                             "its 600,000): a shorter throughput comparison")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` as typed after ``python -m benchmarks`` (the suite's name among the options), read and checked."""
    options = parser()
    args = options.parse_args(argv)
    if args.frames is not None:
        from ppo_td.presets import get_preset

        batch = get_preset("vmas-navigation").frames_per_batch
        if args.suite != "multiagent" or args.frames <= 0 or args.frames % batch:
            options.error(f"--frames {args.frames}: only for the multiagent suite, a positive multiple of {batch} "
                          f"(the vmas-navigation batch), e.g. --frames {10 * batch}")
    return args


def run(argv: list[str], sections: dict[str, Callable[[argparse.Namespace, Path], list[str]]]) -> None:
    """The suite ``argv`` names, from ``sections`` (its Markdown sections, given the options and the output folder):
    a header (the machine, the command), then the sections, written to ``DIR/results_SUITE.md`` and printed.

    Raises:
        SystemExit: the options are wrong, or ``sections`` has no suite of that name (a usage error).
    """
    args = parse(argv)
    if args.suite not in sections:
        parser().error(f"the suite {args.suite} is not this module's: python -m benchmarks {args.suite}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = (f"{platform.machine()}, {torch.get_num_threads()} torch threads available, "
               f"Python {platform.python_version()}, torch {torch.__version__}")
    presets = f" --presets {' '.join(args.presets)}" if args.presets else ""
    presets += f" --algorithms {' '.join(args.algorithms)}" if args.suite == "multiagent" else ""
    presets += f" --frames {args.frames}" if args.frames else ""
    presets += f" --task {args.task}" if args.suite == "multiagent" and args.task != "navigation" else ""
    lines = [f"# ppo_td benchmarks: {args.suite}", "", f"Machine: {machine}. Command: "
             f"`python -m benchmarks {args.suite} --seeds {' '.join(map(str, args.seeds))}{presets}`.", ""]
    lines += sections[args.suite](args, out)
    (out / f"results_{args.suite}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
