"""Run one collection and one update of a pipeline under the doctor's audit."""

from __future__ import annotations

import torch

from ppo_td import keys
from ppo_td.doctor.audit import Audit, audit
from ppo_td.train import Pipeline, update


def checkup(pipeline: Pipeline) -> Audit:
    """Collect one batch and run one full update of ``pipeline`` under :func:`ppo_td.doctor.audit`.

    Checks the rollout for autograd graphs, the first minibatch's PPO ratio, and
    every backward and optimizer step of the update. Returns the audit.
    """
    p = pipeline
    batch = next(iter(p.collector))
    try:
        with audit(actor=p.actor, critic=p.critic, optimizers=[p.optimizer]) as a:
            a.check_rollout(batch)
            with torch.no_grad():
                p.advantage(batch)
                p.buffer.empty()
                p.buffer.extend(batch.reshape(-1))
                first = p.buffer.sample()[: p.config.minibatch_size]
                new = p.actor.get_dist(first).log_prob(first.get(keys.ACTION))
                a.check_ratio(new - first.get(p.loss.tensor_keys.sample_log_prob))
            update(p, batch)
    finally:
        p.collector.shutdown()
    return a
