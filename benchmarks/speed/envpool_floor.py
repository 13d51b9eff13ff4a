"""Does EnvPool pay here? The env floor (every copy stepped with random actions, ended copies reset) of the vector
env ppo_td steps beside the same task in EnvPool, side by side, rounds alternating (issue 65, item 5).

    python -m benchmarks envpool_floor --envs CartPole-v1 Pendulum-v1 HalfCheetah-v5 Hopper-v5 --copies 1 8

ppo_td's side is ``ppo_td.envs.build_env``'s Gymnasium vector env for ``env.num_envs`` copies (one copy stepped and
reset directly, as the fast collector does; classic control numpy-vectorized where Gymnasium has it), stepped by
``benchmarks/common/floors.random_stepper``. EnvPool's is ``envpool.make_gymnasium(id, num_envs=n, batch_size=n)``
stepped synchronously with random actions (its copies reset themselves at the step after an episode ends). Both
sides draw their actions from the action space per step. Prints microseconds a frame, each way's median over the
rounds and EnvPool's speed over Gymnasium's (above 1: EnvPool faster); ``--out FILE`` appends a JSON line each.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common.floors import per_call, random_stepper


def gymnasium_step(env_id: str, copies: int) -> tuple[Any, Any]:
    """One step of ppo_td's vector env for ``env_id`` at ``copies`` copies, and what closes it."""
    from ppo_td.config import EnvConfig
    from ppo_td.envs import build_env

    built = build_env(EnvConfig(env_id, num_envs=copies), seed=0)
    return random_stepper(built.vector), built.close


def envpool_step(env_id: str, copies: int) -> tuple[Any, Any]:
    """One synchronous step of EnvPool's ``env_id`` at ``copies`` copies, and what closes it."""
    import envpool

    pool = envpool.make_gymnasium(env_id, num_envs=copies, batch_size=copies, seed=0)
    pool.reset()
    space = pool.action_space
    space.seed(0)

    def step() -> None:
        pool.step(np.stack([space.sample() for _ in range(copies)]))
    return step, pool.close


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks envpool_floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "Hopper-v5"])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000, help="steps (of every copy) a measurement (2,000)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        import envpool  # noqa: F401
    except ImportError:
        parser.error("EnvPool is not installed: pip install envpool")
    makers = {"gymnasium": gymnasium_step, "envpool": envpool_step}
    for env_id in args.envs:
        for copies in args.copies:
            micros: dict[str, list[float]] = {way: [] for way in makers}
            for r in range(args.rounds):
                for way in (list(makers) if r % 2 == 0 else list(reversed(makers))):
                    step, close = makers[way](env_id, copies)
                    try:
                        step()  # warm
                        micros[way].append(per_call(step, args.steps) * 1e6 / copies)
                    finally:
                        close()
            medians = {way: statistics.median(v) for way, v in micros.items()}
            ratio = medians["gymnasium"] / medians["envpool"]
            print(f"{env_id} x {copies}: gymnasium {medians['gymnasium']:.1f} us a frame, envpool "
                  f"{medians['envpool']:.1f}: envpool {ratio:.2f}x (rounds: {micros})", flush=True)
            if args.out is not None:
                row = {"date": datetime.date.today().isoformat(), "env": env_id, "copies": copies,
                       "micros_per_frame": micros, "envpool_speedup": ratio, "time": time.time()}
                with args.out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return 0
