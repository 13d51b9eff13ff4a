"""The accelerator suite (issue 37): VMAS navigation, ppo_td beside TorchRL's own MAPPO parts at the same settings,
Atari Pong, ppo_td beside SB3, and a MuJoCo preset's small networks (HalfCheetah's) on the GPU eager, compiled and
replayed as CUDA graphs, each run in its own process, one at a time; and the batch's and step's moves to the GPU
from pinned memory.

    python -m benchmarks gpu                       # on a GPU machine: VMAS at 4,096 and 32,768 envs, Pong x 16,
                                                   # Atari's and Pendulum's moves, HalfCheetah on the CPU and on
                                                   # the GPU three ways
    python -m benchmarks gpu --vmas-envs --atari-frames 0    # the moves and the four compile runs (a few minutes)
    python -m benchmarks gpu --vmas-envs --atari-frames 0 --compile-preset pendulum   # the same without MuJoCo
    python -m benchmarks gpu --vmas-envs --atari-frames 0 --compile-frames 0   # pinned memory only (seconds)
    python -m benchmarks gpu --device cpu --vmas-envs 64 --vmas-frames 20480 --atari-frames 0 --compile-frames 0 \
        --pinned-presets                           # a check on a CPU

VMAS: ``navigation`` as ppo_td's ``vmas-navigation`` preset makes it (3 agents, 100 steps), ``--vmas-steps`` steps
per env per batch, TorchRL's multi-agent PPO tutorial's loss settings (5 epochs of 4 minibatches, lr 3e-4, ...),
the simulator and the networks on ``--device``. TorchRL's parts are wired as that tutorial wires them (``VmasEnv``
on the device, ``Collector``, ``MultiAgentMLP`` actor and centralised critic, ``ClipPPOLoss``, GAE); ppo_td runs
its preset with the same settings (``env.device``, ``device``).
Atari: CleanRL's settings, ``--atari-workers`` env copies each in a process of its own for each library (ppo_td's
``env.vectorization='async'``, SB3's ``SubprocVecEnv``), the networks on ``--device`` in the training process.

Compile runs: ``--compile-preset`` (``halfcheetah``: CleanRL's MuJoCo settings, 1 env, 32 minibatches of 64, LeanRL's
PPO continuous; a machine without MuJoCo: ``pendulum``, Gymnasium's own), ``--compile-modes`` of: ``cpu`` (eager on
the CPU, the reference), ``eager``, ``compile`` (``compile=True``) and ``cudagraphs`` (``compile=True,
cudagraphs=True``) on ``--device``; compile time included.

Pinned memory (``--pinned-presets``, :mod:`benchmarks.gpu.pinned`): each preset's batch and step moved to the GPU
from pageable and from pinned memory, timed (``--out``/pinned.md).

Prints the device, frames/s (collection and update apart) and reward against wall time for each run, a table
(``--out``/gpu.md) and a plot of reward against seconds (``--out``/gpu.png).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import run_worker
from benchmarks.gpu import pinned
from ppo_td import get_preset

# TorchRL's multi-agent PPO tutorial's settings, used by both sides (its ClipPPOLoss with the l2 value loss of ppo_td)
TUTORIAL_LOSS = dict(gamma=0.99, gae_lambda=0.9, clip_epsilon=0.2, entropy_coeff=1e-4, critic_coeff=1.0,
                     loss_critic_type="l2", normalize_advantage=False)
TUTORIAL_OPTIM = dict(lr=3e-4, adam_eps=1e-8, anneal_lr=False, update_epochs=5, num_minibatches=4, max_grad_norm=1.0)


def _scenario_kwargs() -> dict[str, Any]:
    """The scenario's keyword arguments in ppo_td's vmas-navigation preset (both sides build the same env)."""
    import ast

    from ppo_td import get_preset

    items = (item.split("=", 1) for item in get_preset("vmas-navigation").env.kwargs)
    return {key: ast.literal_eval(value) for key, value in items}


def vmas_ppo_td(num_envs: int, frames: int, steps: int, device: str, seed: int) -> dict[str, Any]:
    import dataclasses

    import torch

    from ppo_td import get_preset
    from ppo_td.training import train

    config = get_preset("vmas-navigation")
    config = dataclasses.replace(
        config, seed=seed, device=device, total_frames=frames, frames_per_batch=num_envs * steps, eval_episodes=0,
        env=dataclasses.replace(config.env, num_envs=num_envs, device=device),
        loss=dataclasses.replace(config.loss, **TUTORIAL_LOSS),
        optim=dataclasses.replace(config.optim, **TUTORIAL_OPTIM))
    curve: list[tuple[int, float, float]] = []
    result = train(config, callbacks=[lambda m, p: curve.append((m["frames"], m["time"], m["episode_return"]))])
    history = result.history
    return {"library": "ppo_td", "frames": history[-1]["frames"], "seconds": history[-1]["time"],
            "collect_seconds": sum(h["collect_seconds"] for h in history),
            "update_seconds": sum(h["update_seconds"] for h in history),
            "sps_per_iteration": [h["frames"] / h["time"] if i == 0 else
                                  (h["frames"] - history[i - 1]["frames"]) / (h["time"] - history[i - 1]["time"])
                                  for i, h in enumerate(history)],
            "curve": curve, "device": str(torch.device(device))}


def vmas_torchrl(num_envs: int, frames: int, steps: int, device: str, seed: int) -> dict[str, Any]:
    """TorchRL's multi-agent PPO tutorial's parts at the same settings."""
    import torch
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers import SamplerWithoutReplacement
    from torchrl.envs import RewardSum, TransformedEnv
    from torchrl.envs.libs.vmas import VmasEnv
    from torchrl.modules import MultiAgentMLP, ProbabilisticActor, TanhNormal
    from torchrl.objectives import ClipPPOLoss, ValueEstimators

    torch.manual_seed(seed)
    frames_per_batch = num_envs * steps
    env = VmasEnv("navigation", num_envs=num_envs, continuous_actions=True, max_steps=100, device=device, seed=seed,
                  **_scenario_kwargs())
    env = TransformedEnv(env, RewardSum(in_keys=[env.reward_key], out_keys=[("agents", "episode_reward")]))
    obs_dim = env.observation_spec["agents", "observation"].shape[-1]
    act_spec = env.full_action_spec_unbatched[env.action_key]
    policy_net = nn.Sequential(
        MultiAgentMLP(n_agent_inputs=obs_dim, n_agent_outputs=2 * act_spec.shape[-1], n_agents=env.n_agents,
                      centralised=False, share_params=True, device=device, depth=2, num_cells=256,
                      activation_class=nn.Tanh),
        NormalParamExtractor())
    policy = ProbabilisticActor(
        TensorDictModule(policy_net, in_keys=[("agents", "observation")], out_keys=[("agents", "loc"),
                                                                                     ("agents", "scale")]),
        spec=act_spec, in_keys=[("agents", "loc"), ("agents", "scale")], out_keys=[env.action_key],
        distribution_class=TanhNormal, distribution_kwargs={"low": act_spec.space.low, "high": act_spec.space.high},
        return_log_prob=True)
    critic = TensorDictModule(
        MultiAgentMLP(n_agent_inputs=obs_dim, n_agent_outputs=1, n_agents=env.n_agents, centralised=True,
                      share_params=True, device=device, depth=2, num_cells=256, activation_class=nn.Tanh),
        in_keys=[("agents", "observation")], out_keys=[("agents", "state_value")])
    collector = Collector(env, policy, device=device, storing_device=device, frames_per_batch=frames_per_batch,
                          total_frames=frames)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames_per_batch, device=device),
                          sampler=SamplerWithoutReplacement(), batch_size=frames_per_batch // 4)
    loss = ClipPPOLoss(actor_network=policy, critic_network=critic, clip_epsilon=TUTORIAL_LOSS["clip_epsilon"],
                       entropy_coeff=TUTORIAL_LOSS["entropy_coeff"], normalize_advantage=False, loss_critic_type="l2")
    loss.set_keys(reward=env.reward_key, action=env.action_key, value=("agents", "state_value"),
                  done=("agents", "done"), terminated=("agents", "terminated"))
    loss.make_value_estimator(ValueEstimators.GAE, gamma=TUTORIAL_LOSS["gamma"], lmbda=TUTORIAL_LOSS["gae_lambda"])
    optimizer = torch.optim.Adam(loss.parameters(), TUTORIAL_OPTIM["lr"])
    curve, per_iteration = [], []
    start = last = time.perf_counter()
    collect = update = 0.0
    done_frames = 0
    for td in collector:
        collected = time.perf_counter()
        collect += collected - last
        shape = td.get_item_shape(("next", env.reward_key))
        td.set(("next", "agents", "done"), td.get(("next", "done")).unsqueeze(-1).expand(shape))
        td.set(("next", "agents", "terminated"), td.get(("next", "terminated")).unsqueeze(-1).expand(shape))
        with torch.no_grad():
            loss.value_estimator(td, params=loss.critic_network_params, target_params=loss.target_critic_network_params)
        buffer.extend(td.reshape(-1))
        for _ in range(5):
            for _ in range(4):
                values = loss(buffer.sample())
                total = values["loss_objective"] + values["loss_critic"] + values["loss_entropy"]
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), TUTORIAL_OPTIM["max_grad_norm"])
                optimizer.step()
                optimizer.zero_grad()
        collector.update_policy_weights_()
        now = time.perf_counter()
        update += now - collected
        done_frames += td.numel()
        ended = td.get(("next", "agents", "episode_reward"))[td.get(("next", "done")).squeeze(-1)]
        reward = float(ended.mean()) if ended.numel() else float("nan")
        curve.append((done_frames, now - start, reward))
        per_iteration.append(td.numel() / (now - last))
        last = now
    collector.shutdown()
    return {"library": "torchrl parts", "frames": done_frames, "seconds": last - start, "collect_seconds": collect,
            "update_seconds": update, "sps_per_iteration": per_iteration, "curve": curve,
            "device": str(torch.device(device))}


def _child(kind: str, args: dict[str, Any], timeout: float) -> dict[str, Any]:
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu.run", "--child", kind, json.dumps(args)],
                              capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as err:  # the child killed before this is raised
        raise RuntimeError(f"{kind} {args} passed --timeout {timeout:.0f} s") from err
    if proc.returncode:
        raise RuntimeError(f"{kind} {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _atari(library: str, workers: int, frames: int, device: str, seed: int, timeout: float) -> dict[str, Any]:
    spec = dict(library=library, preset="atari", seed=seed, total_frames=frames, eval_episodes=0, device=device,
                num_envs=workers)
    # each env copy in a process of its own, the networks in the training process: ppo_td's AsyncVectorEnv copies
    # stepped by its own loop, SB3's SubprocVecEnv
    if library == "ppo_td":
        spec["vectorization"] = "async"
    else:
        spec["workers"] = workers
    out = run_worker(spec, timeout=timeout)
    return {"library": library, "frames": out["frames"], "seconds": out["train_seconds"],
            "collect_seconds": out.get("collect_seconds", float("nan")),
            "update_seconds": out.get("update_seconds", float("nan")), "device": device,
            "curve": [(f, s, r) for f, s, r in out.get("episodes", [])]}


COMPILE_MODES = {"cpu": {"device": "cpu", "compile": False}, "eager": {"compile": False},
                "compile": {"compile": True}, "cudagraphs": {"compile": True, "cudagraphs": True}}
"""``--compile-modes``: each run's worker settings (no ``device``: ``--device``)."""


