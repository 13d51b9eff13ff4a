"""The TD target is computed from the live critic without ``torch.no_grad()``.

The value loss then pulls the target towards the prediction as much as the prediction towards the target:
the critic learns to make both agree, not to predict returns.

    ppo-td doctor examples/doctor/value_target_not_detached.py
"""

import torch
from _common import cartpole_batch
from torch import nn

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)

for _epoch in range(4):
    target = rewards + 0.99 * critic(next_obs).squeeze(-1) * (1 - dones)  # the mistake: not detached
    value_loss = torch.nn.functional.mse_loss(critic(obs).squeeze(-1), target)
    optimizer.zero_grad()
    value_loss.backward()
    optimizer.step()
