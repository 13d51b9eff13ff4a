"""What a tuning run leaves to use: ``best_config.json`` (``ppo-td train --config`` runs it), ``trials.csv`` (every
trial: state, value, parameters, why it was pruned, skipped or failed), ``report.md`` (the confirmation table, the
cost, and what the plots can and cannot show), and the plots: the optimization history, the parameters'
importances (Optuna's default evaluator, PED-ANOVA) and the confirmed rows' return curves."""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from ppo_td.config import TrainConfig, to_dict
from ppo_td.tuning.study import Settings, counts, failures
from ppo_td.tuning.trial import SCORES, Plan


def write_report(study: Any, plan: Plan, settings: Settings, confirmed: list[dict[str, Any]], best_name: str | None,
                 best_config: TrainConfig | None, say: Callable[[str], None]) -> None:
    folder = plan.folder
    _trials_csv(study, folder / "trials.csv")
    if best_config is not None:
        (folder / "best_config.json").write_text(json.dumps(to_dict(best_config), indent=2) + "\n")
    plots = _plots(study, confirmed, plan)
    seconds = _trial_seconds(study)
    confirm_seconds = _confirm_seconds(folder)
    c = counts(study)
    lines = [
        f"# Tuning {', '.join(plan.env_ids)} ({date.today().isoformat()})", "",
        f"{c['done']} trials ({c['complete']} complete, {c['pruned']} pruned; {c['fail']} failed), each "
        f"{plan.seeds} seed(s) x {len(plan.env_ids)} env(s) of {plan.frames} frames; sampler {settings.sampler}, "
        f"pruner {settings.pruner}, {settings.workers} worker(s). Score: {SCORES[plan.score]}"
        + (", normalized per env by " + ", ".join(f"{e} [{lo}, {hi}]" for e, (lo, hi) in plan.ranges.items())
           if plan.ranges else "") + ", averaged over the seeds.", "",
        f"Cost: {_core_time(seconds)} of trials and {_core_time(confirm_seconds)} of confirmation (the sum of the "
        f"runs' wall times, one process each, {settings.workers} at a time).", "",
    ]
    if confirmed:
        lines += [f"## Confirmed on {len(confirmed[0]['seeds'])} fresh seed(s)", "",
                  "| | search value | confirmed mean +- std | per seed |", "|---|---|---|---|"]
        for row in confirmed:
            search = "-" if row["search_value"] is None else f"{row['search_value']:.4g}"
            seeds = ", ".join(f"{s:.4g}" for s in row["seeds"])
            why = f" ({'; '.join(row['why'])})" if row.get("why") else ""
            lines.append(f"| {row['name']} | {search} | {row['mean']:.4g} +- {row['std']:.4g}{why} | {seeds} |")
        if best_name is None:
            lines += ["", "No row scored on every fresh seed, so no winner is named and no best_config.json "
                          "written (the reasons are in the table)."]
        else:
            lines += ["", f"Best on the fresh seeds: **{best_name}**, written to `best_config.json` (run it with "
                          f"`ppo-td train --config {folder / 'best_config.json'}`; its total_frames is the tuning "
                          f"budget, {plan.frames}: set --total-frames to train longer)."]
        if best_name is not None and best_name.startswith("base"):
            lines.append("No tuned config beat the base config on the fresh seeds.")
    else:
        lines.append("No trial completed, so nothing was confirmed.")
    lines += _plot_notes(study, plan, plots)
    lines += ["", "Files: `trials.csv`, `study.log` (`optuna-dashboard study.log` shows it), `trials/` and "
                  "`confirm/` (the run folders)" + "".join(f", `{p.name}`" for p in plots) + "."]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    if confirmed:
        for row in confirmed:
            say(f"{row['name']}: {row['mean']:.4g} +- {row['std']:.4g} on {len(row['seeds'])} fresh seed(s)"
                + ("" if row["search_value"] is None else f" (search: {row['search_value']:.4g})"))
        say(f"best: {best_name}; config: {folder / 'best_config.json'}" if best_name else
            "no row scored on every fresh seed: no winner named")
    say(f"report: {folder / 'report.md'}")


def _core_time(seconds: float) -> str:
    """Run time summed over one-process runs: core-minutes below 6 minutes (0.1 core-hours), else core-hours."""
    return f"{seconds / 3600:.2f} core-hours" if seconds >= 360 else f"{seconds / 60:.1f} core-minutes"


IMPORTANCE_TRIALS = 50
"""Complete trials below which the importances are said to be unreliable: PED-ANOVA, Optuna's default evaluator,
compares the top 10% of the trials with all of them, and Optuna's docs advise at least 5 trials in that top 10%
(``PedAnovaImportanceEvaluator``), i.e. 50 complete trials."""


def _plot_notes(study: Any, plan: Plan, plots: list[Path]) -> list[str]:
    """What the plots show that the table does not: what the curves measure, how far the importances can be
    trusted."""
    lines = []
    names = {p.name for p in plots}
    if "curves.png" in names:
        lines += ["", "`curves.png` plots each confirmed row's mean return of its last 100 training episodes (actions "
                  f"sampled, as in training) against frames; the table scores {SCORES[plan.score]}"
                  + (", normalized per env" if plan.ranges else "")
                  + ("" if plan.score == "last100" else ", so a curve's end need not match its row's score")
                  + ". The table names the winner."]
    complete = _complete(study)
    if "importances.png" in names and len(complete) < IMPORTANCE_TRIALS:
        params = len({p for t in complete for p in t.params})
        lines += ["", f"`importances.png` ranks {params} parameters from {len(complete)} complete trials: not "
                  f"reliable with so few. PED-ANOVA (Optuna's default) compares the top 10% of the trials with all "
                  f"of them, and Optuna advises at least 5 trials in that top 10% ({IMPORTANCE_TRIALS} complete "
                  "trials): read it as a hint, not a reason to drop a parameter from the space."]
    return lines


