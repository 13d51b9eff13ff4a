"""Advantages normalized per minibatch, with minibatches of one transition: the std of one number is NaN.

The loss is NaN from the first minibatch, and so are the weights after the first step.

    ppo-td doctor examples/doctor/nan_advantage.py
"""

import torch
from _common import actor_critic, cartpole_batch
from torch.distributions import Categorical

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch(steps=16)
actor, critic, optimizer = actor_critic()
with torch.no_grad():
    returns = rewards + 0.99 * critic(next_obs).squeeze(-1) * (1 - dones)
    advantages = returns - critic(obs).squeeze(-1)
    old_log_probs = Categorical(logits=actor(obs)).log_prob(actions)

for i in range(len(obs)):  # the mistake: minibatches of size 1
    mb = slice(i, i + 1)
    adv = (advantages[mb] - advantages[mb].mean()) / advantages[mb].std()
    ratio = (Categorical(logits=actor(obs[mb])).log_prob(actions[mb]) - old_log_probs[mb]).exp()
    value_loss = (critic(obs[mb]).squeeze(-1) - returns[mb]).pow(2).mean()
    loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean() + 0.5 * value_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
