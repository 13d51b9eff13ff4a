"""The multiagent suite (``python -m benchmarks multiagent [--seeds ...] [--algorithms mappo ippo] [--task ...]
[--frames N] [--benchmarl-python PATH]``): ppo_td's MAPPO and IPPO beside BenchMARL's on VMAS at BenchMARL's defaults.
ppo_td runs in ``benchmarks.common.worker`` processes, BenchMARL in its own virtualenv (``benchmarl_run.py``); the
options, the header and the files are the harness's (``benchmarks/common/harness.py``)."""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import run_worker
from benchmarks.common.harness import BENCHMARL_VENV, MULTIAGENT_TASKS, log_run, median_range, run


def run_benchmarl(python: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One BenchMARL run in its own virtualenv's Python (benchmarks/returns/benchmarl_run.py); its JSON result."""
    script = Path(__file__).with_name("benchmarl_run.py")
    proc = subprocess.run([python, str(script), json.dumps(spec)], capture_output=True, text=True, check=False,
                          cwd=spec["folder"])
    if proc.returncode:
        raise RuntimeError(f"BenchMARL run {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_same_settings(theirs: dict[str, Any], config: Any) -> None:
    """Refuse to compare unless ppo_td's preset trains with BenchMARL's settings (``theirs``, as
    ``benchmarks/returns/benchmarl_run.py`` reports them): batch, envs, minibatch size, gradient steps per batch,
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
            ours = run_worker(dict(library="ppo_td", preset=preset, seed=seed, eval_episodes=10,
                                   critic_scope="team" if algorithm == "mappo" else "agent", total_frames=frames))
            log_run(out, f"multiagent_{task}_{algorithm}", "ppo_td", ours)
            # a fresh folder per run: BenchMARL's timers are read from every CSV log under it
            folder = Path(tempfile.mkdtemp(prefix=f"benchmarl_{task}_{algorithm}_seed{seed}_", dir=out)).resolve()
            theirs = run_benchmarl(python, dict(algorithm=algorithm, seed=seed, max_n_frames=ours["frames"],
                                                folder=str(folder), task=task))
            log_run(out, f"multiagent_{task}_{algorithm}", "benchmarl", theirs)
            pairs.append((ours, theirs))
        for name, i in (("ppo_td", 0), ("BenchMARL", 1)):
            rs = [p[i] for p in pairs]
            final = [r["eval_mean"] for r in rs] if i == 0 else [r["eval_rewards"][-1] for r in rs]
            groups = ([{g: statistics.fmean(v) for g, v in r.get("eval_groups", {}).items()} for r in rs] if i == 0
                      else [{g: v[-1] for g, v in r["eval_group_rewards"].items()} for r in rs])
            per_group = ", ".join(f"{g} {median_range([x[g] for x in groups], '.3f')}" for g in groups[0]) \
                if len(groups[0]) > 1 else "-"
            last5 = "-" if i == 0 else median_range([statistics.fmean(r["eval_rewards"][-5:]) for r in rs], ".3f")
            lines.append(f"| {algorithm.upper()} | {name} | "
                         f"{median_range([r['frames'] / r['train_seconds'] for r in rs], ',.0f')} | "
                         f"{median_range([r['frames'] / r['collect_seconds'] for r in rs], ',.0f')} | "
                         f"{median_range([1e3 * r['update_seconds'] / r['frames'] for r in rs], '.3f')} | "
                         f"{median_range(final, '.3f')} | {per_group} | {last5} |")
        ratio = {what: median_range([b[what] / a[what] for a, b in pairs], ".2f")
                 for what in ("train_seconds", "collect_seconds", "update_seconds")}
        ratios.append(f"{algorithm.upper()}: total {ratio['train_seconds']}, collection {ratio['collect_seconds']}, "
                      f"update {ratio['update_seconds']}")
    lines += ["", "ppo_td / BenchMARL frames/s, pairwise per seed: " + "; ".join(ratios) +
              " (above 1: ppo_td faster).", ""]
    return lines


def sections(args: argparse.Namespace, out: Path) -> list[str]:
    """The multiagent suite's section."""
    return [f"## Multi-agent PPO: ppo_td vs BenchMARL on VMAS {args.task}", "",
            *multiagent(args.seeds, out, str(Path(args.benchmarl_python).absolute()), args.algorithms, args.frames,
                        args.task), ""]


def main(argv: list[str]) -> None:
    """``python -m benchmarks multiagent ...`` (``argv``: all after ``python -m benchmarks``)."""
    run(argv, {"multiagent": sections})
