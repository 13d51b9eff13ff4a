"""Issue 62's parts measured with seeds, each variant against a baseline, paired by seed.

    python -m benchmarks asymmetric                        # Pendulum-v1, actor noise 0.5, seeds 1-5
    python -m benchmarks asymmetric --noise 0.3 --seeds 1 2 3 --store /tmp/asym
    python -m benchmarks symmetry                          # Pendulum-v1, seeds 1-5
    python -m benchmarks symmetry --env Walker2d-v5 --seeds 1 2 3 --variants none augment

**asymmetric** (the asymmetric actor-critic): ``ppo_td.envs.partial:noisy_sensors``, Pendulum-v1's observation
with Gaussian noise of std ``--noise`` as the ``"policy"`` entry (what the actor reads in the first two variants)
and the observation itself as ``"critic"``; the ``pendulum`` preset otherwise (8 copies x 256 steps, both
normalizations, 100k frames). Variants: ``symmetric`` (the critic reads ``"policy"`` too: a library without separate
critic inputs), ``asymmetric`` (the critic reads ``"critic"``), ``noise-free`` (both read ``"critic"``: the ceiling).

**symmetry** (data augmentation and the mirror loss, ``ppo_td.envs.mirrors``): the env's preset (``pendulum``,
100k frames; ``walker2d``, 1M) with ``none``, ``augment`` (``loss.mirror_augment``), ``mirror-loss``
(``loss.mirror_loss_coeff=0.1``) or ``both``.

The seed is the same in each variant (the same starts and noise draws). Each finished run is written to
``STORE/runs.jsonl`` at once (a rerun skips finished runs): the mean return of the last 100 training episodes, the
deterministic evaluation's mean over 10 episodes, the episodes' returns and the frames when the mean of 10 episodes
first reached the threshold (``--threshold``). Prints the table and each variant against the first, paired by seed (a
95% bootstrap interval over seeds, a fixed generator), and writes them to ``STORE/EXPERIMENT.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.store import append_run, stored_runs

NOISY = "ppo_td.envs.partial:noisy_sensors"
ASYMMETRIC = {"symmetric": (("policy",), ("policy",)), "asymmetric": (("policy",), ("critic",)),
              "noise-free": (("critic",), ("critic",))}
"""Each asymmetric variant's (model.actor_keys, model.critic_keys)."""
SYMMETRY = {"none": {}, "augment": {"mirror_augment": True}, "mirror-loss": {"mirror_loss_coeff": 0.1},
            "both": {"mirror_augment": True, "mirror_loss_coeff": 0.1}}
"""Each symmetry variant's loss fields."""
MIRRORS = {"Pendulum-v1": ("pendulum", "ppo_td.envs.mirrors:PendulumMirror", -400.0),
           "Walker2d-v5": ("walker2d", "ppo_td.envs.mirrors:Walker2dMirror", 2000.0)}
"""Each env's preset, mirror and default threshold."""
VARIANTS = {"asymmetric": ASYMMETRIC, "symmetry": SYMMETRY}


def config_of(experiment: str, variant: str, seed: int, env: str, noise: float, frames: int | None) -> Any:
    """The config of one run."""
    from ppo_td import get_preset

    if experiment == "asymmetric":
        base = get_preset("pendulum")
        actor_keys, critic_keys = ASYMMETRIC[variant]
        config = dataclasses.replace(
            base, env=dataclasses.replace(base.env, env_id=NOISY, kwargs=(f"noise_std={noise}",)),
            model=dataclasses.replace(base.model, actor_keys=actor_keys, critic_keys=critic_keys))
    else:
        preset, mirror, _ = MIRRORS[env]
        base = get_preset(preset)
        fields = SYMMETRY[variant]
        config = dataclasses.replace(base, loss=dataclasses.replace(base.loss, **(
            {"mirror": mirror, **fields} if fields else {})))
    return dataclasses.replace(config, seed=seed, total_frames=frames or config.total_frames, eval_episodes=10)


