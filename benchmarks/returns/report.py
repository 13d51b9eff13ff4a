"""The report of ``python -m benchmarks returns SUITE --report``: tables, intervals and plots from the result store.

Per env and library: the seeds run, the mean of each run's last 100 training episodes as mean +- std over seeds
(CleanRL's statistic), the median, the interquartile mean (IQM) with a 95% stratified-bootstrap interval, and the
deterministic evaluation; the published anchors beside them; the probability that a ppo_td run beats an SB3 run
(rliable's probability of improvement, Mann-Whitney over seeds, with its interval). Per suite: every env's scores
normalized (a random policy 0, the best published PPO 1: :func:`random_score` measured here, the anchors as
published), their IQM per library with its interval, a performance profile and the return curves (median over
seeds, the band its 95% bootstrap interval) against frames and against seconds.

Intervals come from ``rliable`` (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice"): 2,000
bootstrap resamples of the runs within each env, with numpy's global generator seeded before each call (rliable
draws from it, so its ``random_state`` alone does not fix them).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.returns.store_history import SEEDED_PER_RUN
from benchmarks.returns.suites import (
    ANCHORS,
    BEST,
    CURVE_POINTS,
    EVAL_EPISODES,
    SUITES,
    Task,
    config_of,
    key_of,
    read_store,
    with_settings,
)

REPS = 2000
LIBRARIES = ("ppo_td", "sb3")
LABEL = {"ppo_td": "ppo_td", "sb3": "Stable-Baselines3"}


def _seeded(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call`` with numpy's global generator seeded first (rliable's bootstrap draws from it)."""
    import warnings

    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arch 7 about random_state
        return call(*args, **kwargs)


def iqm_interval(scores: np.ndarray) -> tuple[float, float, float]:
    """IQM of ``scores`` (``[runs, envs]``) and its 95% stratified-bootstrap interval."""
    from rliable import library as rly
    from rliable import metrics

    point, interval = _seeded(rly.get_interval_estimates, {"x": scores},
                              lambda s: np.array([metrics.aggregate_iqm(s)]), reps=REPS)
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


def mean_interval(scores: np.ndarray) -> tuple[float, float, float]:
    """The mean over envs of each env's mean score (``[runs, envs]``) and its 95% stratified-bootstrap interval: unlike
    the IQM it keeps an env where every run fails."""
    from rliable import library as rly
    from rliable import metrics

    point, interval = _seeded(rly.get_interval_estimates, {"x": scores},
                              lambda s: np.array([metrics.aggregate_mean(s)]), reps=REPS)
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


def improvement(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """P(a run of ``x`` beats a run of ``y``), averaged over envs (``[runs, envs]`` each), and its interval."""
    from rliable import library as rly
    from rliable import metrics

    point, interval = _seeded(rly.get_interval_estimates, {"x,y": (x, y)}, metrics.probability_of_improvement,
                              reps=REPS)
    low, high = np.ravel(interval["x,y"])
    return float(np.ravel(point["x,y"])[0]), float(low), float(high)


def random_score(task: Task, store: Path, episodes: int = 100) -> float | None:
    """The mean return of uniform random actions (legal ones, where the observation has an action mask) over
    ``episodes`` episodes (``reset(seed=i)``, the action space seeded 0), measured once and kept in the store's
    ``random.json``; None for an env Gymnasium cannot make alone."""
    path = store / "random.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    key = f"{task.env_id}|{','.join(task.kwargs)}|{task.max_episode_steps}"
    if key in known:
        return known[key]
    config = config_of(task)
    if config.env.multiagent:
        return None
    from ppo_td.envs import gym_env

    env = gym_env(config.env)
    env.action_space.seed(0)
    returns = []
    for i in range(episodes):
        observation, _ = env.reset(seed=i)
        total, done = 0.0, False
        while not done:  # a game's legal moves only (its mask: turn-based games refuse the others)
            mask = observation.get("action_mask") if isinstance(observation, dict) else None
            action = env.action_space.sample(None if mask is None else np.asarray(mask, dtype=np.int8))
            observation, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    known[key] = statistics.fmean(returns)
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    return known[key]


def best_score(env_id: str) -> tuple[float, str] | None:
    """The best published PPO number for ``env_id`` (the highest anchor), else :data:`BEST`'s (Gymnasium's
    solved threshold, or the shortest path)."""
    anchors = ANCHORS.get(env_id, [])
    if anchors:
        source, mean, _, _ = max(anchors, key=lambda a: a[1])
        return mean, source
    return BEST.get(env_id)


def _fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.4g}" if abs(x) < 10 else \
        f"{x:,.1f}"


