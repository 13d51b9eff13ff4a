"""One forward of a shared actor-critic network, two losses, and an optimizer step between their backwards.

``policy_loss.backward(retain_graph=True); optimizer.step(); value_loss.backward()``: the step changes the
shared weights in place after the forward that ``value_loss`` runs through. Here nothing even fails (when
the backward needs a changed weight it fails with "modified by an inplace operation"): the value loss
silently gets the gradient of weights that no longer exist, and the first step moves the value head with no
gradient. The doctor names the step and the forward before the backward runs.

    ppo-td doctor examples/doctor/step_between_forward_and_backward.py
"""

import torch
from _common import cartpole_batch
from torch import nn


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
        self.pi = nn.Linear(32, 2)
        self.v = nn.Linear(32, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.pi(h), self.v(h).squeeze(-1)


torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
net = ActorCritic()
optimizer = torch.optim.Adam(net.parameters(), lr=3e-4)
with torch.no_grad():
    logits, values = net(obs)
    old_log_probs = torch.distributions.Categorical(logits=logits).log_prob(actions)
    returns = rewards + 0.99 * net(next_obs)[1] * (1 - dones)
    advantages = returns - values

for _epoch in range(4):
    logits, values = net(obs)
    ratio = (torch.distributions.Categorical(logits=logits).log_prob(actions) - old_log_probs).exp()
    policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
    value_loss = (values - returns).pow(2).mean()
    optimizer.zero_grad()
    policy_loss.backward(retain_graph=True)
    optimizer.step()  # the mistake: a step between the forward and the value loss's backward
    value_loss.backward()
    optimizer.step()
