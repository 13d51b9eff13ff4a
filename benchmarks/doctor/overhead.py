"""Cost of the doctor's audit per PPO update, measured side by side in one run.

Alternates plain and audited updates of the same pipeline on the same batch and
reports the median seconds of each and their ratio.

    python -m benchmarks doctor_overhead --preset cartpole --repeats 10
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

import torch

from ppo_td.doctor import audit
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cartpole")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    config = get_preset(args.preset)
    p = build_pipeline(config)
    batches = iter(p.collector)

    def fresh_batch():
        batch = next(batches)
        with torch.no_grad():
            p.advantage(batch)
        return batch

    plain, audited = [], []
    update(p, fresh_batch())  # warm-up
    for _ in range(args.repeats):  # alternate, each update on its own fresh batch
        batch = fresh_batch()
        start = time.perf_counter()
        update(p, batch)
        plain.append(time.perf_counter() - start)
        batch = fresh_batch()
        start = time.perf_counter()
        with audit(actor=p.actor, critic=p.critic, optimizers=[p.optimizer]) as a:
            update(p, batch)
        audited.append(time.perf_counter() - start)
        assert a.ok, a.report()
    p.collector.shutdown()
    minibatches = config.optim.update_epochs * config.optim.num_minibatches
    row = {
        "preset": args.preset, "minibatches_per_update": minibatches,
        "plain_s": statistics.median(plain), "audited_s": statistics.median(audited),
        "ratio": statistics.median(audited) / statistics.median(plain),
    }
    print(json.dumps(row))
    print("\n| preset | minibatches per update | plain update | audited update | ratio |")
    print("|---|---|---|---|---|")
    print(f"| {args.preset} | {minibatches} | {row['plain_s'] * 1e3:.1f} ms | {row['audited_s'] * 1e3:.1f} ms | "
          f"{row['ratio']:.2f}x |")


if __name__ == "__main__":
    main()
