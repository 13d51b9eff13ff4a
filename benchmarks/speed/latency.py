"""Per-call latency of a trained policy on one observation: ppo_td's ``Policy`` (and its exported files) beside
Stable-Baselines3's ``predict`` (sb3-contrib's ``RecurrentPPO.predict`` for the recurrent preset), in one process.

    python -m benchmarks latency [--calls 2000] [--rounds 7] [--out DIR] [--presets ...] [--no-group]

For each preset the networks are the preset's (``ppo_td`` trained for one iteration into a temporary run folder
and read back with ``load_policy``; SB3's PPO built with the same layers). Each round times ``--calls`` calls, one
real observation each (recorded from the env under random actions), deterministic actions, for every contender
in turn; the table gives the median over rounds of the microseconds per call and its range, and the ratio to
SB3's ``predict`` taken within each round. For the normalized preset (HalfCheetah), SB3's call includes
``VecNormalize.normalize_obs``, as a user must normalize before ``predict`` (``Policy`` does it itself).
One torch thread, CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

PRESETS = ("cartpole", "halfcheetah", "cartpole-novel")


def _observations(policy: Any, n: int) -> list[np.ndarray]:
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    out = []
    for _ in range(n):
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return out


def _ppo_td(preset: str, folder: Path) -> Any:
    import ppo_td
    from ppo_td import get_preset
    from ppo_td.deploy import load_policy

    config = get_preset(preset)
    config = dataclasses.replace(config, total_frames=config.frames_per_batch, eval_episodes=0)
    ppo_td.train(config, run_dir=str(folder / preset))
    return config, load_policy(folder / preset)


def _sb3(config: Any, recurrent: bool) -> tuple[Callable[[np.ndarray], Any], Callable[[], None]]:
    """SB3's deterministic call on one observation (with the normalizer first where the preset normalizes), and
    the reset of a recurrent model's state."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from benchmarks.common.worker import _recurrent_kwargs, _sb3_kwargs, sb3_vec_env

    env = sb3_vec_env(config, 1, 0)
    normalize = config.env.normalize_observations
    if normalize:
        env = VecNormalize(env, norm_obs=True, norm_reward=False, clip_obs=config.env.obs_clip)
        env.training = False
    if recurrent:
        from sb3_contrib import RecurrentPPO

        model = RecurrentPPO("MlpLstmPolicy", env, device="cpu", **_recurrent_kwargs(config))
        state: dict[str, Any] = {"state": None, "start": np.ones(1, dtype=bool)}

        def act(obs: np.ndarray) -> Any:
            action, state["state"] = model.predict(obs, state=state["state"], episode_start=state["start"],
                                                   deterministic=True)
            state["start"] = np.zeros(1, dtype=bool)
            return action

        def reset() -> None:
            state.update(state=None, start=np.ones(1, dtype=bool))
        return act, reset
    model = PPO("MlpPolicy", env, device="cpu", **_sb3_kwargs(config))
    if normalize:
        return (lambda obs: model.predict(env.normalize_obs(obs), deterministic=True)[0]), lambda: None
    return (lambda obs: model.predict(obs, deterministic=True)[0]), lambda: None


def _exported(policy: Any, folder: Path, preset: str) -> dict[str, Callable[[np.ndarray], Any]]:
    """The TorchScript file and (where onnxruntime is installed) the ONNX file, one observation per call."""
    import importlib.util

    from ppo_td.deploy.export import export_policy

    out: dict[str, Callable[[np.ndarray], Any]] = {}
    script = torch.jit.load(str(export_policy(policy, "torchscript", folder / f"{preset}.pt")))
    out["TorchScript file"] = lambda obs: script(torch.from_numpy(obs).unsqueeze(0))[0].numpy()
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnxscript"):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(export_policy(policy, "onnx", folder / f"{preset}.onnx")), options)
        name = session.get_inputs()[0].name  # float32 inputs: the env's float64 observations are cast first
        out["ONNX file (onnxruntime)"] = lambda obs: session.run(None, {name: obs[None].astype(np.float32)})[0][0]
    return out


