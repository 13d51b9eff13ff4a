"""ppo_td's benchmark harness: ``python -m benchmarks SUITE [--seeds 1 2 3] [--out DIR]``.

Suites:
  quick   CartPole time-to-solve (ppo_td default preset vs Stable-Baselines3 with RL-Zoo's tuned
          settings and with the same hyperparameters), throughput at CleanRL's settings, the
          masked trading env.  A few minutes.
  mujoco  HalfCheetah-v5 throughput at the published PPO MuJoCo settings, ppo_td vs SB3
          (``--full`` adds the 1M-frame HalfCheetah-v5 and Hopper-v5 runs: about an hour).
  atari   ALE/Pong-v5 throughput at CleanRL's Atari settings, ppo_td vs SB3's PPO("CnnPolicy") (``.[atari]``).
  scaling frames/s and peak RSS of ppo_td and SB3 for 1, 4, 16, 64 CartPole copies (CleanRL's settings) and
          1, 8 HalfCheetah copies, a table and a plot (``python -m benchmarks.scaling`` is the worker-process one).
  recurrent  ppo_td's recurrent PPO vs sb3-contrib's RecurrentPPO on CartPole and Pendulum without velocities (the
          cartpole-novel and pendulum-novel presets): frames/s, frames to solve, returns.  About an hour.
  multiagent  ppo_td's MAPPO (and IPPO, ``--algorithms``) vs BenchMARL's on VMAS navigation at BenchMARL's defaults,
          600k frames: frames/s, collection and update time, the per-agent evaluation reward. BenchMARL runs from
          its own virtualenv (``--benchmarl-python``; it needs torchrl < 0.12).  About half an hour per seed;
          ``--frames 60000`` compares throughput in about six minutes a seed. ``--task simple_tag``: two agent
          groups (3 adversaries chase 1 agent; the vmas-tag preset), each group's reward beside the other's.
  latency per-call latency of a trained Policy (and its exported files) on one observation beside SB3's predict
          (``--calls``, ``--rounds``).  A few minutes.
  doctor  the cost of the doctor's audit per update.
  entry_points  the same run from ``ppo-td train``, ``ppo_td.train``, ``build_pipeline`` + ``run`` and a
          ``gym.make_vec`` object, beside a busy process: frames/s and the ratio to the CLI (``--seeds``, ``--busy``).
  returns multi-seed returns of suites of envs (classic, box2d, mujoco, toytext, minigrid, multiagent), ppo_td beside
          SB3 at the same settings, with a result store that a rerun continues and a report with rliable's intervals
          (``python -m benchmarks returns --help``).  Hours: run it with nohup.
  distributed  one run over 1, 2, ... ranks (torchrun): frames/s, the update's seconds and the speed-up per rank
          count on HalfCheetah-v5, and returns on 3 seeds with seconds to a target (``--help``).  About an hour.
  asymmetric  the asymmetric actor-critic on Pendulum with a noisy observation: the critic reading the state against
          reading the actor's observation, 5 seeds paired (``--help``).  About 10 minutes.
  symmetry  symmetry augmentation and the mirror loss (Pendulum; ``--env Walker2d-v5``) against neither, 5 seeds
          paired (``--help``).  About 15 minutes on Pendulum.
  rsl_rl  ppo_td beside rsl_rl (rsl-rl-lib) on Brax ant at rsl_rl's settings: frames/s, return against seconds
          (``--num-envs``, ``--iterations``, ``--device cuda`` on a GPU).  About 10 minutes here.
  games   PPO on a PettingZoo classic game (connect four) against a random player and in self-play, 3 seeds,
          played against a random player and a win-or-block heuristic (``--help``).  About an hour.
  soak    RSS over a long CartPole run and its slope after warm-up (``--minutes 5``).
  gpu     VMAS navigation at 4,096 and 32,768 envs (ppo_td beside TorchRL's own MAPPO parts) and Atari Pong with 16
          env processes (ppo_td beside SB3's SubprocVecEnv), on ``--device cuda``: frames/s, collection and update
          apart, reward against wall time (``python -m benchmarks gpu --help``).

Every run is a separate process (benchmarks/worker.py), one at a time, with
``torch.set_num_threads(1)``; the libraries alternate seed by seed so machine noise hits
both, and ratios are taken pairwise within a seed. Writes DIR/results.jsonl (one line
per run), DIR/results.md (the tables) and DIR/*.png (return vs frames and vs seconds).
Needs the ``bench`` extra (stable-baselines3, sb3-contrib, skrl; skrl is timed where it is installed).
"""

