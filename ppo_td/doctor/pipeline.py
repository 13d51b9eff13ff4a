"""Run one collection and one update of a pipeline under the doctor's audit."""

from __future__ import annotations

import torch
from torchrl.modules import set_recurrent_mode

from ppo_td import keys
from ppo_td.doctor.watch import Audit, audit
from ppo_td.models import policy_net, value_net
from ppo_td.models.multiagent import group_networks, group_policy, team_members
from ppo_td.training import Pipeline, update
from ppo_td.training.loop import sequences


def checkup(pipeline: Pipeline) -> Audit:
    """Collect one batch and run one full update of ``pipeline`` under :func:`ppo_td.doctor.audit`.

    Checks the rollout for autograd graphs, the first minibatch's PPO ratio, and
    every backward and optimizer step of the update. Returns the audit.
    """
    p = pipeline
    if p.groups:  # several agent groups: each group's networks and loss, audited by the group's name
        return _team_checkup(p)
    # ppo_td's own networks where the actor and critic are ppo_td's: the fast paths call them directly, so the
    # audit's forward hooks see every forward on either path; other modules are audited as they are
    actor, critic = policy_net(p.actor), value_net(p.critic)
    group = group_networks(p.actor, p.critic) if actor is None or critic is None else None
    if group is not None:  # an agent group's: the fast loss calls these two as well
        actor, critic = group[0].net, group[1]
    actor, critic = p.actor if actor is None else actor, p.critic if critic is None else critic
    batch = next(iter(p.collector))
    if p.device.type != "cpu":  # as the training loop does: collected on the CPU, GAE and the update on the device
        batch = batch.to(p.device)
    try:
        with audit(actor=actor, critic=critic, optimizers=[p.optimizer]) as a:
            a.check_rollout(batch)
            with torch.no_grad():
                p.advantage(batch)
                if p.sequence_length is None:
                    first = batch.reshape(-1)[torch.randperm(batch.numel())[: p.config.minibatch_size]]
                else:  # a recurrent model: whole sequences, replayed from their stored states through time
                    size = p.config.num_sequences // p.config.optim.num_minibatches
                    first = sequences(batch, p.sequence_length)[:size]
                with set_recurrent_mode(p.sequence_length is not None):
                    new = p.actor.get_dist(first).log_prob(first.get(p.loss.tensor_keys.action))
                a.check_ratio(new - first.get(p.loss.tensor_keys.sample_log_prob))
            update(p, batch)
    finally:
        p.collector.shutdown()
    return a


def _team_checkup(p: Pipeline) -> Audit:
    """:func:`checkup` of an env with several agent groups: every group's policy and value networks audited under
    the group's name, and each group's PPO ratio on the first minibatch."""
    actors = team_members(p.actor, p.groups, keys.ACTION)
    critics = team_members(p.critic, p.groups, keys.STATE_VALUE)
    nets = {g: group_networks(actors[g], critics[g]) for g in p.groups}
    policies = {f"{g}.actor": nets[g][0].net if nets[g] is not None else actors[g] for g in p.groups}
    values = {f"{g}.critic": nets[g][1] if nets[g] is not None else critics[g] for g in p.groups}
    batch = next(iter(p.collector))
    if p.device.type != "cpu":
        batch = batch.to(p.device)
    try:
        with audit(actor=policies, critic=values, optimizers=[p.optimizer]) as a:
            a.check_rollout(batch)
            with torch.no_grad():
                p.advantage(batch)
                first = batch.reshape(-1)[torch.randperm(batch.numel())[: p.config.minibatch_size]]
                for group in p.groups:  # the keys each group's actor writes: its action and its log-prob
                    plain = group_policy(actors[group])
                    log_prob = plain.log_prob_key if plain is not None else next(
                        (k for k in actors[group].out_keys if isinstance(k, tuple) and k[-1].endswith("log_prob")),
                        None)
                    if log_prob is None:  # a user's actor that names its log-prob otherwise: no ratio to check
                        continue
                    new = actors[group].get_dist(first).log_prob(first.get((group, keys.ACTION)))
                    a.check_ratio(new - first.get(log_prob))
            update(p, batch)
    finally:
        p.collector.shutdown()
    return a
