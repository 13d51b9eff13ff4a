"""The asymmetric actor-critic measured (issue 62): a critic reading the true state against one reading the actor's
noisy observation, paired by seed.

    python -m benchmarks asymmetric                                   # Pendulum-v1, noise 0.5, seeds 1-5
    python -m benchmarks asymmetric --noise 0.3 --seeds 1 2 3 --store /tmp/asym

The env is ``ppo_td.envs.partial:noisy_sensors``: Pendulum-v1's observation with Gaussian noise of std ``--noise``
as the ``"policy"`` entry (what the actor reads in every variant) and the observation itself as ``"critic"``. The
``pendulum`` preset otherwise (8 copies x 256 steps, both normalizations, 100k frames). Variants, the seed the same
in each (so the same noise draws and starts):

- ``symmetric``: the critic reads ``"policy"`` too (what a library without separate critic inputs trains);
- ``asymmetric``: the critic reads ``"critic"`` (``--model.actor-keys policy --model.critic-keys critic``);
- ``noise-free``: both read ``"critic"``: the ceiling, a policy that sees the state.

Each finished run is written to ``STORE/runs.jsonl`` at once (a rerun skips finished runs): the mean return of the
last 100 training episodes and the deterministic evaluation's mean over 10 episodes (on the noisy observation, as
deployed). Prints the table and the paired differences (a 95% bootstrap interval over seeds, a fixed generator).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = {"symmetric": (("policy",), ("policy",)), "asymmetric": (("policy",), ("critic",)),
            "noise-free": (("critic",), ("critic",))}
"""Each variant's (model.actor_keys, model.critic_keys)."""
ENV_ID = "ppo_td.envs.partial:noisy_sensors"


def config_of(variant: str, seed: int, noise: float, frames: int | None = None) -> Any:
    """The ``pendulum`` preset on the noisy env with ``variant``'s reads."""
    from ppo_td import get_preset

    base = get_preset("pendulum")
    actor_keys, critic_keys = VARIANTS[variant]
    return dataclasses.replace(
        base, seed=seed, total_frames=frames or base.total_frames, eval_episodes=10,
        env=dataclasses.replace(base.env, env_id=ENV_ID, kwargs=(f"noise_std={noise}",)),
        model=dataclasses.replace(base.model, actor_keys=actor_keys, critic_keys=critic_keys))


def one_run(variant: str, seed: int, noise: float, frames: int | None) -> dict[str, Any]:
    """Train one variant on one seed (in this process, one torch thread) and return its numbers."""
    from ppo_td import train

    returns: list[float] = []
    config = config_of(variant, seed, noise, frames)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        result = train(config, run_dir=Path(folder) / "run", threads=1, progress=False,
                       callbacks=[lambda metrics, _: returns.extend(e["return"] for e in metrics["ended_episodes"])])
    return {"variant": variant, "seed": seed, "noise": noise, "frames": config.total_frames,
            "last100": statistics.fmean(returns[-100:]), "eval": statistics.fmean(result.eval_returns),
            "seconds": time.perf_counter() - start}


def runs_of(store: Path, variants: list[str], seeds: list[int], noise: float, frames: int | None,
            say: Any, launch_missing: bool = True) -> list[dict[str, Any]]:
    """Every (variant, seed) run, finished ones read from ``store/runs.jsonl``; the others trained and appended."""
    path = store / "runs.jsonl"
    done = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    want = frames or config_of("symmetric", 1, noise).total_frames

    def found(variant: str, seed: int) -> dict[str, Any] | None:
        return next((r for r in done if (r["variant"], r["seed"], r["noise"], r["frames"]) ==
                     (variant, seed, noise, want)), None)

    for seed in seeds:
        for variant in variants:
            if found(variant, seed) is None and launch_missing:
                run = one_run(variant, seed, noise, want)
                store.mkdir(parents=True, exist_ok=True)
                with path.open("a") as f:
                    f.write(json.dumps(run) + "\n")
                done.append(run)
                say(f"{variant} seed {seed}: last-100 {run['last100']:.1f}, evaluation {run['eval']:.1f} "
                    f"({run['seconds']:.0f} s)")
    return [r for r in (found(v, s) for s in seeds for v in variants) if r is not None]


def table(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["| variant | actor reads | critic reads | seeds | last-100 training return | deterministic evaluation "
             "(10 episodes) |", "|---|---|---|---|---:|---:|"]
    for variant, (actor_keys, critic_keys) in VARIANTS.items():
        mine = sorted((r for r in runs if r["variant"] == variant), key=lambda r: r["seed"])
        if mine:
            lines.append(f"| {variant} | {', '.join(actor_keys)} | {', '.join(critic_keys)} | "
                         f"{', '.join(str(r['seed']) for r in mine)} | "
                         f"{_mean_std([r['last100'] for r in mine])} | {_mean_std([r['eval'] for r in mine])} |")
    return lines


def paired(runs: list[dict[str, Any]], variant: str, against: str, measure: str,
           resamples: int = 10_000) -> str | None:
    """``variant`` minus ``against`` on ``measure``, paired by seed: the mean, a 95% bootstrap interval and the
    seeds where it was higher."""
    theirs = {r["seed"]: r[measure] for r in runs if r["variant"] == against}
    diffs = [r[measure] - theirs[r["seed"]] for r in sorted(runs, key=lambda r: r["seed"])
             if r["variant"] == variant and r["seed"] in theirs]
    if not diffs:
        return None
    draw = random.Random(0)
    means = sorted(statistics.fmean(draw.choices(diffs, k=len(diffs))) for _ in range(resamples))
    low, high = means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]
    return (f"{variant} - {against} ({measure}), paired by seed: {statistics.fmean(diffs):+.1f}, 95% bootstrap "
            f"interval [{low:+.1f}, {high:+.1f}]; higher on {sum(d > 0 for d in diffs)} of {len(diffs)} seeds")


def _mean_std(values: list[float]) -> str:
    return f"{statistics.fmean(values):.1f} +- {statistics.pstdev(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks asymmetric", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--noise", type=float, default=0.5, help="std of the actor's observation noise (0.5)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--frames", type=int, default=None, help="frames a run (the preset's 100,352)")
    parser.add_argument("--store", type=Path, default=Path("asymmetric_runs"), help="DIR of runs.jsonl")
    parser.add_argument("--report-only", action="store_true", help="tabulate the finished runs, train none")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    runs = runs_of(args.store, args.variants, args.seeds, args.noise, args.frames, say,
                   launch_missing=not args.report_only)
    lines = [f"# Asymmetric actor-critic, Pendulum-v1 with observation noise {args.noise} "
             f"({datetime.date.today().isoformat()})", "",
             f"`python -m benchmarks {' '.join(['asymmetric', *(sys.argv[2:] if argv is None else argv)])}`", "",
             *table(runs), ""]
    lines += [f"- {line}" for line in (paired(runs, "asymmetric", "symmetric", m) for m in ("last100", "eval"))
              if line]
    text = "\n".join(lines) + "\n"
    args.store.mkdir(parents=True, exist_ok=True)
    (args.store / "asymmetric.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