def _runs_of(runs: list[dict[str, Any]], task: Task, library: str) -> list[dict[str, Any]]:
    """The stored runs of ``task`` (its config as it is now) by ``library``, one per seed (the latest), by seed."""
    out = {}
    for r in runs:  # the same library, env, preset and config (key_of's digest): a run of an older preset is left out
        if r["env"] == task.env_id and r["library"] == library and r["key"] == key_of(task, library, r["seed"]):
            out[r["seed"]] = r
    return [out[s] for s in sorted(out)]


def evaluation_score(run: dict[str, Any]) -> float | None:
    """A run's deterministic evaluation: the mean return of its episodes, one cut at the step cap counting with the
    reward it had reached (``eval_cut``), as ppo_td's evaluation during training and its tuner score it; None where
    no episode was recorded. A run stored before cut episodes were (fewer returns than episodes, no ``eval_cut``)
    counts its ended ones; its row says how many ended."""
    values = [*run["eval_returns"], *run.get("eval_cut", [])]
    return statistics.fmean(values) if values else None


def _episodes(run: dict[str, Any]) -> int:
    """The evaluation episodes a run ran: its ended and cut ones, or for a run stored before cut ones were recorded,
    the episodes it was asked for."""
    return len(run["eval_returns"]) + len(run["eval_cut"]) if "eval_cut" in run else max(
        len(run["eval_returns"]), EVAL_EPISODES if run["library"] == "ppo_td" else 0)


_CACHE: dict[tuple[Any, ...], Any] = {}
"""Numbers already computed from a group of runs (keyed by what the runs hold but their curves): the report and
:mod:`benchmarks.returns.published`'s check read the same groups, and each bootstrap takes about a second."""


def _cached(name: str, runs: list[dict[str, Any]], compute: Callable[[], Any]) -> Any:
    key = (name, *(json.dumps({k: v for k, v in r.items() if k not in ("curve", "episodes")}, sort_keys=True,
                              default=str) for r in runs))
    if key not in _CACHE:
        _CACHE[key] = compute()
    return _CACHE[key]


def row_values(mine: list[dict[str, Any]]) -> dict[str, Any]:
    """What a table row says of ``mine`` (one library's runs of one config, one per seed), unrounded: ``seeds``,
    ``last`` (mean, std over seeds of the last-100 means), ``median``, ``iqm`` (IQM, low, high), ``eval`` (mean, std
    of :func:`evaluation_score`, or None), ``ended`` and ``episodes`` (evaluation episodes that ended, and run),
    ``shared`` (an evaluation from before its starts were the run's own: ``benchmarks.returns.store_history``),
    ``minutes`` (median per run) and ``fps`` (median frames/s)."""
    def compute() -> dict[str, Any]:
        last = np.array([r["last100"] for r in mine])
        evals = [v for v in map(evaluation_score, mine) if v is not None]
        return {"seeds": len(mine), "last": (float(last.mean()), float(last.std())), "median": float(np.median(last)),
                "iqm": iqm_interval(last[:, None]),
                "eval": (statistics.fmean(evals), statistics.pstdev(evals)) if evals else None,
                "ended": sum(len(r["eval_returns"]) for r in mine), "episodes": sum(_episodes(r) for r in mine),
                "shared": any(r.get("eval_starts") == "shared" for r in mine),
                "minutes": statistics.median(r["train_seconds"] for r in mine) / 60,
                "fps": statistics.median(r["frames"] / r["train_seconds"] for r in mine)}  # a slower fix shows
    return _cached("row", mine, compute)


