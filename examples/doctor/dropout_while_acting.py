"""A policy with dropout that acts in train mode: the rollout's log-probs come from a randomly thinned
network that the update never reproduces.

    ppo-td doctor examples/doctor/dropout_while_acting.py
"""

import torch
from _common import actor_critic, cartpole_batch
from torch.distributions import Categorical

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
actor, critic, optimizer = actor_critic()
actor = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 2))
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4)
# the mistake: the rollout below acts without actor.eval(), dropout on
with torch.no_grad():  # the rollout's log-probs and the advantages: constants of the update
    old_log_probs = Categorical(logits=actor(obs)).log_prob(actions)
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
