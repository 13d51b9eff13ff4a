"""Collection frames/s by observation space, side by side in one process: each env with its own space beside the
same env with its observation flattened to a Box (Gymnasium's FlattenObservation), on ppo_td's step loop and on
TorchRL's Collector; rounds alternate, the ratio is taken round by round. Both read their observations with
``model.encoder='flat'`` (images flattened, discrete entries one-hot), so the networks are the same size and the
difference is the step loop's.

    python -m benchmarks spaces --rounds 5

Writes nothing; prints one JSON line per measurement and a table (median, min-max over rounds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import torch

from ppo_td import EnvConfig, get_preset
from ppo_td.training import build_pipeline

PAIRS = {  # name -> (env id, its space)
    "Blackjack-v1": ("Blackjack-v1", "Tuple of Discrete"),
    "Shop (tests/space_envs.py)": ("space_envs:shop", "Dict: float Box, MultiDiscrete"),
    "Seek (tests/space_envs.py)": ("space_envs:seek", "Dict: uint8 image, Discrete, MultiDiscrete, Tuple"),
    "Taxi-v4": ("Taxi-v4", "Discrete, mask in info"),
    "FrozenLake-v1": ("FrozenLake-v1", "Discrete"),
}


def flat(env_id: str):
    """The env of ``env_id`` with its observation flattened to a Box (a factory ppo_td records)."""
    return gym.wrappers.FlattenObservation(gym.make(env_id) if ":" not in env_id else _factory(env_id)())


def _factory(env_id: str):
    from ppo_td.envs import env_factory

    return env_factory(env_id)


def rate(env: EnvConfig, step_loop: str, batches: int, num_envs: int) -> tuple[float, str]:
    """Frames/s of ``batches`` batches of 512 frames (after one batch of warm-up), and the collector's class."""
    config = get_preset("generic")
    config = dataclasses.replace(config, env=dataclasses.replace(env, num_envs=num_envs), frames_per_batch=512,
                                 model=dataclasses.replace(config.model, encoder="flat"),
                                 total_frames=512 * (batches + 1),
                                 collector=dataclasses.replace(config.collector, step_loop=step_loop))
    p = build_pipeline(config)
    batches_ = iter(p.collector)
    next(batches_)
    start, frames = time.perf_counter(), 0
    for batch in batches_:
        frames += batch.numel()
    seconds = time.perf_counter() - start
    kind = type(p.collector).__name__
    p.collector.shutdown()
    return frames / seconds, kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--num-envs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("ppo_td").setLevel(logging.ERROR)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))  # space_envs
    rows = []
    for r in range(args.rounds):
        for name, (env_id, _) in PAIRS.items():
            flat_id = f"benchmarks.speed.spaces:flat_{_slug(name)}"
            order = [("own", EnvConfig(env_id)), ("box", EnvConfig(flat_id))]
            for loop in ("auto", "torchrl"):
                for which, env in (order if r % 2 == 0 else order[::-1]):
                    fps, kind = rate(env, loop, args.batches, args.num_envs)
                    rows.append({"round": r, "env": name, "space": which, "loop": loop, "collector": kind,
                                 "frames_per_s": round(fps)})
                    print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.num_envs} env copies, batches of 512 frames, model.encoder='flat', {args.rounds} rounds; "
          "frames/s median (min-max)\n")
    print("| env | space | ppo_td step loop | same env, Box | ratio Box/own | TorchRL Collector, own space |")
    print("|---|---|---|---|---|---|")
    for name, (_, space) in PAIRS.items():
        def pick(which, loop, name=name):
            return [x["frames_per_s"] for x in rows if x["env"] == name and x["space"] == which and x["loop"] == loop]
        own, box, slow = pick("own", "auto"), pick("box", "auto"), pick("own", "torchrl")
        ratios = [b / o for o, b in zip(own, box, strict=True)]
        kinds = {x["collector"] for x in rows if x["env"] == name and x["space"] == "own" and x["loop"] == "auto"}
        print(f"| {name} | {space} | {statistics.median(own):,.0f} ({'/'.join(sorted(kinds))}) | "
              f"{statistics.median(box):,.0f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"| {statistics.median(slow):,.0f} |")


def _slug(name: str) -> str:
    return name.split()[0].split("-")[0].lower()


def flat_blackjack():
    return flat("Blackjack-v1")


def flat_shop():
    return flat("space_envs:shop")


def flat_seek():
    return flat("space_envs:seek")


def flat_taxi():
    return flat("Taxi-v4")


def flat_frozenlake():
    return flat("FrozenLake-v1")


if __name__ == "__main__":
    main()
