"""What a finished VMAS copy costs: one ``reset_at`` call beside a step and a full reset, at N copies.

VMAS resets copies one index at a time (``Environment.reset_at``; TorchRL's ``VmasWrapper`` does the same), so a
step where many copies finish costs more: what makes frames/s fall as agents learn to finish early.

    python -m benchmarks vmas_resets --num-envs 4096 --device cpu
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import vmas

    torch.set_num_threads(1)
    env = vmas.make_env(args.scenario, num_envs=args.num_envs, device=args.device, seed=0, continuous_actions=True)
    env.reset()
    actions = [torch.zeros(args.num_envs, 2, device=args.device) for _ in env.agents]

    def timed(fn, n: int) -> float:
        fn()
        if args.device != "cpu":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(n):
            fn(i) if fn.__code__.co_argcount else fn()
        if args.device != "cpu":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n

    step = timed(lambda: env.step(actions), 20)
    one = timed(lambda i=0: env.reset_at(i % args.num_envs, return_observations=False), 100)
    full = timed(lambda: env.reset(return_observations=False), 5)
    print(f"{args.scenario}, {args.num_envs} copies on {args.device}: step {step * 1e3:.2f} ms, reset_at "
          f"{one * 1e3:.3f} ms a copy, full reset {full * 1e3:.2f} ms; {step / one:.0f} finished copies cost "
          "as much as the step")


if __name__ == "__main__":
    main()
