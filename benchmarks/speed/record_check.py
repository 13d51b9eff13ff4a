"""What checking an env object's record costs when it is given (``ppo_td.envs.verify``): the median seconds of
``env_config_for`` (record and check) and of the check alone, per env, in one process.

    python -m benchmarks record_check --env-ids CartPole-v1 Pendulum-v1 HalfCheetah-v5 ALE/Pong-v5
"""

from __future__ import annotations

import argparse
import copy
import functools
import statistics
import time
import warnings


def _median(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-ids", nargs="+", default=["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5"])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import gymnasium as gym
    import torch

    from ppo_td.config import EnvConfig
    from ppo_td.envs.ids import register_packaged
    from ppo_td.envs.rebuild import env_config_for
    from ppo_td.envs.verify import check_rebuilds

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # Gymnasium's env checker on the copies
    for env_id in args.env_ids:
        register_packaged(env_id)
        env = gym.make(env_id)
        config = env_config_for(env, EnvConfig())
        whole = _median(functools.partial(env_config_for, env, EnvConfig()), args.repeats)
        check = _median(functools.partial(check_rebuilds, functools.partial(copy.deepcopy, env), config, env_id),
                        args.repeats)
        print(f"{env_id}: record and check {whole * 1000:.1f} ms, the check {check * 1000:.1f} ms "
              f"(medians of {args.repeats})", flush=True)
        env.close()


if __name__ == "__main__":
    main()