def eval_notes(values: dict[str, Any]) -> str:
    """What an evaluation cell says beside its numbers: episodes cut at the step cap, starts shared by seeds."""
    return ((f" ({values['ended']} of {values['episodes']} episodes ended)"
             if values["ended"] < values["episodes"] else "")
            + (" (starts shared by seeds)" if values["shared"] else ""))


def _row(env: str, label: str, mine: list[dict[str, Any]]) -> str:
    """One table row: ``mine``'s runs of ``env`` (an empty cell where the row continues the env above)."""
    v = row_values(mine)
    iqm, low, high = v["iqm"]
    evaluation = v["eval"] or (float("nan"), float("nan"))
    cells = [env, label, str(v["seeds"]), f"{_fmt(v['last'][0])} +- {_fmt(v['last'][1])}", _fmt(v["median"]),
             f"{_fmt(iqm)} [{_fmt(low)}, {_fmt(high)}]",
             f"{_fmt(evaluation[0])} +- {_fmt(evaluation[1])}" + eval_notes(v), f"{v['minutes']:.1f}",
             f"{v['fps']:,.0f}"]
    return ("| " + " | ".join(cells) + " |") if env else ("| | " + " | ".join(cells[1:]) + " |")


def pair_improvement(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> tuple[float, float, float]:
    """P(a run of ``mine`` beats a run of ``theirs``) over their last-100 means, with its interval."""
    return _cached("improvement", [*mine, {"versus": True}, *theirs], lambda: improvement(
        np.array([r["last100"] for r in mine])[:, None], np.array([r["last100"] for r in theirs])[:, None]))


def env_rows(task: Task, runs: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[int, float]]]:
    """The table rows of one env (each library, the same on other presets where ``--settings`` ran them, then its
    anchors, then P(ppo_td > SB3)), and its scores per library on its own preset (seed -> the run's last-100
    mean)."""
    rows, scores, groups = [], {}, {}
    for library in LIBRARIES:
        mine = _runs_of(runs, task, library)
        if not mine:
            continue
        scores[library], groups[library] = {r["seed"]: r["last100"] for r in mine}, mine
        rows.append(_row(task.env_id, LABEL[library], mine))
    others = sorted({r["settings"] for r in runs if r["env"] == task.env_id and r["settings"] != task.settings})
    for settings in others:  # ablations (--settings): beside, never in the suite's aggregates
        for library in LIBRARIES:
            theirs = _runs_of(runs, with_settings(task, settings), library)
            if theirs:
                rows.append(_row(task.env_id if not rows else "", f"{LABEL[library]} on `{settings}`", theirs))
    for source, mean, std, what in ANCHORS.get(task.env_id, []):
        rows.append(f"| | {source} | | {mean:,}" + (f" +- {std:,}" if std is not None else "") +  # as published
                    f" | | | | ({what}) | |")
    if len(scores) == 2:
        p, low, high = pair_improvement(groups["ppo_td"], groups["sb3"])
        rows.append(f"| | P(ppo_td run > SB3 run) | | {p:.2f} [{low:.2f}, {high:.2f}] | | | | | |")
        speed = speed_ratio(groups["ppo_td"], groups["sb3"])
        if speed is not None:
            median, low, high, seeds, days = speed
            rows.append(f"| | {SPEED_LABEL} | | | | | | (median and range over {seeds} seeds, each seed's two runs; "
                        f"run on {days}) | {median:.2f}x ({low:.2f}-{high:.2f}) |")
    return rows, scores


SPEED_LABEL = "frames/s, ppo_td / SB3"
"""The label of an env's row of frames/s ratios (:func:`speed_ratio`)."""


