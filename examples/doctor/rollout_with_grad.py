"""The rollout is recorded with gradients on, and its log-probs and values are reused in every epoch.

The first epoch's backward runs into the rollout's graph (and through the critic: the advantage is
``returns - values`` with the values' graph attached) and frees it; the second epoch fails with "Trying to
backward through the graph a second time". With ``--retain-graph``, the "fix" that error suggests, the
second epoch runs through the rollout's graph again, whose parameters the first step changed in place, and
fails with "one of the variables needed for gradient computation has been modified by an inplace operation".

    ppo-td doctor examples/doctor/rollout_with_grad.py
    ppo-td doctor examples/doctor/rollout_with_grad.py --retain-graph
"""

import sys

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Categorical

retain = "--retain-graph" in sys.argv[1:]
torch.manual_seed(0)
env = gym.make("CartPole-v1")
actor = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4)

obs_list, actions, log_probs, values, rewards = [], [], [], [], []
obs, _ = env.reset(seed=0)
for _ in range(64):  # the mistake: no torch.no_grad() around the rollout
    state = torch.as_tensor(obs, dtype=torch.float32)
    dist = Categorical(logits=actor(state))
    action = dist.sample()
    obs_list.append(state)
    actions.append(action)
    log_probs.append(dist.log_prob(action))
    values.append(critic(state).squeeze(-1))
    obs, reward, terminated, truncated, _ = env.step(action.item())
    rewards.append(float(reward))
    if terminated or truncated:
        obs, _ = env.reset()

states, actions = torch.stack(obs_list), torch.stack(actions)
old_log_probs, values = torch.stack(log_probs), torch.stack(values)
returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
advantages = returns - values

for _epoch in range(4):
    new_log_probs = Categorical(logits=actor(states)).log_prob(actions)
    ratio = (new_log_probs - old_log_probs).exp()
    policy_loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
    value_loss = (critic(states).squeeze(-1) - returns).pow(2).mean()
    optimizer.zero_grad()
    (policy_loss + 0.5 * value_loss).backward(retain_graph=retain)
    optimizer.step()
