"""Seconds per PPO update with N torch threads, side by side in one process, optionally beside busy processes.

Alternates the thread counts update by update on the same collected batch (same weights each time) and prints the
median seconds of each and their ratio to the first: what ``ppo-td train --threads`` chooses between.

    python -m benchmarks threads --env-id LunarLander-v3 --threads 1 2 --busy 2
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import multiprocessing
import statistics
import time


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="LunarLander-v3")
    parser.add_argument("--preset", default=None, help="default: the preset made for --env-id, else generic")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run beside (a busy machine)")
    args = parser.parse_args()
    import dataclasses

    import torch

    from ppo_td.presets import get_preset, preset_for
    from ppo_td.training import build_pipeline, update

    logging.getLogger("torchrl").setLevel(logging.WARNING)
    name = args.preset or preset_for(args.env_id)[0]
    config = get_preset(name)
    config = dataclasses.replace(config, env=dataclasses.replace(config.env, env_id=args.env_id),
                                 compile=False)  # the eager update's threads (compile='auto' would compile long runs)
    torch.set_num_threads(1)
    pipeline = build_pipeline(config)
    batch = next(iter(pipeline.collector))
    pipeline.collector.shutdown()
    start = copy.deepcopy((pipeline.actor.state_dict(), pipeline.critic.state_dict(), pipeline.optimizer.state_dict()))
    busy = [multiprocessing.Process(target=_spin, args=(3600.0,), daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    seconds: dict[int, list[float]] = {n: [] for n in args.threads}
    try:
        for _ in range(args.repeats):
            for n in args.threads:
                pipeline.actor.load_state_dict(start[0])
                pipeline.critic.load_state_dict(start[1])
                pipeline.optimizer.load_state_dict(start[2])
                torch.set_num_threads(n)
                t = time.perf_counter()
                update(pipeline, batch.clone())
                seconds[n].append(time.perf_counter() - t)
    finally:
        for p in busy:
            p.terminate()
    base = statistics.median(seconds[args.threads[0]])
    print(json.dumps({"env": args.env_id, "preset": name, "busy": args.busy, "cores": multiprocessing.cpu_count(),
                      "seconds": {n: [round(s, 3) for s in v] for n, v in seconds.items()},
                      "median_ratio_to_first": {n: round(statistics.median(v) / base, 2)
                                                for n, v in seconds.items()}}))


if __name__ == "__main__":
    main()
