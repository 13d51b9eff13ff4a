"""Before a winner is named: the top trials, and the base config beside them, trained again on fresh seeds (seeds
no trial used), each run a run folder under ``confirm/``, each result a line of ``confirm.jsonl`` (a rerun skips
the runs done, so an interrupted confirmation continues). The winner is the best mean over those seeds."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, from_dict
from ppo_td.tuning.study import Settings
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
             threads: int | None) -> tuple[float, float]:
    """One confirmation run: its score and wall seconds (in a worker process, or here); its own lines go to
    ``output.log`` beside its run folder."""
    started = time.perf_counter()
    with output_to(Path(run_dir).parent / "output.log"):
        result = train(config, run_dir=run_dir, threads=threads, overwrite=True)
    return seed_score(result, score), time.perf_counter() - started


def confirm_top(study: Any, plan: Plan, settings: Settings, train: Callable[..., Any], top: int, seeds: int,
                say: Callable[[str], None]) -> tuple[list[dict[str, Any]], str | None, TrainConfig | None]:
    """Confirm the top trials and the base config on ``seeds`` fresh seeds (``settings.workers`` processes);
    returns the table (best first), the winner's name and config."""
    rows = candidates(study, plan, top) if top else []
    if not rows:
        return [], None, None
    store = plan.folder / "confirm.jsonl"
    done = _read(store)
    jobs = [(name, config, env_id, seed) for name, _, config in rows for seed in confirm_seeds_of(plan, seeds)
            for env_id in plan.env_ids if (name, env_id, seed) not in done]
    if jobs:
        say(f"confirming the top {len(rows) - 1} trial(s) and the base config on {seeds} fresh seed(s) each: "
            f"{len(jobs)} run(s)")
    _run_jobs(jobs, plan, settings, train, store, done, say)
    table = []
    for name, value, config in rows:
        per_seed = []
        for seed in confirm_seeds_of(plan, seeds):
            scores = [done[(name, env_id, seed)]["score"] for env_id in plan.env_ids]
            per_seed.append(sum(plan.normalized(e, s) for e, s in zip(plan.env_ids, scores, strict=True))
                            / len(scores))
        finite = [s for s in per_seed if not math.isnan(s)]
        mean, std = mean_std(finite) if finite else (math.nan, math.nan)
        table.append({"name": name, "search_value": value, "mean": mean, "std": std, "seeds": per_seed,
                      "config": config})
    table.sort(key=lambda r: -r["mean"] if not math.isnan(r["mean"]) else math.inf)
    best = table[0]
    return table, best["name"], best["config"]


def _run_jobs(jobs: list[tuple[str, TrainConfig, str, int]], plan: Plan, settings: Settings,
              train: Callable[..., Any], store: Path, done: dict, say: Callable[[str], None]) -> None:
    def folder_of(name: str, env_id: str, seed: int) -> str:
        label = name.replace(" ", "-")
        env = "" if len(plan.env_ids) == 1 else f"{env_id.replace('/', '_').replace(':', '_')}-"
        return str(plan.folder / "confirm" / label / f"{env}seed{seed}")

    def record(name: str, env_id: str, seed: int, score: float, seconds: float) -> None:
        line = {"name": name, "env": env_id, "seed": seed, "score": score, "seconds": round(seconds, 2)}
        with store.open("a") as out:
            out.write(json.dumps(line) + "\n")
        done[(name, env_id, seed)] = line
        say(f"confirmed {name} {env_id} seed {seed}: {score:.4g} ({len(done)} run(s) in {store.name})")

    configs = {(name, env_id, seed): dataclasses.replace(config, seed=seed,
                                                         env=dataclasses.replace(config.env, env_id=env_id))
               for name, config, env_id, seed in jobs}
    if settings.workers == 1:
        for key, config in configs.items():
            score, seconds = _run_one(train, config, folder_of(*key), plan.score, plan.threads)
            record(*key, score, seconds)
        return
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(settings.workers, mp_context=context) as pool:
        futures = {pool.submit(_run_one, train, config, folder_of(*key), plan.score, plan.threads): key
                   for key, config in configs.items()}
        pending = set(futures)
        while pending:
            finished, pending = concurrent.futures.wait(pending, timeout=5.0,
                                                        return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                score, seconds = future.result()
                record(*futures[future], score, seconds)


def _read(store: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    if not store.exists():
        return {}
    out = {}
    for line in store.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[(row["name"], row["env"], int(row["seed"]))] = row
    return out
