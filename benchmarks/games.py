"""Turn-based games (issue 63): PPO on a PettingZoo classic game against a random opponent, or in self-play
against its own snapshots, evaluated against a random player and a one-move heuristic.

    python -m benchmarks games                                  # connect four, 3 seeds, both variants
    python -m benchmarks games --game tictactoe_v3 --frames 100000

Each run trains the ``generic`` preset (SB3's PPO defaults: 2,048 steps a batch, 10 epochs of 32 minibatches of 64,
lr 3e-4) on ``--envs`` copies of the game, one torch thread, in this process; variants: ``random`` (every game
against a uniformly random legal player) and ``self`` (``env.opponent='self'``: ML-Agents' defaults, a snapshot
every 20,000 frames, a window of 10, half the games against the latest policy, the random player as an anchor).
The final policy then plays ``--games`` games (deterministic: the policy's mode; its seat drawn per game) against
the random player and against connect four's win-or-block heuristic: wins, draws and losses with a Wilson 95%
interval on the win rate. Each finished run is appended to ``STORE/runs.jsonl`` (a rerun skips it); the table goes
to ``STORE/games_<game>.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

OPPONENTS = ("random", "connect-four-heuristic")


def config_of(spec: dict[str, Any]) -> Any:
    """The config of one run."""
    from ppo_td import EnvConfig, get_preset

    base = get_preset("generic")
    selfplay = {"opponent": "self", "anchors": ("random",)} if spec["variant"] == "self" else {}
    env = EnvConfig(f"pettingzoo.classic.{spec['game']}:env", num_envs=spec["envs"], **selfplay)
    return dataclasses.replace(base, env=env, seed=spec["seed"], total_frames=spec["frames"], eval_episodes=0)


def versus(actor: Any, config: Any, opponent: str, games: int, seed: int) -> dict[str, int]:
    """Wins, draws and losses of ``actor`` (its mode) in ``games`` games against ``opponent``."""
    from ppo_td.training.evaluation import evaluate

    env = dataclasses.replace(config.env, opponent=opponent, anchors=(), num_envs=1)
    returns = evaluate(actor, env, games, seed=seed).returns
    return {"win": sum(r > 0 for r in returns), "draw": sum(r == 0 for r in returns),
            "loss": sum(r < 0 for r in returns)}


def one_run(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one run and play its final policy against the fixed opponents."""
    import warnings

    from ppo_td import train

    warnings.filterwarnings("ignore", message="The old environment creation API")
    config = config_of(spec)
    episodes: list[tuple[int, float]] = []

    def record(metrics: dict[str, Any], _: Any) -> None:
        episodes.extend((int(e["frames"]), float(e["return"])) for e in metrics["ended_episodes"])

    start = time.perf_counter()
    result = train(config, threads=1, progress=False, callbacks=[record])
    seconds = time.perf_counter() - start
    against = {o: versus(result.actor, config, o, spec["games"], seed=10_000 + spec["seed"]) for o in OPPONENTS
               if o == "random" or spec["game"] == "connect_four_v3"}
    return {**spec, "seconds": seconds, "episodes": episodes, "against": against}


def _key(run: dict[str, Any]) -> tuple:
    return run["game"], run["variant"], run["seed"], run["frames"], run["envs"], run["games"]


def wilson(wins: int, n: int) -> tuple[float, float]:
    """The Wilson 95% interval of a rate of ``wins`` in ``n``."""
    if n == 0:
        return math.nan, math.nan
    z, p = 1.96, wins / n
    middle, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (middle - half) / (1 + z * z / n), (middle + half) / (1 + z * z / n)


def table(runs: list[dict[str, Any]], variants: list[str]) -> list[str]:
    """One row per variant and opponent: the seeds' win/draw/loss and the pooled win rate's interval."""
    lines = ["| trained against | played against | seeds | wins / draws / losses per seed | win rate (pooled, Wilson "
             "95%) | training seconds (median) |", "|---|---|---|---|---:|---:|"]
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        for opponent in OPPONENTS:
            counts = [r["against"][opponent] for r in mine if opponent in r["against"]]
            if not counts:
                continue
            wins, n = sum(c["win"] for c in counts), sum(sum(c.values()) for c in counts)
            low, high = (max(0.0, x) for x in wilson(wins, n))
            per_seed = ", ".join(f"{c['win']}/{c['draw']}/{c['loss']}" for c in counts)
            lines.append(f"| {variant} | {opponent} | {', '.join(str(r['seed']) for r in mine)} | {per_seed} | "
                         f"{wins / n:.3f} [{low:.3f}, {high:.3f}] | "
                         f"{statistics.median(r['seconds'] for r in mine):.0f} |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks games", description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="connect_four_v3", help="a PettingZoo classic game (connect_four_v3)")
    parser.add_argument("--variants", nargs="+", choices=["random", "self"], default=["random", "self"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--frames", type=int, default=200_000, help="the learner's steps a run (200,000)")
    parser.add_argument("--envs", type=int, default=8, help="games played at once (8)")
    parser.add_argument("--games", type=int, default=500, help="games against each fixed opponent (500)")
    parser.add_argument("--store", type=Path, default=Path("games_runs"))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    path = args.store / "runs.jsonl"
    done = {_key(r): r for r in (json.loads(line) for line in (path.read_text().splitlines() if path.exists() else [])
                                 if line.strip())}
    runs = []
    for seed in args.seeds:
        for variant in args.variants:
            spec = {"game": args.game, "variant": variant, "seed": seed, "frames": args.frames, "envs": args.envs,
                    "games": args.games}
            run = done.get(_key(spec))
            if run is None and not args.report_only:
                run = one_run(spec)
                args.store.mkdir(parents=True, exist_ok=True)
                with path.open("a") as f:
                    f.write(json.dumps(run) + "\n")
                print(f"{variant} seed {seed}: {run['against']} ({run['seconds']:.0f} s)", flush=True)
            if run is not None:
                runs.append(run)
    lines = [f"# {args.game}: PPO against a random player and in self-play, {args.frames:,} frames "
             f"({datetime.date.today().isoformat()})", "", f"`python -m benchmarks games {' '.join(argv)}`", "",
             *table(runs, args.variants), ""]
    text = "\n".join(lines)
    args.store.mkdir(parents=True, exist_ok=True)
    (args.store / f"games_{args.game}.md").write_text(text)
    print(text)
    return 0