def _complete(study: Any) -> list[Any]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def _trials_csv(study: Any, path: Path) -> None:
    """Every trial: number, state, value, seconds, its parameters (Optuna's names) and the reasons kept with it."""
    trials = study.get_trials(deepcopy=False)
    failed = failures(path.parent)
    params = sorted({p for t in trials for p in t.params})
    reasons = ["pruned", "skipped", "diverged", "repaired", "interrupted", "retry_of", "seed_scores"]
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["number", "state", "value", "seconds", *params, *reasons, "failed"])
        for t in trials:
            if t.user_attrs.get("over_budget"):
                continue
            seconds = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and \
                t.datetime_start else ""
            writer.writerow([t.number, t.state.name, "" if t.value is None else t.value, seconds,
                             *(t.params.get(p, "") for p in params),
                             *(json.dumps(t.user_attrs[r]) if r in t.user_attrs else "" for r in reasons),
                             failed.get(t.number, {}).get("why", "")])


def _trial_seconds(study: Any) -> float:
    return sum((t.datetime_complete - t.datetime_start).total_seconds() for t in study.get_trials(deepcopy=False)
               if t.datetime_complete and t.datetime_start)


def _confirm_seconds(folder: Path) -> float:
    path = folder / "confirm.jsonl"
    if not path.exists():
        return 0.0
    return sum(json.loads(line)["seconds"] for line in path.read_text().splitlines() if line.strip())


def _plots(study: Any, confirmed: list[dict[str, Any]], plan: Plan) -> list[Path]:
    """The PNGs written (the history and importances need complete trials; importances two or more)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    written = []
    complete = _complete(study)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Target and region quantiles")  # few trials: equal importances
        if complete:
            ax = optuna.visualization.matplotlib.plot_optimization_history(study)
            written.append(_save(ax.figure, plan.folder / "history.png", plt))
        if len(complete) >= 2 and len({p for t in complete for p in t.params}) >= 1:
            try:
                ax = optuna.visualization.matplotlib.plot_param_importances(study)
                if len(complete) < IMPORTANCE_TRIALS:  # (the PNG is often looked at without the report)
                    ax.set_title(f"{ax.get_title()}: {len(complete)} complete trials, unreliable below "
                                 f"{IMPORTANCE_TRIALS}")
                written.append(_save(ax.figure, plan.folder / "importances.png", plt))
            except (ValueError, RuntimeError):  # too few distinct values to rank
                pass
    if confirmed:
        written.append(_curves(confirmed, plan, plt))
    return written


def _save(figure: Any, path: Path, plt: Any) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _curves(confirmed: list[dict[str, Any]], plan: Plan, plt: Any) -> Path:
    """Each confirmed row's mean return of the last 100 training episodes against frames on its fresh seeds: each
    seed faint, their mean bold (on a grid of 50 frame counts every seed shares; one panel per env). Not the
    table's score: that is one number a run (its final evaluation, by default), normalized and averaged over the
    envs with --envs, so it has no curve; the caption says what the table scores."""
    envs = plan.env_ids
    grid = [plan.frames * (i + 1) / 50 for i in range(50)]
    figure, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4), squeeze=False)
    for e, env_id in enumerate(envs):
        ax = axes[0][e]
        for i, row in enumerate(confirmed):
            color = f"C{i}"
            label = row["name"].replace(" ", "-")
            curves = []
            for folder in sorted((plan.folder / "confirm" / label).glob(
                    "seed*" if len(envs) == 1 else f"{env_id.replace('/', '_').replace(':', '_')}-seed*")):
                frames, returns = _curve(folder / "episodes.csv")
                if frames:
                    ax.plot(frames, returns, color=color, alpha=0.2, linewidth=0.8)
                    curves.append(_on_grid(frames, returns, grid))
            if curves:
                with warnings.catch_warnings():  # (a grid point before every seed's first episode)
                    warnings.simplefilter("ignore", RuntimeWarning)
                    mean = np.nanmean(np.stack(curves), axis=0)
                ax.plot(grid, mean, color=color, linewidth=2, label=f"{row['name']} ({len(curves)} seeds)")
        ax.set_title(env_id)
        ax.set_xlabel("frames")
        ax.set_ylabel("mean return of the last 100 training episodes")
        ax.legend()
    figure.suptitle(f"training episodes (sampled actions); report.md's table scores by --score {plan.score}",
                    fontsize=9)
    return _save(figure, plan.folder / "curves.png", plt)


def _curve(path: Path) -> tuple[list[float], list[float]]:
    """A run's episodes (``episodes.csv``) as the mean return of the last 100 at each episode's end."""
    if not path.exists():
        return [], []
    frames, means, window = [], [], []
    with path.open() as f:
        for row in csv.DictReader(f):
            try:
                value = float(row["return"])
            except (KeyError, TypeError, ValueError):
                continue
            window = (window + [value])[-100:]
            frames.append(float(row["frames"]))
            means.append(sum(window) / len(window))
    return frames, means


def _on_grid(frames: list[float], values: list[float], grid: list[float]) -> np.ndarray:
    """The last value at or before each grid point (NaN before the first)."""
    at = np.searchsorted(frames, grid, side="right") - 1
    return np.where(at >= 0, np.asarray(values)[np.maximum(at, 0)], np.nan)
