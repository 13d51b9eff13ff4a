"""Old log-probs recomputed from the current policy: the ratio is exactly 1 in every minibatch, so the
clipping never acts and the update is a plain policy gradient.

    ppo-td doctor examples/doctor/ratio_always_one.py
"""

import torch
from _common import actor_critic, cartpole_batch, rollout
from torch.distributions import Categorical

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
actor, critic, optimizer = actor_critic()
old_log_probs, returns, advantages = rollout(actor, critic, obs, actions, rewards, next_obs, dones)  # no_grad

for _epoch in range(4):
    for mb in torch.randperm(len(obs)).split(32):
        dist = Categorical(logits=actor(obs[mb]))
        new_log_probs = dist.log_prob(actions[mb])
        ratio = (new_log_probs - new_log_probs.detach()).exp()  # the mistake
        adv = (advantages[mb] - advantages[mb].mean()) / (advantages[mb].std() + 1e-8)
        policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        value_loss = (critic(obs[mb]).squeeze(-1) - returns[mb]).pow(2).mean()
        loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