def speed_ratio(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]
                ) -> tuple[float, float, float, int, str] | None:
    """ppo_td's frames/s over SB3's, run by run of the same seed: the median ratio, its lowest and highest, the seeds
    and the days the runs finished on; None where no seed has both."""
    fps = {lib: {r["seed"]: (r["frames"] / r["train_seconds"], r["finished"][:10]) for r in runs}
           for lib, runs in (("mine", mine), ("theirs", theirs))}
    seeds = sorted(set(fps["mine"]) & set(fps["theirs"]))
    if not seeds:
        return None
    ratios = [fps["mine"][s][0] / fps["theirs"][s][0] for s in seeds]
    days = sorted({fps[lib][s][1] for lib in fps for s in seeds})
    return statistics.median(ratios), min(ratios), max(ratios), len(seeds), ", ".join(days)


def _curve(run: dict[str, Any], grid: np.ndarray, axis: int) -> np.ndarray:
    """The mean of the last 100 training episodes ended by each grid point (frames: ``axis`` 0; seconds: 1): from
    the run's episodes, or its stored curve of those means (:func:`benchmarks.returns.suites.compact`)."""
    points = run.get("curve") or run.get("episodes") or []
    if not points:
        return np.full(len(grid), np.nan)
    at = np.array([e[axis] for e in points], dtype=float)
    values = np.array([e[2] for e in points], dtype=float)
    out = np.full(len(grid), np.nan)
    for i, g in enumerate(grid):
        n = int(np.searchsorted(at, g, side="right"))
        if n:
            out[i] = values[n - 1] if "curve" in run else values[max(0, n - 100):n].mean()
    return out


def _median_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The median over runs (rows) at each point and a 95% percentile-bootstrap interval of it."""
    import warnings

    rng = np.random.default_rng(0)
    picks = rng.integers(0, curves.shape[0], size=(REPS, curves.shape[0]))
    with warnings.catch_warnings():  # points before a run's first episode ended: NaN, left blank
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(curves, axis=0)
        boot = np.nanmedian(curves[picks], axis=1)
        return median, np.nanpercentile(boot, 2.5, axis=0), np.nanpercentile(boot, 97.5, axis=0)


def plot_curves(suite: str, tasks: list[Task], runs: list[dict[str, Any]], path: Path) -> Path | None:
    """Return against frames (top row) and seconds (bottom row), one column per env, each library's median over
    seeds with its band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [t for t in tasks if any(_runs_of(runs, t, lib) for lib in LIBRARIES)]
    if not shown:
        return None
    fig, axes = plt.subplots(2, len(shown), figsize=(4 * len(shown), 6.5), squeeze=False)
    for col, task in enumerate(shown):
        for library, color in zip(LIBRARIES, ("C0", "C1"), strict=True):
            mine = _runs_of(runs, task, library)
            if not mine:
                continue
            for row, (axis, limit) in enumerate(((0, task.frames), (1, max(r["train_seconds"] for r in mine)))):
                grid = np.linspace(0, limit, 60)[1:]
                curves = np.stack([_curve(r, grid, axis) for r in mine])
                median, low, high = _median_band(curves)
                ax = axes[row, col]
                ax.plot(grid, median, color=color, label=f"{LABEL[library]} ({len(mine)} seeds)")
                ax.fill_between(grid, low, high, color=color, alpha=0.2)
                ax.set_xlabel("frames" if axis == 0 else "seconds")
        axes[0, col].set_title(task.env_id)
        axes[0, col].legend(fontsize=8)
        axes[0, col].set_ylabel("return (last 100 episodes)")
        axes[1, col].set_ylabel("return (last 100 episodes)")
    fig.suptitle(f"{suite}: median over seeds, band: its 95% bootstrap interval")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def suite_scores(suite: str, runs: list[dict[str, Any]], store: Path) -> tuple[
        list[str], dict[str, dict[str, dict[int, float]]], list[str], list[str]]:
    """The tables' rows of one suite, each env's scores normalized per library (env -> seed -> score; random 0, the
    best published PPO 1), the envs every library with scores has, and the notes."""
    rows: list[str] = []
    normalized: dict[str, dict[str, dict[int, float]]] = {lib: {} for lib in LIBRARIES}
    notes = []
    for task in SUITES[suite]:
        env_lines, scores = env_rows(task, runs)
        if not env_lines or not scores:
            continue
        rows += env_lines
        low = random_score(task, store)
        best = best_score(task.env_id)
        if low is not None and best is not None and best[0] > low:
            notes.append(f"{task.env_id}: random {_fmt(low)}, best {_fmt(best[0])} ({best[1]})")
            for library, by_seed in scores.items():
                normalized[library][task.env_id] = {seed: (v - low) / (best[0] - low) for seed, v in by_seed.items()}
        if task.note:
            notes.append(f"{task.env_id}: {task.note}")
    envs = sorted(set.intersection(*(set(v) for v in normalized.values() if v))) if any(normalized.values()) else []
    return rows, normalized, envs, notes


