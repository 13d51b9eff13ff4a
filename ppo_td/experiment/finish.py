"""The end of a run whose training is done: the final evaluation (deterministic and sampled), ``summary.json`` and
the learning curve of a run folder, and the lines that say them."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig
from ppo_td.experiment.report import cut_note, evaluation_start, format_evaluation
from ppo_td.training import Evaluation, TrainResult

FLAG = "eval_max_steps, --eval-max-steps"
"""Where a run's evaluation episodes are cut, named for Python and the command line."""
HOWS = ("deterministic", "sampled")
"""The final evaluation's two kinds of episodes, in order."""


def evaluate_checkpoint(out: Path, config: TrainConfig, write: Callable[[str], None] = print) -> list[Evaluation]:
    """The final evaluations of the run folder ``out`` from its ``checkpoint.pt`` (deterministic, sampled; none with
    ``eval_episodes=0``), seeded from the run's seed (:func:`~ppo_td.training.evaluation_seed`)."""
    from ppo_td.persist import load_for_evaluation
    from ppo_td.training import evaluate, evaluation_seed

    if not config.eval_episodes:
        return []
    _, actor, obs_stats, transform_states = load_for_evaluation(out / "checkpoint.pt")
    write(evaluation_start(config.env, config.eval_episodes, HOWS, config.eval_max_steps))
    return [evaluate(actor, config.env, config.eval_episodes, seed=evaluation_seed(config.seed), obs_stats=obs_stats,
                     sampled=s, max_steps=config.eval_max_steps, transform_states=transform_states)
            for s in (False, True)]


def summarize(out: Path, config: TrainConfig, started: float, evaluations: list[Evaluation]) -> dict[str, Any]:
    """Write ``summary.json`` and ``learning_curve.png`` of the run folder ``out``; returns the summary."""
    from ppo_td.persist import plot_learning_curve, read_episodes, read_metrics

    plot_learning_curve(read_episodes(out), out / "learning_curve.png", f"{config.env.env_id}")
    last = read_metrics(out)[-1]
    summary = {"train_seconds": float(last["time"]), "finish_seconds": time.perf_counter() - started,
               "frames": int(last["frames"]), "eval_returns": [], "eval_returns_sampled": []}
    for ev, suffix in zip(evaluations, ("", "_sampled"), strict=False):
        summary[f"eval_returns{suffix}"] = ev.returns  # the episodes that ended
        if ev.groups:  # several agent groups: each one's reward per agent in those episodes
            summary[f"eval_group_returns{suffix}"] = ev.groups
        if ev.cut:  # still running at the cap: their reward so far, apart
            summary.update({f"eval_cut{suffix}": ev.cut, "eval_max_steps": ev.max_steps})
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def say_evaluations(evaluations: list[Evaluation], config: TrainConfig, flag: str, write: Callable[[str], None],
                    folder: Path | None = None) -> None:
    """The lines of the final evaluations (and where episodes were cut, how many, and ``flag`` to change it)."""
    note = cut_note(evaluations, HOWS, flag)
    if note:
        write(note)
    for ev, how in zip(evaluations, HOWS, strict=False):
        write(format_evaluation(ev, how, per_agent=config.env.multiagent))
    if folder is not None:
        write(f"run folder: {folder}")


def finish_folder(out: Path, config: TrainConfig, started: float, write: Callable[[str], None] = print,
                  result: TrainResult | None = None) -> list[Evaluation]:
    """Evaluate the run folder ``out``'s checkpoint, write its summary and curve, say the evaluations; returns them
    (also recorded in ``result``). Refused where ``summary.json`` is written (the run is complete)."""
    if (out / "summary.json").exists():
        raise ValueError(f"{out}: the run is complete (summary.json is written), nothing to resume; evaluate it "
                         f"with `ppo-td eval {shlex.quote(str(out))}` (or ppo_td.load_policy({str(out)!r}))")
    evaluations = evaluate_checkpoint(out, config, write)
    summarize(out, config, started, evaluations)
    say_evaluations(evaluations, config, FLAG, write, folder=out)
    if result is not None and evaluations:
        result.record_evaluations(*evaluations)
    return evaluations