def one_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one run (in this process, one torch thread) and return its numbers."""
    from ppo_td import train

    episodes: list[tuple[int, float]] = []
    config = config_of(spec["experiment"], spec["variant"], spec["seed"], spec["env"], spec["noise"], spec["frames"])

    def record(metrics: dict[str, Any], _: Any) -> None:
        episodes.extend((int(e["frames"]), float(e["return"])) for e in metrics["ended_episodes"])

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        result = train(config, run_dir=str(Path(folder) / "run"), threads=1, progress=False, callbacks=[record])
    return {**spec, "frames": config.total_frames, "last100": statistics.fmean(r for _, r in episodes[-100:]),
            "eval": statistics.fmean(result.eval_returns), "episodes": episodes,
            "seconds": time.perf_counter() - start}


def _key(run: dict[str, Any]) -> tuple:
    return (run.get("experiment", "asymmetric"), run["variant"], run["seed"], run.get("env", "Pendulum-v1"),
            run["noise"] if run.get("experiment", "asymmetric") == "asymmetric" else None, run["frames"])


def runs_of(store: Path, specs: list[dict[str, Any]], say: Any, launch_missing: bool = True) -> list[dict[str, Any]]:
    """The run of every spec, finished ones read from ``store/runs.jsonl``; the others trained and appended."""
    done = stored_runs(store, _key)
    out = []
    for spec in specs:
        run = done.get(_key(spec))
        if run is None and launch_missing:
            run = one_run(spec)
            append_run(store, run)
            say(f"{spec['variant']} seed {spec['seed']}: last-100 {run['last100']:.1f}, evaluation {run['eval']:.1f} "
                f"({run['seconds']:.0f} s)")
        if run is not None:
            out.append(run)
    return out


def frames_to(run: dict[str, Any], threshold: float, window: int = 10) -> int | None:
    """Frames when the mean of the last ``window`` episodes first reached ``threshold``; None: never."""
    episodes = run.get("episodes") or []
    for i in range(window, len(episodes) + 1):
        if statistics.fmean(r for _, r in episodes[i - window:i]) >= threshold:
            return episodes[i - 1][0]
    return None


def table(runs: list[dict[str, Any]], variants: list[str], threshold: float | None) -> list[str]:
    head = "| variant | seeds | last-100 training return | deterministic evaluation (10 episodes) |"
    rule = "|---|---|---:|---:|"
    if threshold is not None:
        head, rule = head + f" frames to {threshold:g} (median; reached) |", rule + "---:|"
    lines = [head, rule]
    for variant in variants:
        mine = sorted((r for r in runs if r["variant"] == variant), key=lambda r: r["seed"])
        if not mine:
            continue
        line = (f"| {variant} | {', '.join(str(r['seed']) for r in mine)} | {_mean_std([r['last100'] for r in mine])} "
                f"| {_mean_std([r['eval'] for r in mine])} |")
        if threshold is not None:
            reached = [f for f in (frames_to(r, threshold) for r in mine) if f is not None]
            line += (f" {statistics.median(reached):,.0f} ({len(reached)} of {len(mine)}) |" if reached
                     else f" never (0 of {len(mine)}) |")
        lines.append(line)
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


def main(experiment: str, argv: list[str]) -> int:
    variants = VARIANTS[experiment]
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {experiment}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--variants", nargs="+", choices=list(variants), default=list(variants),
                        help="the first is the baseline of the paired differences")
    parser.add_argument("--frames", type=int, default=None, help="frames a run (the preset's)")
    parser.add_argument("--store", type=Path, default=Path(f"{experiment}_runs"), help="DIR of runs.jsonl")
    parser.add_argument("--report-only", action="store_true", help="tabulate the finished runs, train none")
    parser.add_argument("--threshold", type=float, default=None,
                        help="the return whose first reaching (mean of 10 episodes) is counted in frames "
                             "(symmetry: Pendulum -400, Walker2d 2,000)")
    if experiment == "asymmetric":
        parser.add_argument("--noise", type=float, default=0.5, help="std of the actor's observation noise (0.5)")
    else:
        parser.add_argument("--env", choices=list(MIRRORS), default="Pendulum-v1")
    args = parser.parse_args(argv)
    env = getattr(args, "env", "Pendulum-v1")
    noise = getattr(args, "noise", None)
    threshold = args.threshold if args.threshold is not None or experiment == "asymmetric" else MIRRORS[env][2]
    frames = args.frames or config_of(experiment, args.variants[0], 1, env, noise or 0.0, None).total_frames
    specs = [{"experiment": experiment, "variant": v, "seed": s, "env": env, "noise": noise, "frames": frames}
             for s in args.seeds for v in args.variants]
    runs = runs_of(args.store, specs, lambda line: print(line, flush=True), launch_missing=not args.report_only)
    what = f"observation noise {noise} on the actor's" if experiment == "asymmetric" else f"{env}"
    lines = [f"# {experiment}: {what}, {frames:,} frames ({datetime.date.today().isoformat()})", "",
             f"`python -m benchmarks {' '.join([experiment, *argv])}`", "",
             *table(runs, args.variants, threshold), ""]
    for variant in args.variants[1:]:
        lines += [f"- {line}" for line in (paired(runs, variant, args.variants[0], m) for m in ("last100", "eval"))
                  if line]
    text = "\n".join(lines) + "\n"
    args.store.mkdir(parents=True, exist_ok=True)
    name = experiment if env == "Pendulum-v1" else f"{experiment}_{env.split('-')[0].lower()}"
    (args.store / f"{name}.md").write_text(text)  # one report per env (symmetry.md, symmetry_walker2d.md)
    print(text)
    return 0