def aggregates(normalized: dict[str, dict[str, dict[int, float]]], envs: list[str]) -> dict[str, tuple[
        list[int], tuple[float, float, float], tuple[float, float, float]]]:
    """Per library with a score on every one of ``envs``: the seeds all of them have, the normalized IQM and the
    mean, each with its interval."""
    out = {}
    for library in LIBRARIES:
        seeds, matrix = seed_matrix(normalized[library], envs)
        if matrix is not None:
            key = ("aggregates", tuple(envs), matrix.shape, matrix.tobytes())
            if key not in _CACHE:
                _CACHE[key] = (iqm_interval(matrix), mean_interval(matrix))
            out[library] = (seeds, *_CACHE[key])
    return out


TARGET = 0.9
"""Seconds to a return: the share of the way from a random policy's score to the best published PPO one that a run's
mean of its last 100 training episodes must reach (issue 65: 90%)."""


def running_means(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A run's (training seconds, mean of its last 100 episodes) at each recorded episode, counted once at least
    min(100, the run's episodes) have ended, so a few lucky first episodes do not count and the last value is the
    run's ``last100``; from its episodes, or from its stored curve (:func:`benchmarks.returns.suites.compact`: the same
    means at 2,000 evenly spaced episodes)."""
    if "curve" in run:
        n = run["episodes_total"]
        picks = sorted({round(i * (n - 1) / (CURVE_POINTS - 1)) for i in range(CURVE_POINTS)})
        points = [(c[1], c[2]) for i, c in zip(picks, run["curve"], strict=True) if i + 1 >= min(100, n)]
    else:
        episodes = run.get("episodes") or []
        n = len(episodes)
        sums = np.concatenate([[0.0], np.cumsum([e[2] for e in episodes])])
        points = [(episodes[i][1], (sums[i + 1] - sums[max(0, i + 1 - 100)]) / min(100, i + 1))
                  for i in range(min(100, n) - 1, n)]
    seconds, means = zip(*points, strict=True) if points else ((), ())
    return np.array(seconds, dtype=float), np.array(means, dtype=float)


def seconds_to(run: dict[str, Any], threshold: float) -> float:
    """The training seconds until the run's mean of its last 100 episodes first reached ``threshold``; inf if it never
    did."""
    seconds, means = running_means(run)
    reached = np.flatnonzero(means >= threshold)
    return float(seconds[reached[0]]) if reached.size else math.inf


def threshold_of(task: Task, store: Path) -> float | None:
    """The return a run of ``task`` must reach for its seconds to a return: :data:`TARGET` of the way from the random
    score (measured once, kept in ``store``) to the best published one; None where either is missing."""
    low, best = random_score(task, store), best_score(task.env_id)
    if low is None or best is None or best[0] <= low:
        return None
    return low + TARGET * (best[0] - low)


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """The median of ``values`` (inf for a run that never got there) and a 95% percentile-bootstrap interval of it
    (order statistics, so an inf stays an inf)."""
    x = np.array(values, dtype=float)
    picks = np.random.default_rng(0).integers(0, len(x), size=(REPS, len(x)))
    boot = np.sort(x[picks], axis=1)[:, (len(x) - 1) // 2]  # the lower median: no mean of an inf and a number
    return (float(np.sort(x)[(len(x) - 1) // 2]), float(np.quantile(boot, 0.025, method="lower")),
            float(np.quantile(boot, 0.975, method="higher")))


def _seconds(x: float) -> str:
    return "not reached" if math.isinf(x) else f"{x:,.0f}"


def seconds_rows(suite: str, runs: list[dict[str, Any]], store: Path) -> list[str]:
    """The suite's seconds-to-a-return table: per env with a random and a best score, each library's median seconds
    to :data:`TARGET` of the way from one to the other, its interval, how many seeds got there, and SB3's median over
    ppo_td's."""
    rows = []
    for task in SUITES[suite]:
        threshold = threshold_of(task, store)
        if threshold is None:
            continue
        cells, medians = [task.env_id, _fmt(threshold)], {}
        for library in LIBRARIES:
            mine = _runs_of(runs, task, library)
            if not mine:
                cells.append("")
                continue
            values = [seconds_to(r, threshold) for r in mine]
            medians[library], lo, hi = median_interval(values)
            reached = sum(not math.isinf(v) for v in values)
            cells.append(f"{_seconds(medians[library])} [{_seconds(lo)}, {_seconds(hi)}] ({reached} of {len(mine)})")
        if not medians:
            continue
        both = [medians.get(lib, math.inf) for lib in LIBRARIES]
        cells.append(f"{both[1] / both[0]:.2f}x" if not any(map(math.isinf, both)) else "-")
        rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", f"Seconds to a return: the training seconds until the mean of the last 100 episodes first reached "
            f"{TARGET:.0%} of the way from the random score to the best published one (the threshold); the lower "
            "median over seeds, its 95% bootstrap interval, and how many seeds reached it:", "",
            "| env | threshold | ppo_td | Stable-Baselines3 | SB3 / ppo_td (above 1: ppo_td sooner) |",
            "|---|---|---|---|---|", *rows]