from __future__ import annotations

import argparse
import ast
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks import run_worker

SOLVED, WINDOW = 475.0, 20


run = run_worker  # one worker run in a fresh process; its JSON result


def time_to_solve(result: dict[str, Any]) -> tuple[int, float] | None:
    """(frames, seconds) when the mean of the last 20 training episodes first reached 475."""
    returns = [e[2] for e in result["episodes"]]
    for i in range(WINDOW, len(returns) + 1):
        if sum(returns[i - WINDOW:i]) / WINDOW >= SOLVED:
            return result["episodes"][i - 1][0], result["episodes"][i - 1][1]
    return None


def _median_range(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def cartpole_solve(seeds: list[int], out: Path) -> list[str]:
    runs = {"ppo_td (cartpole preset)": dict(library="ppo_td", preset="cartpole"),
            "SB3, RL-Zoo CartPole settings": dict(library="sb3", preset="cartpole", sb3_zoo=True),
            "SB3, ppo_td's cartpole hyperparameters": dict(library="sb3", preset="cartpole")}
    results: dict[str, list[dict]] = {name: [] for name in runs}
    for seed in seeds:
        for name, spec in runs.items():
            result = run({**spec, "seed": seed})
            result["solve"] = time_to_solve(result)
            results[name].append(result)
            _log(out, "cartpole_solve", name, result)
    lines = ["| run | solved (eval >= 475) | frames to solve | seconds to solve | train steps/s | peak RSS MB |",
             "|---|---|---|---|---|---|"]
    for name, rs in results.items():
        solved = [r for r in rs if r["solve"] and r["eval_mean"] >= SOLVED]
        lines.append(f"| {name} | {len(solved)}/{len(rs)} | {_median_range([r['solve'][0] for r in solved], ',.0f')} | "
                     f"{_median_range([r['solve'][1] for r in solved], '.2f')} | "
                     f"{_median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                     f"{_median_range([r['peak_rss_mb'] for r in rs], '.0f')} |")
    ours, zoo = results["ppo_td (cartpole preset)"], results["SB3, RL-Zoo CartPole settings"]
    ratios = [z["solve"][1] / o["solve"][1] for o, z in zip(ours, zoo, strict=True) if o["solve"] and z["solve"]]
    lines.append(f"\nTime to solve, SB3-Zoo / ppo_td, pairwise per seed: {_median_range(ratios, '.2f')} "
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
            result = run(dict(library=library, preset=preset, seed=seed, total_frames=frames,
                              eval_episodes=eval_episodes))
            pair[library] = result
            _log(out, f"throughput_{preset}", library, result)
        pairs.append(pair)
    lines = [f"{title} ({frames:,} frames per run)", "",
             "| library | total steps/s | collection steps/s | update seconds per 1k frames | peak RSS MB |",
             "|---|---|---|---|---|"]
    for library in libraries:
        rs = [p[library] for p in pairs]
        lines.append(f"| {library} | {_median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                     f"{_median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                     f"{_median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                     f"{_median_range([r['peak_rss_mb'] for r in rs], '.0f')} |")
    lines.append("")
    for peer, name in (("sb3", "SB3"), ("skrl", "skrl")):
        if peer not in libraries:
            continue
        ratios = {what: _median_range([p[peer][what] / p["ppo_td"][what] for p in pairs], ".2f")
                  for what in ("train_seconds", "collect_seconds", "update_seconds")}
        lines.append(f"ppo_td / {name}, pairwise per seed: total {ratios['train_seconds']}, collection "
                     f"{ratios['collect_seconds']}, update {ratios['update_seconds']} (speed ratios; above 1: ppo_td "
                     "faster).")
    if "skrl" in libraries:
        lines.append("skrl has no return-based reward scaling: where the preset normalizes rewards, skrl runs without.")
    return lines


RECURRENT_TASKS = {"cartpole-novel": ("CartPole-v1 without velocities", True),
                   "pendulum-novel": ("Pendulum-v1 without angular velocity", False)}


BENCHMARL_VENV = ("python3 -m venv .venv-benchmarl && .venv-benchmarl/bin/pip install torch==2.13.0 benchmarl==1.5.2 "
                  "vmas==1.5.2")


def run_benchmarl(python: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One BenchMARL run in its own virtualenv's Python (benchmarks/benchmarl_run.py); its JSON result."""
    script = Path(__file__).with_name("benchmarl_run.py")
    proc = subprocess.run([python, str(script), json.dumps(spec)], capture_output=True, text=True, check=False,
                          cwd=spec["folder"])
    if proc.returncode:
        raise RuntimeError(f"BenchMARL run {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_same_settings(theirs: dict[str, Any], config: Any) -> None:
    """Refuse to compare unless ppo_td's preset trains with BenchMARL's settings (``theirs``, as
    ``benchmarks/benchmarl_run.py`` reports them): batch, envs, minibatch size, gradient steps per batch,
    optimizer, discounting, clipping, coefficients and widths."""
    optim, loss = config.optim, config.loss
    ours = {"frames_per_batch": config.frames_per_batch, "num_envs": config.env.num_envs,
            "minibatch_size": config.frames_per_batch // optim.num_minibatches,
            "gradient_steps_per_batch": optim.update_epochs * optim.num_minibatches, "lr": optim.lr,
            "adam_eps": optim.adam_eps, "max_grad_norm": optim.max_grad_norm,
            "loss_critic_type": loss.loss_critic_type, "gamma": loss.gamma,
            "gae_lambda": loss.gae_lambda, "clip_epsilon": loss.clip_epsilon, "entropy_coeff": loss.entropy_coeff,
            "critic_coeff": loss.critic_coeff, "hidden_sizes": list(config.model.hidden_sizes)}
    if "task" in theirs:  # the scenario's own settings: the preset's env.kwargs and its episode length
        kwargs = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in config.env.kwargs)}
        ours["task"] = {**kwargs, "max_steps": config.env.max_episode_steps}
    differ = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    if differ:
        raise SystemExit("ppo_td's preset and BenchMARL's defaults differ (ppo_td, BenchMARL): "
                         f"{differ}; make them the same before comparing")


MULTIAGENT_TASKS = {
    "navigation": ("vmas-navigation", "VMAS navigation (3 agents, 100 steps)"),
    "simple_tag": ("vmas-tag", "VMAS simple_tag (two groups: 3 adversaries, which share their reward, chase 1 agent; "
                               "100 steps)"),
}
"""BenchMARL's VMAS tasks the multiagent suite runs: the ppo_td preset at the same settings, and a description."""


def multiagent(seeds: list[int], out: Path, python: str, algorithms: list[str], frames: int | None = None,
               task: str = "navigation") -> list[str]:
    """ppo_td's preset for ``task`` (BenchMARL's defaults: ``vmas-navigation``, or ``vmas-tag`` for simple_tag) and
    BenchMARL itself, MAPPO and/or IPPO, seed by seed: frames/s (collection plus update, evaluation excluded on
    both sides), and the per-agent evaluation reward at the end (ppo_td: its final 10 deterministic episodes;
    BenchMARL: its last evaluation, 10 deterministic episodes, and the mean of its last five), with each agent
    group's own where the task has several. ``frames`` shortens both runs (the learning target is read at the
    preset's frames)."""
    if not Path(python).exists():
        raise SystemExit(f"BenchMARL's Python {python} does not exist: create its virtualenv with\n  {BENCHMARL_VENV}\n"
                         "(BenchMARL 1.5.2 needs torchrl < 0.12, so it cannot share ppo_td's), or pass "
                         "--benchmarl-python")
    from ppo_td.presets import get_preset

    preset, described = MULTIAGENT_TASKS[task]
    out.mkdir(parents=True, exist_ok=True)
    for algorithm in algorithms:  # before either library trains: the same settings, or no comparison
        check_same_settings(run_benchmarl(python, dict(algorithm=algorithm, seed=0, max_n_frames=0, folder=str(out),
                                                       settings_only=True, task=task)), get_preset(preset))
    lines = [f"{described}, BenchMARL 1.5.2's defaults on both sides (10 envs x 600 steps, "
             "45 epochs of 15 minibatches of 400, lr 5e-5, [256, 256] tanh MLPs, shared parameters), "
             f"{frames or get_preset(preset).total_frames:,} frames, one torch thread, runs one at a time.",
             "",
             "| algorithm | library | total frames/s | collection frames/s | update s per 1k frames | "
             "eval reward per agent (final) | each group's (final) | mean of last 5 evaluations |",
             "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for algorithm in algorithms:
        pairs = []
        for seed in seeds:
            ours = run(dict(library="ppo_td", preset=preset, seed=seed, eval_episodes=10,
                            critic_scope="team" if algorithm == "mappo" else "agent", total_frames=frames))
            _log(out, f"multiagent_{task}_{algorithm}", "ppo_td", ours)
            # a fresh folder per run: BenchMARL's timers are read from every CSV log under it
            folder = Path(tempfile.mkdtemp(prefix=f"benchmarl_{task}_{algorithm}_seed{seed}_", dir=out)).resolve()
            theirs = run_benchmarl(python, dict(algorithm=algorithm, seed=seed, max_n_frames=ours["frames"],
                                                folder=str(folder), task=task))
            _log(out, f"multiagent_{task}_{algorithm}", "benchmarl", theirs)
            pairs.append((ours, theirs))
        for name, i in (("ppo_td", 0), ("BenchMARL", 1)):
            rs = [p[i] for p in pairs]
            final = [r["eval_mean"] for r in rs] if i == 0 else [r["eval_rewards"][-1] for r in rs]
            groups = ([{g: statistics.fmean(v) for g, v in r.get("eval_groups", {}).items()} for r in rs] if i == 0
                      else [{g: v[-1] for g, v in r["eval_group_rewards"].items()} for r in rs])
            per_group = ", ".join(f"{g} {_median_range([x[g] for x in groups], '.3f')}" for g in groups[0]) \
                if len(groups[0]) > 1 else "-"
            last5 = "-" if i == 0 else _median_range([statistics.fmean(r["eval_rewards"][-5:]) for r in rs], ".3f")
            lines.append(f"| {algorithm.upper()} | {name} | "
                         f"{_median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                         f"{_median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                         f"{_median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                         f"{_median_range(final, '.3f')} | {per_group} | {last5} |")
        ratio = {what: _median_range([b[what] / a[what] for a, b in pairs], ".2f")
                 for what in ("train_seconds", "collect_seconds", "update_seconds")}
        ratios.append(f"{algorithm.upper()}: total {ratio['train_seconds']}, collection {ratio['collect_seconds']}, "
                      f"update {ratio['update_seconds']}")
    lines += ["", "ppo_td / BenchMARL frames/s, pairwise per seed: " + "; ".join(ratios) +
              " (above 1: ppo_td faster).", ""]
    return lines


def recurrent(seeds: list[int], out: Path, presets: list[str] | None = None) -> list[str]:
    """ppo_td's recurrent PPO and sb3-contrib's RecurrentPPO, the same tasks and settings (the ``cartpole-novel`` and
    ``pendulum-novel`` presets, RL Zoo's tuned ppo_lstm settings): frames/s, frames to solve, final returns."""
    lines = []
    for preset in presets or list(RECURRENT_TASKS):
        task, solve = RECURRENT_TASKS[preset]
        pairs = []
        for seed in seeds:
            pair = {}
            for library in ("ppo_td", "sb3"):
                result = run(dict(library=library, preset=preset, seed=seed, eval_episodes=10))
                result["solve"] = time_to_solve(result) if solve else None
                pair[library] = result
                _log(out, f"recurrent_{preset}", library, result)
            pairs.append(pair)
        lines += [f"### {task} (`{preset}` preset, {pairs[0]['ppo_td']['frames']:,} frames)", "",
                  "| library | total frames/s | collection frames/s | update s per 1k frames | deterministic eval "
                  "| mean of last 20 training episodes | solved (last 20 >= 475) at frames |",
                  "|---|---|---|---|---|---|---|"]
        for library, name in (("ppo_td", "ppo_td"), ("sb3", "sb3-contrib RecurrentPPO")):
            rs = [p[library] for p in pairs]
            last = [statistics.fmean(e[2] for e in r["episodes"][-WINDOW:]) for r in rs]
            solved = [r["solve"][0] for r in rs if r["solve"]]
            lines.append(f"| {name} | {_median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                         f"{_median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                         f"{_median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                         f"{_median_range([r['eval_mean'] for r in rs], '.1f')} | {_median_range(last, '.1f')} | "
                         + (f"{len(solved)}/{len(rs)}: {_median_range(solved, ',.0f')} |" if solve else "- |"))
        ratios = {what: _median_range([p["sb3"][what] / p["ppo_td"][what] for p in pairs], ".2f")
                  for what in ("train_seconds", "collect_seconds", "update_seconds")}
        lines += ["", f"ppo_td / sb3-contrib, pairwise per seed: total {ratios['train_seconds']}, collection "
                  f"{ratios['collect_seconds']}, update {ratios['update_seconds']} (speed ratios; above 1: ppo_td "
                  "faster).", ""]
    return lines


def env_scaling(seeds: list[int], out: Path) -> list[str]:
    """Frames/s and peak RSS of both libraries against the number of env copies (one process, one thread)."""
    settings = [("cartpole", "cleanrl", n, True, 25_600) for n in (1, 4, 16, 64)]
    settings += [("halfcheetah", "halfcheetah", n, False, 10_240) for n in (1, 8)]
    rows: dict[tuple, dict[str, list[dict]]] = {}
    for seed in seeds:
        for task, preset, n, keep, frames in settings:
            for library in ("ppo_td", "sb3"):
                spec = dict(library=library, preset=preset, seed=seed, num_envs=n, keep_steps=keep,
                            total_frames=frames, eval_episodes=0)
                result = run(spec)
                _log(out, "env_scaling", f"{library} {task} {n}", result)
                rows.setdefault((task, n), {}).setdefault(library, []).append(result)
    lines = ["| task | env copies | ppo_td frames/s | SB3 frames/s | ppo_td / SB3 | ppo_td peak RSS MB | "
             "SB3 peak RSS MB |", "|---|---|---|---|---|---|---|"]
    for (task, n), libs in rows.items():
        ours, theirs = libs["ppo_td"], libs["sb3"]
        ratio = [t["train_seconds"] / o["train_seconds"] for o, t in zip(ours, theirs, strict=True)]
        lines.append(f"| {task} | {n} | {_median_range([r['frames'] / r['train_seconds'] for r in ours], ',.0f')} | "
                     f"{_median_range([r['frames'] / r['train_seconds'] for r in theirs], ',.0f')} | "
                     f"{_median_range(ratio, '.2f')} | {_median_range([r['peak_rss_mb'] for r in ours], '.0f')} | "
                     f"{_median_range([r['peak_rss_mb'] for r in theirs], '.0f')} |")
    _plot_scaling(rows, out / "env_scaling.png")
    lines.append("\nCartPole keeps 128 steps per copy (the batch grows with the copies); HalfCheetah keeps its "
                 "2,048-frame batch. Plot: env_scaling.png.")
    return lines


def _plot_scaling(rows: dict[tuple, dict[str, list[dict]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, task in zip(axes, ("cartpole", "halfcheetah"), strict=True):
        for library, color in (("ppo_td", "C0"), ("sb3", "C1")):
            points = sorted((n, statistics.median(r["frames"] / r["train_seconds"] for r in libs[library]))
                            for (t, n), libs in rows.items() if t == task)
            ax.plot([n for n, _ in points], [v for _, v in points], "o-", color=color, label=library)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("env copies")
        ax.set_ylabel("frames/s")
        ax.set_title(task)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def masking(seeds: list[int], out: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.masking", "--seeds", *map(str, seeds)],
                          capture_output=True, text=True, check=True)
    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            _log(out, "masking", "ppo_td", json.loads(line))
    return ["Trading env (ppo_td/Trading-v0 masked vs TradingPenalty-v0), `trading` preset", "", *table]


def doctor(out: Path) -> list[str]:
    lines = []
    for preset in ("cartpole", "cleanrl"):
        proc = subprocess.run([sys.executable, "-m", "benchmarks.doctor_overhead", "--preset", preset],
                              capture_output=True, text=True, check=True)
        rows = [line for line in proc.stdout.splitlines() if line.startswith("|")]
        lines += rows if not lines else rows[2:]
        _log(out, "doctor", preset, json.loads(proc.stdout.splitlines()[0]))
    return lines


def _log(out: Path, suite: str, name: str, result: dict[str, Any]) -> None:
    with (out / "results.jsonl").open("a") as f:
        f.write(json.dumps({"suite": suite, "name": name, **result}) + "\n")
    short = {k: v for k, v in result.items() if k not in ("episodes", "eval_returns")}
    print(f"{suite} | {name} | {json.dumps(short)}", flush=True)


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


def main() -> None:
    if sys.argv[1:2] == ["latency"]:  # one process, its own options (python -m benchmarks latency --help)
        from benchmarks import latency

        sys.argv = ["python -m benchmarks latency", *sys.argv[2:]]
        latency.main()
        return
    if sys.argv[1:2] == ["gpu"]:  # the accelerator suite: its own options (python -m benchmarks gpu --help)
        from benchmarks import gpu

        sys.argv = ["python -m benchmarks gpu", *sys.argv[2:]]
        gpu.main()
        return
    if sys.argv[1:2] == ["entry_points"]:  # ppo-td train beside the Python API (python -m benchmarks entry_points -h)
        from benchmarks import entry_points

        sys.argv = ["python -m benchmarks entry_points", *sys.argv[2:]]
        entry_points.main()
        return
    if sys.argv[1:2] == ["distributed"]:  # one run over 1, 2, ... ranks (python -m benchmarks distributed --help)
        from benchmarks import distributed

        sys.exit(distributed.main(sys.argv[2:]))
    if sys.argv[1:2] in (["asymmetric"], ["symmetry"]):  # issue 62's parts against their baselines, with seeds
        from benchmarks import robot_parts

        sys.exit(robot_parts.main(sys.argv[1], sys.argv[2:]))
    if sys.argv[1:2] == ["rsl_rl"]:  # ppo_td beside rsl_rl on a batched simulator (python -m benchmarks rsl_rl -h)
        from benchmarks import rsl_rl_side

        sys.exit(rsl_rl_side.main(sys.argv[2:]))
    if sys.argv[1:2] == ["games"]:  # turn-based games: against a random player and in self-play (issue 63)
        from benchmarks import games

        sys.exit(games.main(sys.argv[2:]))
    if sys.argv[1:2] == ["returns"]:  # multi-seed returns with a result store (python -m benchmarks returns --help)
        from benchmarks import returns

        sys.exit(returns.main(sys.argv[2:]))
    if sys.argv[1:2] == ["env_paths"]:  # a config's path to a built env, per kind (python -m benchmarks env_paths -h)
        from benchmarks import env_paths

        sys.exit(env_paths.main(sys.argv[2:]))
    if sys.argv[1:2] == ["soak"]:  # memory over a long run: its own options (python -m benchmarks soak --help)
        from benchmarks import soak

        sys.argv = ["python -m benchmarks soak", *sys.argv[2:]]
        soak.main()
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("suite", choices=["quick", "mujoco", "atari", "scaling", "recurrent", "multiagent", "doctor"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default="bench_results")
    parser.add_argument("--full", action="store_true", help="mujoco: also the 1M-frame runs")
    parser.add_argument("--presets", nargs="+", choices=["cartpole-novel", "pendulum-novel"], default=None,
                        help="recurrent: only these tasks (default both)")
    parser.add_argument("--benchmarl-python", default=".venv-benchmarl/bin/python",
                        help=f"multiagent: BenchMARL's virtualenv Python (create it with: {BENCHMARL_VENV})")
    parser.add_argument("--algorithms", nargs="+", choices=["mappo", "ippo"], default=["mappo"],
                        help="multiagent: which algorithms (default mappo)")
    parser.add_argument("--task", choices=sorted(MULTIAGENT_TASKS), default="navigation",
                        help="multiagent: BenchMARL's VMAS task (simple_tag: two agent groups, the vmas-tag preset)")
    parser.add_argument("--frames", type=int, default=None,
                        help="multiagent: frames per run, a multiple of the preset's batch (6,000 frames; default "
                             "its 600,000): a shorter throughput comparison")
    args = parser.parse_args()
    if args.frames is not None:
        from ppo_td.presets import get_preset

        batch = get_preset("vmas-navigation").frames_per_batch
        if args.suite != "multiagent" or args.frames <= 0 or args.frames % batch:
            parser.error(f"--frames {args.frames}: only for the multiagent suite, a positive multiple of {batch} "
                         f"(the vmas-navigation batch), e.g. --frames {10 * batch}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = (f"{platform.machine()}, {torch.get_num_threads()} torch threads available, "
               f"Python {platform.python_version()}, torch {torch.__version__}")
    presets = f" --presets {' '.join(args.presets)}" if args.presets else ""
    presets += f" --algorithms {' '.join(args.algorithms)}" if args.suite == "multiagent" else ""
    presets += f" --frames {args.frames}" if args.frames else ""
    presets += f" --task {args.task}" if args.suite == "multiagent" and args.task != "navigation" else ""
    sections = [f"# ppo_td benchmarks: {args.suite}", "", f"Machine: {machine}. Command: "
                f"`python -m benchmarks {args.suite} --seeds {' '.join(map(str, args.seeds))}{presets}`.", ""]
    if args.suite == "quick":
        sections += ["## CartPole-v1: time to solve", "", *cartpole_solve(args.seeds, out), ""]
        sections += ["## Throughput at CleanRL's settings", "",
                     *throughput(args.seeds, out, "cleanrl", 25_600, "CartPole-v1, 4 envs x 128 steps, 4 x 4"), ""]
        sections += ["## Action masking", "", *masking(args.seeds, out), ""]
    elif args.suite == "mujoco":
        sections += ["## HalfCheetah-v5 throughput, published PPO MuJoCo settings", "",
                     *throughput(args.seeds, out, "halfcheetah", 20_480, "HalfCheetah-v5, 1 env x 2048, 10 x 32"), ""]
        if args.full:
            proc = subprocess.run([sys.executable, "-m", "benchmarks.mujoco", "--presets", "halfcheetah", "hopper",
                                   "--seeds", *map(str, args.seeds), "--out", str(out / "mujoco.jsonl")],
                                  capture_output=True, text=True, check=True)
            sections += ["## 1M frames", "", *[ln for ln in proc.stdout.splitlines() if ln.startswith("|")], ""]
    elif args.suite == "scaling":
        sections += ["## Frames/s against env copies", "", *env_scaling(args.seeds, out), ""]
    elif args.suite == "recurrent":
        sections += ["## Recurrent PPO: ppo_td vs sb3-contrib's RecurrentPPO", "",
                     *recurrent(args.seeds, out, args.presets), ""]
    elif args.suite == "multiagent":
        sections += [f"## Multi-agent PPO: ppo_td vs BenchMARL on VMAS {args.task}", "",
                     *multiagent(args.seeds, out, str(Path(args.benchmarl_python).absolute()), args.algorithms,
                                 args.frames, args.task), ""]
    elif args.suite == "atari":
        sections += ["## Atari (ALE/Pong-v5) throughput, CleanRL's Atari settings", "",
                     *throughput(args.seeds, out, "atari", 10_240,
                                 "ALE/Pong-v5, standard preprocessing, Nature CNN, 8 envs x 128, 4 x 4; "
                                 "SB3 PPO('CnnPolicy') with its AtariWrapper", eval_episodes=0), ""]
    else:
        sections += ["## Doctor overhead", "", *doctor(out), ""]
    (out / f"results_{args.suite}.md").write_text("\n".join(sections) + "\n")
    print("\n".join(sections))


if __name__ == "__main__":
    main()