def _compile_run(preset: str, mode: str, frames: int, device: str, seed: int, timeout: float) -> dict[str, Any]:
    """One run of ``preset`` in ``mode`` (:data:`COMPILE_MODES`)."""
    spec = {"library": "ppo_td", "preset": preset, "seed": seed, "total_frames": frames, "eval_episodes": 0,
            "device": device, **COMPILE_MODES[mode]}  # (cpu's own device over --device)
    out = run_worker(spec, timeout=timeout)
    return {"library": f"ppo_td {mode}", "frames": out["frames"], "seconds": out["train_seconds"],
            "collect_seconds": out["collect_seconds"], "update_seconds": out["update_seconds"],
            "device": spec["device"], "curve": [(f, s, r) for f, s, r in out.get("episodes", [])]}


def _preset_problem(preset: str) -> str | None:
    """Why ``preset``'s env cannot be made here (an unknown preset, MuJoCo not installed), or None: one copy built
    as ppo_td builds it (its registrations and sources: ALE, MiniGrid, a module's env), then closed."""
    import dataclasses

    import gymnasium as gym

    from ppo_td.envs import build_env

    try:
        config = get_preset(preset).env
    except (KeyError, ValueError) as err:
        return str(err)
    try:
        build_env(dataclasses.replace(config, num_envs=1), seed=0).env.close()
    except (gym.error.Error, ImportError, ValueError) as err:
        return (f"its env {config.env_id} cannot be made here ({type(err).__name__}: "
                f"{(str(err).splitlines() or [''])[0][:200]}); install what it needs, or give --compile-preset "
                "pendulum (Gymnasium's own)")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--vmas-envs", type=int, nargs="*", default=[4096, 32768])
    parser.add_argument("--vmas-frames", type=int, default=4_000_000)
    parser.add_argument("--vmas-steps", type=int, default=32)
    parser.add_argument("--atari-workers", type=int, default=16)
    parser.add_argument("--atari-frames", type=int, default=500_000, help="0: no Atari runs")
    parser.add_argument("--compile-preset", default="halfcheetah",
                        help="the compile runs' preset (pendulum where MuJoCo is not installed)")
    parser.add_argument("--compile-frames", type=int, default=100_000, help="0: no compile runs")
    parser.add_argument("--compile-modes", nargs="+", choices=list(COMPILE_MODES), default=list(COMPILE_MODES),
                        help="the compile runs: cpu (eager, the reference), and on --device eager, compile, "
                             "cudagraphs (compile with CUDA graphs)")
    parser.add_argument("--pinned-presets", nargs="*", default=["atari", "pendulum"],
                        help="presets whose batch and step moves are timed from pageable and pinned memory (none: "
                             "no pinned runs)")
    parser.add_argument("--pinned-rounds", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="bench_results/gpu")
    args = parser.parse_args(argv)
    if args.compile_frames and not args.child:
        problem = _preset_problem(args.compile_preset)
        if problem:
            parser.error(f"--compile-preset {args.compile_preset}: {problem}")
        if "cudagraphs" in args.compile_modes and not args.device.startswith("cuda"):
            parser.error(f"--compile-modes cudagraphs on --device {args.device}: CUDA graphs need a CUDA device; give "
                         "--device cuda, or leave cudagraphs out of --compile-modes")
    if args.pinned_presets and not args.child and not args.device.startswith("cuda"):
        parser.error(f"--pinned-presets on --device {args.device}: pinned memory is CUDA's; give --device cuda, or "
                     "--pinned-presets with no preset")
    if args.child:
        kind, child_args = args.child[0], json.loads(args.child[1])
        import logging

        import torch

        torch.set_num_threads(1)
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        kinds = {"vmas-ppo_td": vmas_ppo_td, "vmas-torchrl": vmas_torchrl, "pinned": pinned.measure}
        print(json.dumps(kinds[kind](**child_args)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def keep(result: dict[str, Any], task: str) -> None:  # the table written after every run: a kill keeps the rest
        result.update(task=task)
        rows.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)
        _write(rows, out, args.device, args.seed)

    for envs in args.vmas_envs:
        settings = dict(num_envs=envs, frames=args.vmas_frames, steps=args.vmas_steps, device=args.device,
                        seed=args.seed)
        for kind in ("vmas-ppo_td", "vmas-torchrl"):
            keep(_child(kind, settings, args.timeout), f"VMAS navigation, {envs:,} envs")
    if args.atari_frames:
        for library in ("ppo_td", "sb3"):
            keep(_atari(library, args.atari_workers, args.atari_frames, args.device, args.seed, args.timeout),
                 f"Atari Pong, {args.atari_workers} env processes")
    moves: list[dict[str, Any]] = []
    for preset in args.pinned_presets:  # (before the long runs: seconds each)
        moves.append(_child("pinned", dict(preset=preset, device=args.device, rounds=args.pinned_rounds,
                                           seed=args.seed), args.timeout))
        pinned.write(moves, out)
        print(json.dumps(moves[-1]), flush=True)
    if args.compile_frames:
        env_id = get_preset(args.compile_preset).env.env_id
        for mode in args.compile_modes:
            keep(_compile_run(args.compile_preset, mode, args.compile_frames, args.device, args.seed, args.timeout),
                 f"{env_id}, preset {args.compile_preset}")
    print((out / "gpu.md").read_text() if rows else "" if moves else "no runs asked for")
    if moves:
        print((out / "pinned.md").read_text())
    if rows:
        _plot(rows, out / "gpu.png")
    return 0


def _write(rows: list[dict[str, Any]], out: Path, device: str, seed: int) -> None:
    """The table of ``rows`` (``out``/gpu.md) and the rows themselves (``out``/gpu.jsonl), whole each time."""
    lines = [f"Device: {device}. Seed {seed}. `python -m benchmarks gpu` with these settings.", "",
             "| task | library | device | frames | seconds | frames/s | collection frames/s | update seconds | "
             "frames/s, iteration 5 to last: median (min-max) | last reward |", "|---" * 10 + "|"]
    for r in rows:
        sps = r.get("sps_per_iteration", [])[4:]
        spread = (f"{statistics.median(sps):,.0f} ({min(sps):,.0f}-{max(sps):,.0f})" if sps else "-")
        last = r["curve"][-1][2] if r["curve"] else float("nan")
        lines.append(f"| {r['task']} | {r['library']} | {r['device']} | {r['frames']:,} | {r['seconds']:.1f} | "
                     f"{r['frames'] / r['seconds']:,.0f} | {r['frames'] / max(r['collect_seconds'], 1e-9):,.0f} | "
                     f"{r['update_seconds']:.1f} | {spread} | {last:.3g} |")
    (out / "gpu.md").write_text("\n".join(lines) + "\n")
    (out / "gpu.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.5), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for r in (r for r in rows if r["task"] == task):
            if r["curve"]:
                ax.plot([c[1] for c in r["curve"]], [c[2] for c in r["curve"]], label=r["library"])
        ax.set(title=task, xlabel="seconds", ylabel="reward")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    sys.exit(main())