def suite_section(suite: str, runs: list[dict[str, Any]], store: Path, plots: bool = True) -> list[str]:
    """The tables of one suite, its normalized IQM and its plots (written beside the report; with ``plots`` False,
    the plots already there are named and none is drawn)."""
    rows, normalized, envs, notes = suite_scores(suite, runs, store)
    if not rows:
        return [f"## {suite}", "", "No finished runs in the store yet.", ""]
    lines = [f"## {suite}", "", "| env | library / anchor | seeds | last 100 episodes: mean +- std over seeds | median "
             "| IQM [95% CI] | deterministic eval (10 episodes; one cut at the step cap counts with the reward it "
             "reached): mean +- std over seeds | minutes per run "
             "| frames/s |", "|---|---|---|---|---|---|---|---|---|", *rows]

    def drawn(path: Path, draw: Callable[[], Path | None]) -> Path | None:
        return draw() if plots else (path if path.exists() else None)

    if envs:
        lines += ["", f"Normalized (random policy 0, best published PPO 1) over {len(envs)} envs ({', '.join(envs)}), "
                  "the seeds every one of them has:", "", "| library | seeds | IQM [95% CI] | mean [95% CI] |",
                  "|---|---|---|---|"]
        for library, (seeds, (iqm, lo, hi), (mean, mlo, mhi)) in aggregates(normalized, envs).items():
            lines.append(f"| {LABEL[library]} | {', '.join(map(str, seeds))} | {iqm:.2f} [{lo:.2f}, {hi:.2f}] | "
                         f"{mean:.2f} [{mlo:.2f}, {mhi:.2f}] |")
        path = store / f"{suite}_profile.png"
        profile = drawn(path, lambda: plot_profile(suite, normalized, envs, path))
        if profile:
            lines += ["", f"Performance profile: `{profile.name}`."]
    path = store / f"{suite}_curves.png"
    seconds = seconds_rows(suite, runs, store)
    lines += seconds
    curves = drawn(path, lambda: plot_curves(suite, SUITES[suite], runs, path))
    if curves:  # (a table above ends at a blank line)
        lines += ([""] if seconds or not envs else []) + [f"Curves: `{curves.name}`."]
    lines += ["", "Normalization and notes: " + "; ".join(notes) + ".", ""] if notes else [""]
    return lines


