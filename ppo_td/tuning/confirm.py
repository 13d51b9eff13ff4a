"""Before a winner is named: the top trials, and the base config beside them, trained again on fresh seeds (seeds
no trial used), each run a run folder under ``confirm/``, each result a line of ``confirm.jsonl`` (a rerun skips
the runs done, so an interrupted confirmation continues). The winner is the best mean over those seeds."""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, from_dict
from ppo_td.tuning.study import Settings, stop_processes
from ppo_td.tuning.trial import Plan, mean_std, output_to, seed_score

BASE = "base config"
"""The confirmation row of the base config (what the study started from), beside the tuned ones."""

CONFIRM_SEED_OFFSET = 1_000
"""Confirmation seeds start here past the base seed: no trial trained on them (trials use base seed + 0..K-1)."""


def confirm_seeds_of(plan: Plan, count: int) -> list[int]:
    return [plan.base.seed + CONFIRM_SEED_OFFSET + j for j in range(count)]


def candidates(study: Any, plan: Plan, top: int) -> list[tuple[str, float | None, TrainConfig]]:
    """The rows to confirm: the ``top`` complete trials by value (name, search value, config), then the base
    config (its search value None: it was not a trial) with the tuning budget's frames."""
    from optuna.trial import TrialState

    complete = sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: -t.value)
    rows = [(f"trial {t.number}", float(t.value), from_dict(t.user_attrs["config"])) for t in complete[:top]
            if "config" in t.user_attrs]
    if rows:
        rows.append((BASE, None, dataclasses.replace(plan.base, total_frames=plan.frames)))
    return rows


def _run_one(train: Callable[..., Any], config: TrainConfig, run_dir: str, score: str,
             threads: int | None) -> tuple[float, float, str | None]:
    """One confirmation run: its score, wall seconds and, where it has no score, why (a divergence, no episode);
    its own lines go to ``output.log`` beside its run folder."""
    from ppo_td.training import NonFiniteError

    started = time.perf_counter()
    try:
        with output_to(Path(run_dir).parent / "output.log"):
            result = train(config, run_dir=run_dir, threads=threads, overwrite=True)
    except NonFiniteError as err:
        return math.nan, time.perf_counter() - started, f"diverged: {err}"
    value = seed_score(result, score)
    return value, time.perf_counter() - started, None if not math.isnan(value) else f"no score ({score})"


def _job(train: Callable[..., Any], config: TrainConfig, run_dir: str, score: str, threads: int | None,
         store: str, key: tuple[str, str, int]) -> None:
    """A confirmation run in a worker process, its line appended to the store (one short write: whole lines)."""
    value, seconds, why = _run_one(train, config, run_dir, score, threads)
    _append(Path(store), key, value, seconds, why)


def _append(store: Path, key: tuple[str, str, int], value: float, seconds: float, why: str | None) -> dict[str, Any]:
    name, env_id, seed = key
    line = {"name": name, "env": env_id, "seed": seed, "score": value, "seconds": round(seconds, 2),
            **({"why": why} if why else {})}
    with store.open("a") as out:
        out.write(json.dumps(line) + "\n")
    return line


