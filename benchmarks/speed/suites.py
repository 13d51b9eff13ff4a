"""The speed suites of ``python -m benchmarks``: ``quick`` (CartPole time to solve, ppo_td beside SB3 with RL Zoo's
settings and with the same hyperparameters; throughput at CleanRL's settings; the masked trading env), ``mujoco``
(HalfCheetah-v5 throughput at the published PPO MuJoCo settings; ``--full`` adds the 1M-frame runs of
``benchmarks/speed/mujoco.py``) and ``atari`` (ALE/Pong-v5 throughput at CleanRL's Atari settings). Each run is a
``benchmarks.common.worker`` process; the options, the header and the files are the harness's
(``benchmarks/common/harness.py``)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.common import run_worker
from benchmarks.common.harness import SOLVED, WINDOW, log_run, median_range, run, time_to_solve


def cartpole_solve(seeds: list[int], out: Path) -> list[str]:
    runs = {"ppo_td (cartpole preset)": dict(library="ppo_td", preset="cartpole"),
            "SB3, RL-Zoo CartPole settings": dict(library="sb3", preset="cartpole", sb3_zoo=True),
            "SB3, ppo_td's cartpole hyperparameters": dict(library="sb3", preset="cartpole")}
    results: dict[str, list[dict]] = {name: [] for name in runs}
    for seed in seeds:
        for name, spec in runs.items():
            result = run_worker({**spec, "seed": seed})
            result["solve"] = time_to_solve(result)
            results[name].append(result)
            log_run(out, "cartpole_solve", name, result)
    lines = ["| run | solved (eval >= 475) | frames to solve | seconds to solve | train steps/s | peak RSS MB |",
             "|---|---|---|---|---|---|"]
    for name, rs in results.items():
        solved = [r for r in rs if r["solve"] and r["eval_mean"] >= SOLVED]
        lines.append(f"| {name} | {len(solved)}/{len(rs)} | {median_range([r['solve'][0] for r in solved], ',.0f')} | "
                     f"{median_range([r['solve'][1] for r in solved], '.2f')} | "
                     f"{median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                     f"{median_range([r['peak_rss_mb'] for r in rs], '.0f')} |")
    ours, zoo = results["ppo_td (cartpole preset)"], results["SB3, RL-Zoo CartPole settings"]
    ratios = [z["solve"][1] / o["solve"][1] for o, z in zip(ours, zoo, strict=True) if o["solve"] and z["solve"]]
    lines.append(f"\nTime to solve, SB3-Zoo / ppo_td, pairwise per seed: {median_range(ratios, '.2f')} "
                 f"(values > 1: ppo_td faster).")
    _plot(results, out / "cartpole")
    return lines


def _peers(preset: str) -> tuple[str, ...]:
    """The libraries a throughput run times: ppo_td, SB3, and skrl where it is installed (not for Atari: skrl has no
    Atari preprocessing of its own)."""
    import importlib.util

    skrl = importlib.util.find_spec("skrl") is not None and preset != "atari"
    return ("ppo_td", "sb3", "skrl") if skrl else ("ppo_td", "sb3")


def throughput(seeds: list[int], out: Path, preset: str, frames: int, title: str, eval_episodes: int = 1) -> list[str]:
    pairs = []
    libraries = _peers(preset)
    for seed in seeds:
        pair = {}
        for library in libraries:
            result = run_worker(dict(library=library, preset=preset, seed=seed, total_frames=frames,
                                     eval_episodes=eval_episodes))
            pair[library] = result
            log_run(out, f"throughput_{preset}", library, result)
        pairs.append(pair)
    lines = [f"{title} ({frames:,} frames per run)", "",
             "| library | total steps/s | collection steps/s | update seconds per 1k frames | peak RSS MB |",
             "|---|---|---|---|---|"]
    for library in libraries:
        rs = [p[library] for p in pairs]
        lines.append(f"| {library} | {median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                     f"{median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                     f"{median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                     f"{median_range([r['peak_rss_mb'] for r in rs], '.0f')} |")
    lines.append("")
    for peer, name in (("sb3", "SB3"), ("skrl", "skrl")):
        if peer not in libraries:
            continue
        ratios = {what: median_range([p[peer][what] / p["ppo_td"][what] for p in pairs], ".2f")
                  for what in ("train_seconds", "collect_seconds", "update_seconds")}
        lines.append(f"ppo_td / {name}, pairwise per seed: total {ratios['train_seconds']}, collection "
                     f"{ratios['collect_seconds']}, update {ratios['update_seconds']} (speed ratios; above 1: ppo_td "
                     "faster).")
        if peer == "sb3":  # SB3 computes its values and GAE in its collection, ppo_td in its update: counted alike
            alike = {what: median_range([p["sb3"][what] / ours(p["ppo_td"], what) for p in pairs], ".2f")
                     for what in ("collect_seconds", "update_seconds")}
            lines.append(f"The same with ppo_td's advantage estimation (the critic's pass and GAE) counted in its "
                         f"collection, as SB3 counts its own: collection {alike['collect_seconds']}, update without "
                         f"the advantage estimation {alike['update_seconds']}.")
    if "skrl" in libraries:
        lines.append("skrl has no return-based reward scaling: where the preset normalizes rewards, skrl runs without.")
    return lines


def ours(result: dict, what: str) -> float:
    """ppo_td's collection or update seconds counted as SB3 counts its own: the advantage estimator's seconds (the
    critic's pass over the batch and GAE, ``advantage_seconds``) in the collection, not the update."""
    moved = result["advantage_seconds"]
    return result[what] + moved if what == "collect_seconds" else result[what] - moved


def masking(seeds: list[int], out: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.speed.masking", "--seeds", *map(str, seeds)],
                          capture_output=True, text=True, check=True)
    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            log_run(out, "masking", "ppo_td", json.loads(line))
    return ["Trading env (ppo_td/Trading-v0 masked vs TradingPenalty-v0), `trading` preset", "", *table]


def _plot(results: dict[str, list[dict]], stem: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for axis, index, label in (("frames", 0, "frames"), ("seconds", 1, "training seconds")):
        fig, ax = plt.subplots(figsize=(7, 4))
        for (name, rs), color in zip(results.items(), ("C0", "C1", "C2"), strict=False):
            for i, r in enumerate(rs):
                xs = [e[index] for e in r["episodes"]]
                ys = [e[2] for e in r["episodes"]]
                smooth = [statistics.fmean(ys[max(0, j - WINDOW + 1):j + 1]) for j in range(len(ys))]
                ax.plot(xs, smooth, color=color, alpha=0.8, label=name if i == 0 else None)
        ax.axhline(SOLVED, color="grey", linestyle=":")
        ax.set_xlabel(label)
        ax.set_ylabel(f"episode return (mean of last {WINDOW})")
        ax.set_title(f"CartPole-v1: return vs {label}")
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{stem}_return_vs_{axis}.png", dpi=100)
        plt.close(fig)


def quick(args: argparse.Namespace, out: Path) -> list[str]:
    """The quick suite's sections: CartPole time to solve, throughput at CleanRL's settings, action masking."""
    sections = ["## CartPole-v1: time to solve", "", *cartpole_solve(args.seeds, out), ""]
    sections += ["## Throughput at CleanRL's settings", "",
                 *throughput(args.seeds, out, "cleanrl", 25_600, "CartPole-v1, 4 envs x 128 steps, 4 x 4"), ""]
    sections += ["## Action masking", "", *masking(args.seeds, out), ""]
    return sections


def mujoco(args: argparse.Namespace, out: Path) -> list[str]:
    """The mujoco suite's sections: HalfCheetah-v5 throughput (``--full``: and the 1M-frame runs)."""
    sections = ["## HalfCheetah-v5 throughput, published PPO MuJoCo settings", "",
                *throughput(args.seeds, out, "halfcheetah", 20_480, "HalfCheetah-v5, 1 env x 2048, 10 x 32"), ""]
    if args.full:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.speed.mujoco", "--presets", "halfcheetah", "hopper",
                               "--seeds", *map(str, args.seeds), "--out", str(out / "mujoco.jsonl")],
                              capture_output=True, text=True, check=True)
        sections += ["## 1M frames", "", *[ln for ln in proc.stdout.splitlines() if ln.startswith("|")], ""]
    return sections


def atari(args: argparse.Namespace, out: Path) -> list[str]:
    """The atari suite's section: ALE/Pong-v5 throughput."""
    return ["## Atari (ALE/Pong-v5) throughput, CleanRL's Atari settings", "",
            *throughput(args.seeds, out, "atari", 10_240,
                        "ALE/Pong-v5, standard preprocessing, Nature CNN, 8 envs x 128, 4 x 4; "
                        "SB3 PPO('CnnPolicy') with its AtariWrapper", eval_episodes=0), ""]


def main(argv: list[str]) -> None:
    """``python -m benchmarks quick|mujoco|atari [--seeds ...] [--out DIR] [--full]`` (``argv``: all after
    ``python -m benchmarks``)."""
    run(argv, {"quick": quick, "mujoco": mujoco, "atari": atari})