def measure(calls: int, rounds: int, presets: tuple[str, ...] = PRESETS) -> list[str]:
    torch.set_num_threads(1)
    lines = ["| preset | call | us per call, median (range) | ratio to SB3 (SB3 time / this) |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for preset in presets:
            config, policy = _ppo_td(preset, folder)
            recurrent = policy.recurrent
            sb3_act, sb3_reset = _sb3(config, recurrent)
            observations = _observations(policy, calls)
            contenders: dict[str, tuple[Callable[[np.ndarray], Any], Callable[[], None]]] = {
                "ppo_td Policy": (policy, policy.reset),
                ("sb3-contrib RecurrentPPO.predict" if recurrent else
                 "SB3 predict" + (" (after VecNormalize.normalize_obs)" if config.env.normalize_observations
                                  else "")): (sb3_act, sb3_reset),
            }
            if not recurrent:
                contenders.update({name: (fn, lambda: None) for name, fn in _exported(policy, folder, preset).items()})
            times: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(rounds + 1):  # the first round warms up and is dropped
                for name, (act, reset) in contenders.items():
                    reset()
                    started = time.perf_counter()
                    for obs in observations:
                        act(obs)
                    times[name].append((time.perf_counter() - started) / calls * 1e6)
            sb3_name = [n for n in contenders if "SB3" in n or "sb3" in n][0]
            for name, values in times.items():
                values = values[1:]
                ratios = [s / v for s, v in zip(times[sb3_name][1:], values, strict=True)]
                lines.append(f"| {preset} | {name} | {statistics.median(values):.0f} ({min(values):.0f}-"
                             f"{max(values):.0f}) | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-"
                             f"{max(ratios):.2f}) |")
    return lines


def measure_group(calls: int, rounds: int) -> list[str]:
    """An agent group's ``AgentsPolicy`` (mpe-spread: PettingZoo's dict of 3 observations in, a dict of actions out)
    beside the one-agent ``Policy`` (cartpole), one call per step of each env, rounds alternating."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _, one = _ppo_td("cartpole", folder)
        _, group = _ppo_td("mpe-spread", folder)
        single = _observations(one, calls)
        env = group.make_env()
        observations, _ = env.reset(seed=0)
        many = []
        for _ in range(calls):
            many.append(observations)
            observations, _, terminated, truncated, _ = env.step(
                {agent: env.action_space(agent).sample() for agent in env.agents})
            if not env.agents or any(terminated.values()) or any(truncated.values()):
                observations, _ = env.reset()
        times: dict[str, list[float]] = {"Policy": [], "AgentsPolicy": []}
        for _ in range(rounds + 1):
            for name, act, inputs in (("Policy", one, single), ("AgentsPolicy", group, many)):
                started = time.perf_counter()
                for obs in inputs:
                    act(obs)
                times[name].append((time.perf_counter() - started) / calls * 1e6)
    ratios = [g / o for o, g in zip(times["Policy"][1:], times["AgentsPolicy"][1:], strict=True)]
    values = {k: v[1:] for k, v in times.items()}
    names = {"Policy": "cartpole Policy (one observation)", "AgentsPolicy": "mpe-spread AgentsPolicy (3 agents, dict)"}
    return ["| policy | us per call, median (range) |", "|---|---|",
            *(f"| {names[k]} | {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f}) |" for k, v in values.items()),
            f"\nAgentsPolicy / Policy, per round: {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f})"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks latency", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--out", default="bench_results")
    parser.add_argument("--group", action=argparse.BooleanOptionalAction, default=True,
                        help="also an agent group's AgentsPolicy beside the one-agent Policy (needs the multiagent "
                             "extra)")
    args = parser.parse_args()
    lines = measure(args.calls, args.rounds, tuple(args.presets)) if args.presets else []
    if args.group:
        lines += ["", "Agent group:", "", *measure_group(args.calls, args.rounds)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join([f"# Policy latency, one observation per call (`python -m benchmarks latency --calls {args.calls}"
                      f" --rounds {args.rounds}`, {time.strftime('%Y-%m-%d')}, torch {torch.__version__}, 1 thread)",
                      "", *lines, ""])
    (out / "results_latency.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
