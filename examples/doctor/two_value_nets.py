"""A policy, a V network and a Q network, three optimizers: the shape of a common forum thread.

Three mistakes, as people write them:

1. the advantage ``q - v`` is not detached, so the policy loss reaches both value networks;
2. the value networks are stepped before the policy's backward, which still runs through their outputs;
3. the ratio is built from the sampled action indices, so the policy gets no gradient at all.

Without ``--retain-graph`` the policy's backward fails with "Trying to backward through the graph a
second time"; with it, "modified by an inplace operation". ``ppo-td doctor`` names all three either way:

    ppo-td doctor examples/doctor/two_value_nets.py
    ppo-td doctor examples/doctor/two_value_nets.py --retain-graph
"""

import sys

import gymnasium as gym
import torch
from torch import nn
from torch.distributions import Categorical

retain = "--retain-graph" in sys.argv[1:]
torch.manual_seed(0)
env = gym.make("CartPole-v1")
policy = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2), nn.Softmax(dim=-1))
state_value = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
action_value = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 1))
policy_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
v_opt = torch.optim.Adam(state_value.parameters(), lr=1e-3)
q_opt = torch.optim.Adam(action_value.parameters(), lr=1e-3)

obs, _ = env.reset(seed=0)
for _step in range(200):
    state = torch.as_tensor(obs, dtype=torch.float32)
    probs = policy(state)
    action = Categorical(probs).sample().item()
    old_action = Categorical(probs.detach()).sample().item()
    obs, reward, terminated, truncated, _ = env.step(action)

    v = state_value(state)
    v_loss = (v - torch.tensor([reward])).pow(2).mean()
    v_opt.zero_grad()
    v_loss.backward(retain_graph=retain)
    v_opt.step()

    q = action_value(torch.cat([state, torch.tensor([float(action)])]))
    q_loss = (q - torch.tensor([reward])).pow(2).mean()
    q_opt.zero_grad()
    q_loss.backward(retain_graph=retain)
    q_opt.step()

    advantage = q - v  # mistake 1: not detached
    ratio = torch.tensor((action + 1e-6) / (old_action + 1e-6))  # mistake 3: from action indices
    policy_loss = -torch.min(ratio * advantage, ratio.clamp(0.8, 1.2) * advantage).mean()
    policy_opt.zero_grad()
    policy_loss.backward()  # mistake 2: v and q were stepped after the forward this runs through
    policy_opt.step()
    if terminated or truncated:
        obs, _ = env.reset()