def seed_matrix(per_env: dict[str, dict[int, float]], envs: list[str]) -> tuple[list[int], np.ndarray | None]:
    """The scores of the seeds every one of ``envs`` has, as ``[seeds, envs]`` (None where they share none)."""
    if not all(e in per_env for e in envs):
        return [], None
    seeds = sorted(set.intersection(*(set(per_env[e]) for e in envs)))
    if not seeds:
        return [], None
    return seeds, np.array([[per_env[e][seed] for e in envs] for seed in seeds])


def plot_profile(suite: str, normalized: dict[str, dict[str, dict[int, float]]], envs: list[str],
                 path: Path) -> Path | None:
    """rliable's performance profile of the normalized scores (the fraction of runs above each score)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import plot_utils

    scores = {}
    for library in LIBRARIES:
        _, matrix = seed_matrix(normalized[library], envs)
        if matrix is not None:
            scores[LABEL[library]] = matrix
    if not scores:
        return None
    taus = np.linspace(0.0, 1.2, 61)
    profiles, cis = _seeded(rly.create_performance_profile, scores, taus, reps=REPS)
    fig, ax = plt.subplots(figsize=(6, 4))
    plot_utils.plot_performance_profiles(profiles, taus, performance_profile_cis=cis, ax=ax,
                                         colors=dict(zip(scores, ("C0", "C1"), strict=False)))
    ax.set_title(f"{suite}: performance profile over {len(envs)} envs")
    ax.legend(list(scores), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_report(suites: list[str], store: Path, plots: bool = True, write: bool = True) -> str:
    """The report of ``suites`` from ``store`` as Markdown, also written to ``store/report.md`` (unless ``write`` is
    False); ``plots`` False names the plots already in the store instead of drawing them."""
    runs = read_store(store)
    commits = sorted({r["commit"][:12] for r in runs if r["suite"] in suites})
    count = sum(r["suite"] in suites for r in runs)
    lines = [f"# Multi-seed returns ({dt.date.today().isoformat()})", "",
             f"From `{store.name}/runs.jsonl`: {count} run{'' if count == 1 else 's'} of {', '.join(suites)} "
             "(the tables take the latest run of each config and seed; runs of a preset since changed stay "
             f"in the store) at commits {', '.join(commits) or '-'}; made by `python -m benchmarks returns "
             f"{' '.join(suites)}`, this report by the same command with `--report`. One torch thread per run, "
             "runs one or two at a time on a 2-core machine."
             + (" An evaluation cell marked \"(starts shared by seeds)\" holds ppo_td runs from before commit "
                f"{SEEDED_PER_RUN} (2026-11-29), whose evaluation env copy i was seeded with the run's seed + 10,000 + "
                "i, so seeds 1 to 5 shared most of their start states; since, each run's starts come from its own "
                "seed (`benchmarks.store_history`)."  # as the stored report.md says it (now benchmarks/returns/)
                if any(r.get("eval_starts") == "shared" for r in runs if r["suite"] in suites) else ""), ""]
    for suite in suites:
        lines += suite_section(suite, runs, store, plots)
    text = "\n".join(lines).rstrip() + "\n"
    if write:
        (store / "report.md").write_text(text)
    return text
