"""The values for the advantages computed with gradients, through the user's own Agent method: the advantage then
carries the critic's graph into the policy loss and into every later minibatch. The line to change is the call in
the loop, not the line inside Agent that every correct call passes through too.

    ppo-td doctor examples/doctor/values_inside_agent.py
"""

import torch
from _common import cartpole_batch
from torch import nn
from torch.distributions import Categorical


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
        self.vf = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))

    def value(self, x):
        return self.vf(x).squeeze(-1)

    def dist(self, x):
        return Categorical(logits=self.pi(x))


torch.manual_seed(0)
obs, actions, rewards, next_obs, dones = cartpole_batch()
agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
with torch.no_grad():
    old_log_probs = agent.dist(obs).log_prob(actions)
    returns = rewards + 0.99 * agent.value(next_obs) * (1 - dones)
# the mistake: no torch.no_grad() (or .detach()) around the baseline
values = agent.value(obs)
advantages = returns - values

for _epoch in range(2):
    for mb in torch.randperm(len(obs)).split(64):
        ratio = (agent.dist(obs[mb]).log_prob(actions[mb]) - old_log_probs[mb]).exp()
        policy_loss = -torch.min(ratio * advantages[mb], ratio.clamp(0.8, 1.2) * advantages[mb]).mean()
        value_loss = (agent.value(obs[mb]) - returns[mb]).pow(2).mean()
        optimizer.zero_grad()
        # retain_graph=True: the 'fix' the first error message suggests
        (policy_loss + 0.5 * value_loss).backward(retain_graph=True)
        optimizer.step()
