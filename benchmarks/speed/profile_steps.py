"""Where one env step and one minibatch go, against their physical limits (issue 19's profile).

    python -m benchmarks profile_steps --preset cleanrl [--iterations 20]

Per env step of the fast collector: the policy's sampling, the env step (the Gymnasium vector step, reading
its outputs, the transforms), the partial resets; beside them the raw vector step and the raw network
forward. Per minibatch: ppo_td's update, the raw forward + backward + Adam step of the same two networks
(a bare sum of their outputs as the loss), and the floor: a hand-written plain-torch PPO minibatch with the
preset's loss terms, gradient clipping and a fused Adam step. One torch thread. The timers wrap the fast
collector's own two objects (ppo_td's, not TorchRL's), so the run is the library's code path with a clock
around its two halves.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

import torch

from benchmarks.common.floors import per_call, plain_ppo_minibatch, timed
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline
from ppo_td.training.loop import update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cleanrl")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    config = get_preset(args.preset)
    config = dataclasses.replace(config, total_frames=config.frames_per_batch * (args.iterations + 3),
                                 eval_episodes=0)
    p = build_pipeline(config)
    collector = p.collector
    policy, env = collector.fast_policy, collector.fast_env  # ppo_td's FastCollector parts (refuses otherwise)
    clock = dict.fromkeys(("policy", "env step", "resets", "collect", "gae", "update"), 0.0)
    policy.sample = timed(clock, "policy", policy.sample)
    env.step = timed(clock, "env step", env.step)
    env.reset = timed(clock, "resets", env.reset)
    batches = iter(collector)
    for i in range(args.iterations + 1):
        if i == 1:  # the first iteration warms up; the clocks start after it
            clock.update(dict.fromkeys(clock, 0.0))
        start = time.perf_counter()
        batch = next(batches)
        collected = time.perf_counter()
        with torch.no_grad():
            p.advantage(batch)
        advantaged = time.perf_counter()
        update(p, batch)
        clock["collect"] += collected - start
        clock["gae"] += advantaged - collected
        clock["update"] += time.perf_counter() - advantaged
    collector.shutdown()
    steps = args.iterations * (config.frames_per_batch // config.env.num_envs)
    minibatches = args.iterations * config.optim.update_epochs * config.optim.num_minibatches
    # the raw limits
    vec = p.built.vector
    vec.reset(seed=0)
    action = vec.action_space.sample()  # one action for every copy, of the env's own space

    def raw_step() -> None:
        _, _, terminated, truncated, _ = vec.step(action)
        if (terminated | truncated).any():
            vec.reset(options={"reset_mask": terminated | truncated})
    env_us = 1e6 * per_call(raw_step, 2000)
    vec.close()
    net, value = p.loss.fast.actor, p.loss.fast.critic
    obs = torch.randn(config.env.num_envs, *p.description.observation_shape)
    with torch.no_grad():
        forward_us = 1e6 * per_call(lambda: net(obs), 2000)
    rows = torch.randn(config.minibatch_size, *p.description.observation_shape)
    optimizer = torch.optim.Adam(p.parameters, lr=1e-6, eps=1e-5, fused=True)

    def raw_minibatch() -> None:
        out = net(rows)
        loss = (out[0] if isinstance(out, tuple) else out).logsumexp(-1).mean() + value(rows).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    raw_minibatch_ms = 1e3 * per_call(raw_minibatch, 300)
    plain_ms = 1e3 * per_call(plain_ppo_minibatch(config, net, value, rows, p.parameters), 300)
    us = {k: 1e6 * clock[k] / steps for k in ("policy", "env step", "resets", "collect")}
    o = config.optim
    print(f"preset {args.preset}: {config.env.num_envs} envs x {steps // args.iterations} steps, "
          f"{o.update_epochs} epochs x {o.num_minibatches} minibatches of {config.minibatch_size}")
    print("| per env step (all copies) | us |\n|---|---|")
    for name in ("policy", "env step", "resets"):
        print(f"| {name} | {us[name]:.0f} |")
    rest = us["collect"] - us["policy"] - us["env step"] - us["resets"]
    print(f"| the rest (stores, stacking, flags) | {rest:.0f} |")
    print(f"| **collection per step** | **{us['collect']:.0f}** |")
    print(f"| raw vector step | {env_us:.0f} |\n| raw policy network forward | {forward_us:.0f} |")
    print("\n| per minibatch | ms |\n|---|---|")
    print(f"| ppo_td update (loss, backward, clip, Adam, buffer) | {1e3 * clock['update'] / minibatches:.2f} |")
    print(f"| raw forward + backward + Adam of both networks | {raw_minibatch_ms:.2f} |")
    print(f"| plain-torch PPO minibatch (the preset's loss terms, clipping, fused Adam) | {plain_ms:.2f} |")
    print(f"| GAE per iteration | {1e3 * clock['gae'] / args.iterations:.2f} |")
    total = clock["collect"] + clock["gae"] + clock["update"]
    print(f"\ntotal {args.iterations * config.frames_per_batch / total:,.0f} frames/s")


if __name__ == "__main__":
    main()
