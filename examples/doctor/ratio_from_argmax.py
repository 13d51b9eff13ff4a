"""The ratio is built from the greedy action (argmax) instead of the log-probability of the stored action.

Nothing fails: the value loss keeps the loss differentiable, the optimizer steps, and the policy never
learns, because argmax has no gradient. The doctor names the policy that gets no gradient and the line
where its output left the graph.

    ppo-td doctor examples/doctor/ratio_from_argmax.py
"""

import torch
from _common import actor_critic, cartpole_batch

torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
actor, critic, optimizer = actor_critic()
with torch.no_grad():
    returns = rewards + 0.99 * critic(next_obs).squeeze(-1) * (1 - dones)
    advantages = returns - critic(obs).squeeze(-1)
    old_probs = actor(obs).softmax(-1).gather(1, actions[:, None]).squeeze(1)

for _epoch in range(4):
    greedy = actor(obs).argmax(-1)  # the mistake: argmax has no gradient
    ratio = (greedy == actions).float() / old_probs
    policy_loss = -(ratio * advantages).mean()
    value_loss = (critic(obs).squeeze(-1) - returns).pow(2).mean()
    optimizer.zero_grad()
    (policy_loss + 0.5 * value_loss).backward()
    optimizer.step()
