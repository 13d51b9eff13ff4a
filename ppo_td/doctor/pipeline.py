"""Run one collection and one update of a pipeline under the doctor's audit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.modules import set_recurrent_mode

from ppo_td import keys
from ppo_td.doctor.watch import Audit, audit
from ppo_td.models import policy_net, value_net
from ppo_td.models.multiagent import group_networks, group_policy, team_members
from ppo_td.training import Pipeline, update
from ppo_td.training.loop import sequences


def checkup(pipeline: Pipeline) -> Audit:
    """Collect one batch and run one full update of ``pipeline`` under :func:`ppo_td.doctor.audit`.

    Checks the rollout for autograd graphs, the first minibatch's PPO ratio (each agent group's, for an env with
    several), and every backward and optimizer step of the update. Returns the audit.
    """
    p = pipeline
    actor, critic = _team_modules(p) if p.groups else _modules(p)
    batch = next(iter(p.collector))
    if p.device.type != "cpu":  # as the training loop does: collected on the CPU, GAE and the update on the device
        batch = batch.to(p.device)
    try:
        with audit(actor=actor, critic=critic, optimizers=[p.optimizer]) as a:
            a.check_rollout(batch)
            with torch.no_grad():
                p.advantage(batch)
                for log_ratio in _log_ratios(p, batch):
                    a.check_ratio(log_ratio)
            update(p, batch)
    finally:
        p.collector.shutdown()
    return a


def _modules(p: Pipeline) -> tuple[Any, Any]:
    """The actor and critic to audit: ppo_td's own networks where the actor and critic are ppo_td's (the fast paths
    call them directly, so the audit's forward hooks see every forward on either path), else the modules as they
    are."""
    actor, critic = policy_net(p.actor, acting=True), value_net(p.critic)
    group = group_networks(p.actor, p.critic) if actor is None or critic is None else None
    if group is not None:  # an agent group's: the fast loss calls these two as well
        actor, critic = group[0].net, group[1]
    return p.actor if actor is None else actor, p.critic if critic is None else critic


def _team_modules(p: Pipeline) -> tuple[dict[str, Any], dict[str, Any]]:
    """Several agent groups: each group's policy and value networks (as :func:`_modules` picks them), audited under
    the group's name (``adversary.actor``, ``adversary.critic``, ...)."""
    actors = team_members(p.actor, p.groups, keys.ACTION)
    critics = team_members(p.critic, p.groups, keys.STATE_VALUE)
    nets = {g: group_networks(actors[g], critics[g]) for g in p.groups}
    return ({f"{g}.actor": nets[g][0].net if nets[g] is not None else actors[g] for g in p.groups},
            {f"{g}.critic": nets[g][1] if nets[g] is not None else critics[g] for g in p.groups})


def _log_ratios(p: Pipeline, batch: TensorDictBase) -> Iterator[torch.Tensor]:
    """log(pi_new / pi_old) on the first minibatch (a recurrent model: whole sequences replayed from their stored
    states); with several agent groups, each group's, from the keys its actor writes."""
    if p.sequence_length is None:
        first = batch.reshape(-1)[torch.randperm(batch.numel())[: p.config.minibatch_size]]
    else:
        size = p.config.num_sequences // p.config.optim.num_minibatches
        first = sequences(batch, p.sequence_length)[:size]
    if not p.groups:
        with set_recurrent_mode(p.sequence_length is not None):
            new = p.actor.get_dist(first).log_prob(first.get(p.loss.tensor_keys.action))
        yield new - first.get(p.loss.tensor_keys.sample_log_prob)
        return
    actors = team_members(p.actor, p.groups, keys.ACTION)
    for group, actor in actors.items():
        plain = group_policy(actor)
        log_prob = plain.log_prob_key if plain is not None else next(
            (k for k in actor.out_keys if isinstance(k, tuple) and k[-1].endswith("log_prob")), None)
        if log_prob is not None:  # else a user's actor that names its log-prob otherwise: no ratio to check
            yield actor.get_dist(first).log_prob(first.get((group, keys.ACTION))) - first.get(log_prob)
