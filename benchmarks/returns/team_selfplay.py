"""Team self-play against training every group at once (issue 63, item 6), on VMAS simple_tag, measured in the team
arena.

    python -m benchmarks team_selfplay --seeds 1 2 3 --frames 120000 --store STORE

Each run trains the ``vmas-tag`` preset (BenchMARL's simple_tag: 3 adversaries chase 1 agent, 100 steps; 10 envs x
600 steps a batch) for ``--frames`` frames, one torch thread, in this process. Variants: ``simultaneous`` (every
group learns every batch, against the others' current policies: the preset as it is) and ``self`` (team self-play,
``env.opponent='self'``: one group learns at a time, ``--team-change`` frames a turn, the other playing its latest
policy or one of its own snapshots, taken every ``--snapshot-frames`` frames; ML-Agents' 100,000 and 20,000 are
scaled down here to fit the budget, and say so in the report). Each finished run is appended to
``STORE/runs.jsonl`` (a rerun skips it) and keeps its run folder in ``STORE/runs/`` (its final checkpoint, not
committed). Once every run is there, one team arena (``ppo-td arena``) plays every run's adversaries against every
run's agent, ``--episodes`` episodes a match, policies sampling as in training: ``STORE/arena_<frames>.json``,
and ``STORE/team_selfplay_<frames>.md`` with each variant's standing per group (its seeds' means over every
opponent) and the training returns. ``--self-frames``: the self-play runs' budget (equal seconds: their update
trains one group a batch).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.common.store import append_run, stored_runs

VARIANTS = ("simultaneous", "self")


def config_of(spec: dict[str, Any]) -> Any:
    """The config of one run: the vmas-tag preset with the variant's opponents."""
    from ppo_td.presets import get_preset

    base = get_preset("vmas-tag")
    fields = {} if spec["variant"] == "simultaneous" else {
        "opponent": "self", "team_change": spec["team_change"], "snapshot_frames": spec["snapshot_frames"]}
    return dataclasses.replace(base, env=dataclasses.replace(base.env, **fields), seed=spec["seed"],
                               total_frames=spec["frames"])


def _key(run: dict[str, Any]) -> tuple:
    return (run["variant"], run["seed"], run["frames"], run["team_change"], run["snapshot_frames"])


def run_name(spec: dict[str, Any]) -> str:
    return (f"tag-{spec['variant']}-seed{spec['seed']}-{spec['frames']}-{spec['team_change']}-"
            f"{spec['snapshot_frames']}")


def one_run(spec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Train one run into ``run_dir``; its training returns per group (the last tenth of its episodes) and the
    final evaluation's."""
    from ppo_td import train

    config = config_of(spec)
    ended: list[dict[str, float]] = []

    def record(metrics: dict[str, Any], _: Any) -> None:
        ended.extend(metrics["ended_episodes"])

    start = time.perf_counter()
    result = train(config, run_dir=str(run_dir), threads=1, progress=False, callbacks=[record], overwrite=True)
    seconds = time.perf_counter() - start
    tail = ended[len(ended) - max(1, len(ended) // 10):]
    groups = [k.split("/", 1)[1] for k in (tail[0] if tail else {}) if k.startswith("return/")]
    evaluation = result.evaluation
    return {**spec, "seconds": seconds, "run_dir": str(run_dir),
            "last_tenth": {g: statistics.fmean(e[f"return/{g}"] for e in tail) for g in groups},
            "eval": {g: statistics.fmean(v) for g, v in (evaluation.groups.items() if evaluation else [])}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks team_selfplay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--frames", type=int, default=120_000, help="frames a run (120,000)")
    parser.add_argument("--self-frames", type=int, default=None,
                        help="frames a self-play run (default --frames; more for equal seconds: one group's update "
                             "a batch)")
    parser.add_argument("--team-change", type=int, default=12_000, help="self: frames a group's turn (12,000)")
    parser.add_argument("--snapshot-frames", type=int, default=6_000, help="self: frames between snapshots (6,000)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes a match in the arena (20)")
    parser.add_argument("--store", type=Path, default=Path("team_selfplay_runs"))
    parser.add_argument("--no-arena", action="store_true", help="train only (another process plays the arena)")
    args = parser.parse_args(argv)
    done = stored_runs(args.store, _key)
    runs = []
    for seed in args.seeds:
        for variant in args.variants:
            frames = args.self_frames if variant == "self" and args.self_frames else args.frames
            spec = {"variant": variant, "seed": seed, "frames": frames, "team_change": args.team_change,
                    "snapshot_frames": args.snapshot_frames}
            run = done.get(_key(spec))
            if run is None:
                run = one_run(spec, args.store / "runs" / run_name(spec))
                append_run(args.store, run)
                print(f"{variant} seed {seed}: last tenth {run['last_tenth']} ({run['seconds']:.0f} s)", flush=True)
            runs.append(run)
    if args.no_arena:
        return 0
    from ppo_td.deploy.arena import write_json
    from ppo_td.deploy.team_arena import team_arena

    result = team_arena([r["run_dir"] for r in runs], episodes=args.episodes, seed=0)
    suffix = f"_self{args.self_frames}" if args.self_frames else ""
    write_json(result, args.store / f"arena_{args.frames}{suffix}.json")
    variant_of = {Path(r["run_dir"]).name: r["variant"] for r in runs}
    budget = f"{args.frames:,} frames" + (f", self-play {args.self_frames:,}" if args.self_frames else "")
    lines = [f"# Team self-play on VMAS simple_tag, {budget} ({datetime.date.today().isoformat()})", "",
             f"`python -m benchmarks team_selfplay {' '.join(argv)}`", "",
             f"self: a turn of {args.team_change:,} frames, a snapshot every {args.snapshot_frames:,} (ML-Agents' "
             "100,000 and 20,000 scaled down to the budget), half the batches against the latest policy.", "",
             "Training: each group's reward per agent over the last tenth of each run's episodes, per seed:", "",
             "| variant | adversary | agent | seconds (median) |", "|---|---|---|---:|"]
    for variant in args.variants:
        mine = [r for r in runs if r["variant"] == variant]
        cells = [", ".join(f"{r['last_tenth'].get(g, float('nan')):.1f}" for r in mine) for g in result.groups]
        lines.append(f"| {variant} | {' | '.join(cells)} | {statistics.median(r['seconds'] for r in mine):.0f} |")
    lines += ["", f"The team arena ({args.episodes} episodes a match, every run's adversaries against every run's "
              f"agent, policies sampling): each run's mean reward per agent against every opponent; within a group "
              "the runs met the same opponents and episodes, so they compare.", "",
              "| group | variant | per seed (mean [95% interval]) | mean over seeds |", "|---|---|---|---:|"]
    for group in result.groups:
        standing = {s.run: s for s in result.standings(group)}
        for variant in args.variants:
            mine = [standing[name] for name, v in variant_of.items() if v == variant and name in standing]
            cells = ", ".join(f"{s.mean:.1f} [{s.low:.1f}, {s.high:.1f}]" for s in mine)
            lines.append(f"| {group} | {variant} | {cells} | {statistics.fmean(s.mean for s in mine):.1f} |")
    text = "\n".join(lines) + "\n"
    (args.store / f"team_selfplay_{args.frames}{suffix}.md").write_text(text)
    print(text)
    return 0
