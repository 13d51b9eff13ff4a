"""A TorchRL env trained by ppo_td beside the same env by its Gymnasium id: frames/s, each run in its own process.

Ways: ``gym`` (the Gymnasium id: ppo_td's fast collector), ``loop`` (TorchRL's ``GymEnv`` from a factory:
ppo_td's env loop, ``EnvLoopCollector``), ``collector`` (the same factory through TorchRL's ``Collector``,
``collector.step_loop='torchrl'``: how ppo_td collected TorchRL envs before the env loop), ``tutorial`` (TorchRL's
PPO tutorial env, ``examples.torchrl_envs:tutorial_env``, on the env loop), ``gym-transforms`` (the Gymnasium id
with the tutorial's ``ObservationNorm`` as ``env.transforms``: ppo_td's fast collector runs it). One run of each per
seed, alternating, one torch thread; frames/s over the run (training seconds, after the first iteration) and
collection frames/s; ratios to ``gym`` pairwise per seed.

    python -m benchmarks torchrl_envs --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_SCRIPT = """
import dataclasses, json, torch
torch.set_num_threads(1)
import ppo_td
c = ppo_td.get_preset({preset!r})
c = dataclasses.replace(c, seed={seed}, total_frames={frames}, eval_episodes=0,
                        env=dataclasses.replace(c.env, env_id={env_id!r}),
                        collector=dataclasses.replace(c.collector, step_loop={step_loop!r}))
h = ppo_td.train(c).history
rest = h[1:] or h
seconds = rest[-1]["time"] - (h[0]["time"] if len(h) > 1 else 0.0)
frames = rest[-1]["frames"] - (h[0]["frames"] if len(h) > 1 else 0)
print(json.dumps({{"sps": frames / seconds, "collect_sps": frames / sum(m["collect_seconds"] for m in rest)}}))
"""


def one(way: str, env: str, preset: str, seed: int, frames: int) -> dict:
    env_id, step_loop = {"gym": (env, "auto"), "loop": (f"examples.torchrl_envs:gym_env env_name={env}", "auto"),
                         "collector": (f"examples.torchrl_envs:gym_env env_name={env}", "torchrl"),
                         "tutorial": (f"examples.torchrl_envs:tutorial_env env_name={env}", "auto"),
                         "gym-transforms": (env, "auto")}[way]
    env_id, _, kwargs = env_id.partition(" ")
    script = _SCRIPT.format(preset=preset, seed=seed, frames=frames, env_id=env_id, step_loop=step_loop)
    if way == "gym-transforms":  # the tutorial's transforms on the Gymnasium id, as env.transforms
        script = script.replace("env=dataclasses.replace(c.env, env_id=", "env=dataclasses.replace(c.env, transforms=("
                                "\"torchrl.envs:ObservationNorm in_keys=['observation'] standard_normal=True\",), "
                                "env_id=")
    if kwargs:
        script = script.replace("env=dataclasses.replace(c.env, env_id=", f"env=dataclasses.replace(c.env, "
                                f"kwargs=({kwargs!r},), env_id=")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=3600, check=False)
    if proc.returncode:
        raise RuntimeError(f"{way} seed {seed} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks torchrl_envs", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="InvertedDoublePendulum-v5")
    parser.add_argument("--preset", default="generic")
    parser.add_argument("--frames", type=int, default=20_480)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ways = ["gym", "loop", "collector", "tutorial", "gym-transforms"]
    parser.add_argument("--ways", nargs="+", choices=ways, default=ways)
    args = parser.parse_args()
    if args.ways[0] != "gym":
        parser.error("--ways: start with gym (the others are compared with it)")
    out: dict[str, list[dict]] = {w: [] for w in args.ways}
    for seed in args.seeds:
        for way in args.ways if seed % 2 else reversed(args.ways):
            out[way].append(one(way, args.env, args.preset, seed, args.frames))
            print(f"seed {seed} {way}: {out[way][-1]['sps']:,.0f} frames/s", flush=True)
    print(f"\n{args.env}, preset {args.preset}, {args.frames:,} frames, seeds {' '.join(map(str, args.seeds))}; "
          "median (min-max); ratios to gym pairwise per seed\n")
    print("| way | frames/s | collection frames/s | gym / way |\n|---|---|---|---|")
    for way in args.ways:
        sps = [r["sps"] for r in out[way]]
        ratios = [g["sps"] / r["sps"] for g, r in zip(out["gym"], out[way], strict=True)]
        collect = statistics.median(r["collect_sps"] for r in out[way])
        print(f"| {way} | {statistics.median(sps):,.0f} ({min(sps):,.0f}-{max(sps):,.0f}) | {collect:,.0f} | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