def confirm_top(study: Any, plan: Plan, settings: Settings, train: Callable[..., Any], top: int, seeds: int,
                say: Callable[[str], None]) -> tuple[list[dict[str, Any]], str | None, TrainConfig | None]:
    """Confirm the top trials and the base config on ``seeds`` fresh seeds (``settings.workers`` processes);
    returns the table (best first: a row with a seed that diverged or scored nothing ranks last), the winner's name
    and config (None where no row scored on every seed)."""
    rows = candidates(study, plan, top) if top else []
    if not rows:
        return [], None, None
    store = plan.folder / "confirm.jsonl"
    done = _read(store, say)
    jobs = {(name, env_id, seed): dataclasses.replace(config, seed=seed,
                                                      env=dataclasses.replace(config.env, env_id=env_id))
            for name, _, config in rows for seed in confirm_seeds_of(plan, seeds) for env_id in plan.env_ids
            if (name, env_id, seed) not in done}
    if jobs:
        say(f"confirming the top {len(rows) - 1} trial(s) and the base config on {seeds} fresh seed(s) each: "
            f"{len(jobs)} run(s)")
    _run_jobs(jobs, plan, settings, train, store, done, say)
    table = []
    for name, value, config in rows:
        per_seed = []
        for seed in confirm_seeds_of(plan, seeds):
            scores = [float(done[(name, env_id, seed)]["score"]) for env_id in plan.env_ids]
            per_seed.append(sum(plan.normalized(e, v) for e, v in zip(plan.env_ids, scores, strict=True))
                            / len(scores))
        mean, std = mean_std(per_seed) if not any(math.isnan(v) for v in per_seed) else (math.nan, math.nan)
        why = sorted({done[(name, e, s)].get("why") for s in confirm_seeds_of(plan, seeds) for e in plan.env_ids}
                     - {None})
        table.append({"name": name, "search_value": value, "mean": mean, "std": std, "seeds": per_seed,
                      "config": config, "why": why})
    table.sort(key=lambda r: -r["mean"] if not math.isnan(r["mean"]) else math.inf)
    best = table[0]
    if math.isnan(best["mean"]):
        return table, None, None
    return table, best["name"], best["config"]


def _run_jobs(jobs: dict[tuple[str, str, int], TrainConfig], plan: Plan, settings: Settings,
              train: Callable[..., Any], store: Path, done: dict, say: Callable[[str], None]) -> None:
    """Each job's run (in ``settings.workers`` processes), its line in the store as it ends; Ctrl-C stops them
    (what ended is kept: a rerun skips it)."""
    def folder_of(name: str, env_id: str, seed: int) -> str:
        label = name.replace(" ", "-")
        env = "" if len(plan.env_ids) == 1 else f"{env_id.replace('/', '_').replace(':', '_')}-"
        return str(plan.folder / "confirm" / label / f"{env}seed{seed}")

    def said(key: tuple[str, str, int], line: dict[str, Any]) -> None:
        done[key] = line
        extra = f" ({line['why']})" if line.get("why") else ""
        say(f"confirmed {key[0]} {key[1]} seed {key[2]}: {float(line['score']):.4g}{extra}")

    if settings.workers == 1:
        for key, config in jobs.items():
            said(key, _append(store, key, *_run_one(train, config, folder_of(*key), plan.score, plan.threads)))
        return
    context = multiprocessing.get_context("spawn")
    waiting = list(jobs.items())
    running: dict[tuple[str, str, int], Any] = {}
    try:
        while waiting or running:
            while waiting and len(running) < settings.workers:
                key, config = waiting.pop(0)
                process = context.Process(target=_job, args=(train, config, folder_of(*key), plan.score,
                                                             plan.threads, str(store), key))
                process.start()
                running[key] = process
            time.sleep(1.0)
            for key, process in list(running.items()):
                if process.is_alive():
                    continue
                process.join(timeout=5)
                del running[key]
                line = _read(store).get(key)
                if line is None:  # the process died before writing: said as a run without a score
                    line = _append(store, key, math.nan, 0.0, f"its process ended with exit code {process.exitcode}")
                said(key, line)
    except BaseException:
        stop_processes(list(running.values()))
        raise


def _read(store: Path, say: Callable[[str], None] | None = None) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The confirmation runs done (a line cut short by a kill mid-write is skipped: that run runs again)."""
    if not store.exists():
        return {}
    out = {}
    for line in store.read_text().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[(row["name"], row["env"], int(row["seed"]))] = row
        except (ValueError, KeyError, TypeError):
            if say is not None:
                say(f"{store.name}: a line cut short is skipped (that run runs again): {line[:80]}")
    return out
