"""The rollout is recorded with gradients on, and the "fix" the first error suggests: ``retain_graph=True``.

The second epoch no longer fails for a freed graph: it runs through the rollout's graph again, whose
parameters the first optimizer step changed in place, and fails with "one of the variables needed for
gradient computation has been modified by an inplace operation".

    ppo-td doctor examples/doctor/retain_graph_inplace.py
"""
import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Categorical

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
    (policy_loss + 0.5 * value_loss).backward(retain_graph=True)  # the "fix" from the error message
    optimizer.step()
