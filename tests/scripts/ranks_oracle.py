"""Run under ``torchrun --nproc-per-node 2``: the oracles of a run over ranks (tests/test_ranks.py reads the JSON each
rank writes to ``argv[1]/rank<r>.json``).

1. An update on 2 ranks, each on half of the batch, against one process's update on the whole batch, from the same
   weights: the weights after it, the epochs the KL stop let run, for several settings.
2. The normalizers' statistics merged over the ranks against one normalizer fed every rank's data.
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement

from ppo_td.config import EnvConfig, LossConfig, ModelConfig, OptimConfig
from ppo_td.envs import RunningObsNorm
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, update
from ppo_td.training.ranks import launched

torch.set_num_threads(1)
ENVS, STEPS, MINIBATCHES = 8, 16, 2


def config(optim=None, preset="cleanrl", **changes):
    base = get_preset(preset)
    optim = optim or dataclasses.replace(base.optim, num_minibatches=MINIBATCHES, update_epochs=3)
    env, model = ((EnvConfig("CartPole-v1", num_envs=ENVS), ModelConfig(hidden_sizes=(16, 16))) if preset == "cleanrl"
                  else (dataclasses.replace(base.env, num_envs=ENVS), base.model))  # the preset's own networks
    return dataclasses.replace(base, env=env, model=model, frames_per_batch=ENVS * STEPS,
                               total_frames=ENVS * STEPS * 4, eval_episodes=0, optim=optim, **changes)


def in_order(size: int) -> ReplayBuffer:
    """A buffer whose minibatches are the batch in order: the oracle knows which transitions each holds."""
    return ReplayBuffer(storage=LazyTensorStorage(size), sampler=SamplerWithoutReplacement(drop_last=True,
                                                                                            shuffle=False),
                        batch_size=size)


def share(batch, rank: int, world: int):
    """This rank's half of every minibatch: a minibatch of the whole batch is ENVS / MINIBATCHES consecutive env
    rows (flattened env by env); rank r holds the r-th part of each."""
    rows = ENVS // MINIBATCHES
    mine = [m * rows + r for m in range(MINIBATCHES) for r in range(rank * rows // world, (rank + 1) * rows // world)]
    return batch[mine]


def flat(module) -> torch.Tensor:
    return torch.cat([q.detach().flatten() for q in module.parameters()])


def update_oracle(ranks, name: str, cfg) -> dict:
    spread = build_pipeline(cfg, buffer=in_order(cfg.frames_per_batch // ranks.world), ranks=ranks)
    one = build_pipeline(cfg, buffer=in_order(cfg.frames_per_batch), ranks=None)
    one.actor.load_state_dict(spread.actor.state_dict())
    one.critic.load_state_dict(spread.critic.state_dict())
    one_start = {"actor": dict(spread.actor.state_dict()), "critic": dict(spread.critic.state_dict())}
    one_start = {k: {n: t.clone() for n, t in v.items()} for k, v in one_start.items()}
    batch = next(iter(one.collector))  # the same batch on every rank: the same seeds, the same weights
    one.collector.shutdown()
    mine = share(batch.clone(), ranks.rank, ranks.world)
    with torch.no_grad():
        one.advantage(batch)
        spread.advantage(mine)  # normalize_values: the statistics of the whole batch's targets
    whole = update(one, batch)
    split = update(spread, mine)
    diffs = {part: float((flat(getattr(one, part)) - flat(getattr(spread, part))).abs().max())
             for part in ("actor", "critic")}
    scale = float(flat(one.actor).abs().max())
    alone = build_pipeline(dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, num_envs=ENVS // 2),
                                               frames_per_batch=cfg.frames_per_batch // 2),
                           buffer=in_order(cfg.frames_per_batch // 2), ranks=None)
    alone.actor.load_state_dict(one_start["actor"])
    alone.critic.load_state_dict(one_start["critic"])
    alone_batch = share(batch.clone(), ranks.rank, ranks.world)
    with torch.no_grad():
        alone.advantage(alone_batch)
    alone.collector.shutdown()
    update(alone, alone_batch)  # the control: a rank's half alone, nothing averaged
    diffs["alone"] = float((flat(one.actor) - flat(alone.actor)).abs().max())
    rates = [one.optimizer.param_groups[0]["lr"], spread.optimizer.param_groups[0]["lr"], cfg.optim.lr]
    return {"name": name, "diff": diffs, "scale": scale, "epochs": [whole["epochs"], split["epochs"]], "lr": rates,
            "weights": flat(spread.actor).tolist()[:50] + flat(spread.critic).tolist()[:50]}


def statistics_oracle(ranks) -> dict:
    """Each rank's normalizer fed its own observations, merged, against one fed all of them."""
    generator = torch.Generator().manual_seed(7)
    data = [torch.randn(50 + 30 * r, 3, generator=generator) * (r + 1) + r for r in range(ranks.world)]
    mine = RunningObsNorm(3)
    everyone = RunningObsNorm(3)

    class Env:  # what merge_statistics reads: the env's transform
        transform = mine

    base = [mine.moments()]
    mine.observed(data[ranks.rank])
    for part in data:
        everyone.observed(part)
    ranks.merge_statistics(Env, base)
    got, want = mine.moments(), everyone.moments()
    return {k: float((got[k] - want[k]).abs().max()) for k in ("count", "mean", "var")}


def main() -> None:
    out = Path(sys.argv[1])
    ranks = launched()
    assert ranks is not None and ranks.world == 2, "run me with torchrun --nproc-per-node 2"
    results = [
        update_oracle(ranks, "default", config()),
        update_oracle(ranks, "kl stop", config(optim=dataclasses.replace(
            config().optim, target_kl=1e-9, num_minibatches=MINIBATCHES, update_epochs=3))),
        update_oracle(ranks, "value norm", config(loss=dataclasses.replace(LossConfig(), normalize_values=True))),
        update_oracle(ranks, "halfcheetah", config(preset="halfcheetah")),
        # the KL-adaptive rate (a rate that moves within the update): each minibatch's KL, each epoch's, whole
        update_oracle(ranks, "kl adaptive", config(optim=dataclasses.replace(
            config().optim, lr=1e-2, anneal_lr=False, desired_kl=2e-3))),
        update_oracle(ranks, "kl adaptive epoch", config(optim=dataclasses.replace(
            config().optim, lr=1e-3, anneal_lr=False, desired_kl=0.05, kl_lr_every="epoch"))),
        update_oracle(ranks, "no adv norm", config(loss=dataclasses.replace(LossConfig(), normalize_advantage=False),
                                                   optim=dataclasses.replace(OptimConfig(), num_minibatches=2,
                                                                             update_epochs=2))),
    ]
    report = {"rank": ranks.rank, "updates": results, "statistics": statistics_oracle(ranks)}
    (out / f"rank{ranks.rank}.json").write_text(json.dumps(report))
    dist.barrier()


if __name__ == "__main__":
    main()
