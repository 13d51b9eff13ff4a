"""Turn-based games (issue 63): PPO on a PettingZoo classic game against a random opponent, or in self-play
against its own snapshots, evaluated against a random player and a one-move heuristic, and rated over training.

    python -m benchmarks games                                  # connect four, 3 seeds, random and self
    python -m benchmarks games --game tictactoe_v3 --frames 100000
    python -m benchmarks games --variants random self frozen --curves 20 --store STORE   # + rating curves

Each run trains the ``generic`` preset (SB3's PPO defaults: 2,048 steps a batch, 10 epochs of 32 minibatches of 64,
lr 3e-4) on ``--envs`` copies of the game, one torch thread, in this process; variants: ``random`` (every game
against a uniformly random legal player) and ``self`` (``env.opponent='self'``: ML-Agents' defaults, a snapshot
every 20,000 frames, a window of 10, half the games against the latest policy, the random player as an anchor),
``frozen`` (the ablation: self-play against one frozen opponent, its latest snapshot, renewed every 20,000 frames;
no pool, no anchor), ``heuristic`` (every game against the game's win-or-block heuristic: connect four's,
tic-tac-toe's), ``self-heuristic`` (self-play with the random player and the heuristic as anchors), ``mixed``
(each game against the random player or the heuristic, half and half: ``env.anchors`` beside a fixed opponent) and
``mixed-perfect`` (tic-tac-toe: the random player or the perfect player, a full game-tree search, half and half).
The final policy then plays ``--games`` games (deterministic: the policy's mode; its seat drawn per game) against
the random player, the game's win-or-block heuristic and (tic-tac-toe) the perfect player: wins, draws and losses
with a Wilson 95% interval on the win rate; in tic-tac-toe also exactly, every game it can play against the random
and the perfect player walked with its probability (:func:`ppo_td.envs.games.tictactoe_outcomes`). Each finished
run is appended to ``STORE/runs.jsonl`` (a rerun skips it); the table goes to ``STORE/games_<game>.md``.
``--settings`` trains another preset or fields: ``generic+env.negative_reward_scale=5.0+loss.mirror=
ppo_td.envs.mirrors:TicTacToeSymmetries+loss.mirror_augment=True`` (a loss weighed 5, the board's 8 symmetries).

``--curves N``: each run keeps a checkpoint every N iterations (in ``STORE/runs/``, not committed), and once every
run is done one ``ppo-td arena`` over all of them (every checkpoint of every variant and seed, and the anchors;
``--arena-games`` games a pair, policies sampling) rates them on one scale: ``STORE/arena_<game>_<frames>.json``,
the rating curves ``STORE/ratings_<game>_<frames>.png`` and a table of each variant's mean rating over seeds by
frames.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common.store import append_run, stored_runs
from ppo_td.deploy.arena import wilson
from ppo_td.envs.games import HEURISTICS, heuristic_for

OPPONENTS = ("random", *HEURISTICS.values(), "tictactoe-perfect")
VARIANTS = ("random", "self", "frozen", "heuristic", "self-heuristic", "mixed", "mixed-perfect")
PERFECT = {"tictactoe_v3": "tictactoe-perfect"}
"""The games with a perfect player here (a full game-tree search), by their PettingZoo names."""


def variant_fields(variant: str, game: str) -> dict[str, Any]:
    """The env config fields of a variant in ``game`` (the heuristic ones need the game's heuristic)."""
    heuristic = heuristic_for(env_id_of(game))
    if variant in ("heuristic", "self-heuristic", "mixed") and heuristic is None:
        raise ValueError(f"--variants {variant}: {game} has no win-or-block heuristic (only {', '.join(HEURISTICS)})")
    if variant == "mixed-perfect" and game not in PERFECT:
        raise ValueError(f"--variants {variant}: {game} has no perfect player (only {', '.join(PERFECT)})")
    return {"random": {},
            "self": {"opponent": "self", "anchors": ("random",)},
            "frozen": {"opponent": "self", "pool_size": 1, "latest_ratio": 0.0},
            "heuristic": {"opponent": heuristic},
            "self-heuristic": {"opponent": "self", "anchors": ("random", heuristic)},
            "mixed": {"opponent": "random", "anchors": (heuristic,)},
            "mixed-perfect": {"opponent": "random", "anchors": (PERFECT.get(game),)}}[variant]


def env_id_of(game: str) -> str:
    """The env id of a PettingZoo classic game (``connect_four_v3``)."""
    return f"pettingzoo.classic.{game}:env"


def config_of(spec: dict[str, Any]) -> Any:
    """The config of one run: the settings' preset (its ``env.*`` fields changed there kept) on the game, with the
    variant's opponents."""
    from .suites import settings_config

    base = settings_config(spec.get("settings", "generic"))
    env = dataclasses.replace(base.env, env_id=env_id_of(spec["game"]), num_envs=spec["envs"],
                              **variant_fields(spec["variant"], spec["game"]))
    return dataclasses.replace(base, env=env, seed=spec["seed"], total_frames=spec["frames"], eval_episodes=0)


def versus(actor: Any, config: Any, opponent: str, games: int, seed: int) -> dict[str, int]:
    """Wins, draws and losses of ``actor`` (its mode) in ``games`` games against ``opponent``."""
    from ppo_td.training.evaluation import evaluate

    env = dataclasses.replace(config.env, opponent=opponent, anchors=(), num_envs=1)
    returns = evaluate(actor, env, games, seed=seed).returns
    return {"win": sum(r > 0 for r in returns), "draw": sum(r == 0 for r in returns),
            "loss": sum(r < 0 for r in returns)}


def one_run(spec: dict[str, Any], run_dir: Path | None = None) -> dict[str, Any]:
    """Train one run (into ``run_dir`` with a checkpoint every ``spec['curves']`` iterations, all kept, where
    given) and play its final policy against the fixed opponents."""
    import warnings

    from ppo_td import train

    warnings.filterwarnings("ignore", message="The old environment creation API")
    config = config_of(spec)
    episodes: list[tuple[int, float]] = []

    def record(metrics: dict[str, Any], _: Any) -> None:
        episodes.extend((int(e["frames"]), float(e["return"])) for e in metrics["ended_episodes"])

    with tempfile.TemporaryDirectory() as scratch:  # a run folder: the policy as load_policy gives it
        folder = {"run_dir": str(Path(scratch) / "run")} if run_dir is None else {
            "run_dir": str(run_dir), "checkpoint_every": spec["curves"], "keep_checkpoints": 10**6,
            "overwrite": True}
        start = time.perf_counter()
        result = train(config, threads=1, progress=False, callbacks=[record], **folder)
        seconds = time.perf_counter() - start
        found = exact(folder["run_dir"], config)
    against = {o: versus(result.actor, config, o, spec["games"], seed=10_000 + spec["seed"]) for o in OPPONENTS
               if o in ("random", heuristic_for(config.env.env_id), PERFECT.get(spec["game"]))}
    thinned = {"episodes_count": len(episodes), "episodes_every_20th": episodes[::20],  # (a 500,000-frame run
               "episodes_last100": episodes[-100:]}  # ends 130,000 games: megabytes a line in full)
    return {**spec, "seconds": seconds, **thinned, "against": against, **found}


def exact(run_dir: str, config: Any) -> dict[str, Any]:
    """Tic-tac-toe: the final policy's (its mode's) exact win, draw and loss rates against the random and the
    perfect player, every game it can play walked (:func:`ppo_td.envs.games.tictactoe_outcomes`), and how many
    positions it throws away; nothing for another game."""
    if config.env.env_id != env_id_of("tictactoe_v3"):
        return {}
    from ppo_td import load_policy
    from ppo_td.envs.games import tictactoe_outcomes

    policy = load_policy(run_dir)
    found = {o: tictactoe_outcomes(policy, o) for o in ("random", "tictactoe-perfect")}
    return {"exact": {o: {"win": out.win, "draw": out.draw, "loss": out.loss, "blunders": len(out.blunders)}
                      for o, out in found.items()}}


def _key(run: dict[str, Any]) -> tuple:
    return (run["game"], run["variant"], run["seed"], run["frames"], run["envs"], run["games"], run.get("curves", 0),
            run.get("settings", "generic"))


def _suffix(settings: str) -> str:
    """What the files of runs on other settings than ``generic`` carry in their names (a digest of the settings)."""
    return "" if settings == "generic" else "_" + hashlib.sha1(settings.encode()).hexdigest()[:8]


def run_name(spec: dict[str, Any]) -> str:
    """The folder of a run's checkpoints under ``STORE/runs``."""
    suffix = _suffix(spec.get("settings", "generic"))
    return f"{spec['game']}-{spec['variant']}-seed{spec['seed']}-{spec['frames']}{suffix}"


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
            low, high = wilson(wins, n)
            per_seed = ", ".join(f"{c['win']}/{c['draw']}/{c['loss']}" for c in counts)
            lines.append(f"| {variant} | {opponent} | {', '.join(str(r['seed']) for r in mine)} | {per_seed} | "
                         f"{wins / n:.3f} [{low:.3f}, {high:.3f}] | "
                         f"{statistics.median(r['seconds'] for r in mine):.0f} |")
    exact_runs = [r for r in runs if "exact" in r and r["variant"] in variants]
    if exact_runs:
        lines += ["", "Exact, every game the final policy (its mode) can play walked with its probability "
                  "(`ppo_td.envs.games.tictactoe_outcomes`): losses in 10,000 games, and the positions where its "
                  "move throws a won or drawn game away.", "",
                  "| trained against | seed | against a random player: losses in 10,000 | positions thrown away | "
                  "against the perfect player: losses in 10,000 | positions thrown away |",
                  "|---|---|---:|---:|---:|---:|"]
        for r in exact_runs:
            e = r["exact"]
            lines.append(f"| {r['variant']} | {r['seed']} | {e['random']['loss'] * 1e4:.1f} | "
                         f"{e['random']['blunders']} | {e['tictactoe-perfect']['loss'] * 1e4:.1f} | "
                         f"{e['tictactoe-perfect']['blunders']} |")
    return lines


def rate_checkpoints(args: argparse.Namespace, runs: list[dict[str, Any]]) -> list[str]:
    """One arena over every run's checkpoints and the anchors (kept in ``STORE/arena_<game>_<frames>.json``, played
    again only when its players changed; read as it is where the checkpoints are not here, e.g. in a clone); the
    rating table by variant and frames, the final policies head to head, and the curves' image."""
    from ppo_td.deploy.arena import arena, default_anchors, draw_curves

    checkpoints = [c for r in runs
                   for c in sorted((args.store / "runs" / run_name(r) / "checkpoints").glob("iter_*.pt"))]
    stored = args.store / f"arena_{args.game}_{args.frames}{_suffix(args.settings)}.json"
    data = json.loads(stored.read_text()) if stored.exists() else None
    if not checkpoints and data is None:
        return ["(no checkpoints to rate: run with --curves N)"]
    names = [str(c.relative_to(args.store)) for c in checkpoints]
    if checkpoints and (data is None or data.get("sources") != names
                        or data.get("games_per_pair") != args.arena_games):
        start = time.perf_counter()
        result = arena(checkpoints, games=args.arena_games, seed=0,
                       on_round=lambda done, rounds: print(f"arena round {done} of {rounds}", flush=True)
                       if done % 5 == 0 else None)
        data = {**result.to_dict(), "sources": names, "games_per_pair": args.arena_games,
                "seconds": time.perf_counter() - start}
        data["games"] = [[g["a"], g["b"], g["seat"], g["result"]] for g in data["games"]]  # a, b, a's seat, a's result
        stored.write_text(json.dumps(data) + "\n")
    by_player = {r["player"]: r for r in data["ratings"]}
    variant_of = {run_name(r): r["variant"] for r in runs}
    curves: dict[str, dict[int, list[float]]] = {}
    for player in data["players"]:
        run, _, _ = player["name"].partition("@")
        if run in variant_of:
            mu = by_player[player["name"]]["mu"]
            curves.setdefault(variant_of[run], {}).setdefault(player["frames"], []).append(mu)
    frames = sorted({f for curve in curves.values() for f in curve})
    anchors = default_anchors(args.game)
    lines = [f"Ratings (OpenSkill mu, mean +- std over seeds; one arena of {len(data['players'])} players, "
             f"{data['games_per_pair']} games a pair, {len(data['games']):,} games, policies sampling): anchors "
             + ", ".join(f"{a} {by_player[a]['mu']:.1f} +- {by_player[a]['sigma']:.1f}" for a in anchors), "",
             "| trained against | " + " | ".join(f"{f:,} frames" for f in frames) + " |",
             "|---|" + "---:|" * len(frames)]
    for variant, curve in curves.items():
        cells = [f"{statistics.mean(curve[f]):.1f} +- {statistics.pstdev(curve[f]):.1f}" if f in curve else ""
                 for f in frames]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    bands = {variant: (sorted(curve), [statistics.mean(curve[f]) for f in sorted(curve)],
                       [min(curve[f]) for f in sorted(curve)], [max(curve[f]) for f in sorted(curve)])
             for variant, curve in curves.items()}  # each variant's mean over seeds, the seeds' range shaded
    draw_curves(bands, {a: by_player[a]["mu"] for a in anchors},
                args.store / f"ratings_{args.game}_{args.frames}{_suffix(args.settings)}.png",
                f"{args.game}: ratings over training", "OpenSkill rating (mean over seeds)")
    return [*lines, "", *head_to_head(data, variant_of, anchors)]


def head_to_head(data: dict[str, Any], variant_of: dict[str, str], anchors: list[str]) -> list[str]:
    """The final policies' games by variant against every other variant's (every seed against every seed) and
    against the anchors, from the arena's pairs: the row's wins and losses (draws aside), the win rate's interval."""
    last = max(p["frames"] for p in data["players"] if p["frames"] is not None)
    side = {p["name"]: variant_of.get(p["name"].partition("@")[0]) for p in data["players"] if p["frames"] == last}
    side.update({a: f"the {a} anchor" for a in anchors})
    counts: dict[tuple[str, str], list[int]] = {}
    for pair in data["pairs"]:
        a, b = side.get(pair["a"]), side.get(pair["b"])
        if a is None or b is None or a == b:
            continue
        for row, column, won, lost in ((a, b, pair["wins"], pair["losses"]), (b, a, pair["losses"], pair["wins"])):
            if not row.startswith("the "):  # anchors are columns only
                tally = counts.setdefault((row, column), [0, 0])
                tally[0], tally[1] = tally[0] + won, tally[1] + lost
    lines = [f"Final policies ({last:,} frames) head to head, sampling (every seed against every seed):", "",
             "| trained against | played against | won / lost | win rate (Wilson 95%) |", "|---|---|---|---:|"]
    for (row, column), (won, lost) in sorted(counts.items()):
        low, high = wilson(won, won + lost)
        lines.append(f"| {row} | {column} | {won} / {lost} | {won / (won + lost):.3f} [{low:.3f}, {high:.3f}] |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks games", description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="connect_four_v3", help="a PettingZoo classic game (connect_four_v3)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["random", "self"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--frames", type=int, default=200_000, help="the learner's steps a run (200,000)")
    parser.add_argument("--envs", type=int, default=8, help="games played at once (8)")
    parser.add_argument("--games", type=int, default=500, help="games against each fixed opponent (500)")
    parser.add_argument("--store", type=Path, default=Path("games_runs"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--settings", default="generic",
                        help="the preset trained, maybe with fields changed: generic+loss.entropy_coeff=0.01 "
                             "(PRESET+section.field=VALUE+...; default generic)")
    parser.add_argument("--curves", type=int, default=0, metavar="N",
                        help="keep a checkpoint every N iterations and rate them all in one arena (0: none)")
    parser.add_argument("--arena-games", type=int, default=20, help="games a pair in the rating arena (20)")
    args = parser.parse_args(argv)
    done = stored_runs(args.store, _key)
    runs = []
    for seed in args.seeds:
        for variant in args.variants:
            spec = {"game": args.game, "variant": variant, "seed": seed, "frames": args.frames, "envs": args.envs,
                    "games": args.games, **({"curves": args.curves} if args.curves else {}),
                    **({"settings": args.settings} if args.settings != "generic" else {})}
            run = done.get(_key(spec))
            if run is None and not args.report_only:
                run = one_run(spec, args.store / "runs" / run_name(spec) if args.curves else None)
                append_run(args.store, run)
                print(f"{variant} seed {seed}: {run['against']} ({run['seconds']:.0f} s)", flush=True)
            if run is not None:
                runs.append(run)
    lines = [f"# {args.game}: PPO against a random player and in self-play, {args.frames:,} frames, settings "
             f"{args.settings} ({datetime.date.today().isoformat()})", "",
             f"`python -m benchmarks games {' '.join(argv)}`", "",
             *table(runs, args.variants), ""]
    if args.curves:
        lines += [*rate_checkpoints(args, runs), ""]
    text = "\n".join(lines)
    args.store.mkdir(parents=True, exist_ok=True)
    (args.store / f"games_{args.game}{_suffix(args.settings)}.md").write_text(text)
    print(text)
    return 0
