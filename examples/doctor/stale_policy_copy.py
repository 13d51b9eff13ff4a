"""The rollout acts with a copy of the policy that is never updated (here the trained policy has moved since the
copy was made, as it has after a first update): the old log-probs are not the trained policy's, and the ratio is
not 1 on the first minibatch.

    ppo-td doctor examples/doctor/stale_policy_copy.py
"""

import copy

import torch
from _common import actor_critic, cartpole_batch
from torch.distributions import Categorical

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
actor, critic, optimizer = actor_critic()
behaviour = copy.deepcopy(actor)  # the mistake: the copy acts, and never learns
with torch.no_grad():  # (an update since the copy)
    for p in actor.parameters():
        p.add_(0.1 * torch.randn_like(p))
with torch.no_grad():  # the rollout's log-probs and the advantages: constants of the update
    old_log_probs = Categorical(logits=behaviour(obs)).log_prob(actions)
    returns = rewards + 0.99 * critic(next_obs).squeeze(-1) * (1 - dones)
    advantages = returns - critic(obs).squeeze(-1)

for _epoch in range(4):
    for mb in torch.randperm(len(obs)).split(32):
        dist = Categorical(logits=actor(obs[mb]))
        ratio = (dist.log_prob(actions[mb]) - old_log_probs[mb]).exp()
        adv = (advantages[mb] - advantages[mb].mean()) / (advantages[mb].std() + 1e-8)
        policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        value_loss = (critic(obs[mb]).squeeze(-1) - returns[mb]).pow(2).mean()
        loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
