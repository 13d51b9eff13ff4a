"""A correct PPO update, shaped like CleanRL's ``ppo.py``: the doctor must give it a clean bill.

Rollout under ``torch.no_grad()``, GAE under ``torch.no_grad()``, then epochs of shuffled minibatches that
recompute log-probs, entropy and values from the stored observations, with normalized advantages, the
clipped surrogate, a clipped value loss, an entropy bonus and gradient clipping.

    ppo-td doctor examples/doctor/cleanrl_update.py
"""

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)),
                                    nn.Tanh(), layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)),
                                   nn.Tanh(), layer_init(nn.Linear(64, 2), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


num_envs, num_steps, gamma, gae_lambda, clip_coef = 4, 128, 0.99, 0.95, 0.2
torch.manual_seed(1)
envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
obs = torch.zeros((num_steps, num_envs, 4))
actions = torch.zeros((num_steps, num_envs))
logprobs = torch.zeros((num_steps, num_envs))
rewards = torch.zeros((num_steps, num_envs))
dones = torch.zeros((num_steps, num_envs))
values = torch.zeros((num_steps, num_envs))
next_obs = torch.Tensor(envs.reset(seed=1)[0])
next_done = torch.zeros(num_envs)

for _iteration in range(3):
    for step in range(num_steps):
        obs[step], dones[step] = next_obs, next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        actions[step], logprobs[step] = action, logprob
        next_obs, reward, terminations, truncations, _ = envs.step(action.numpy())
        rewards[step] = torch.tensor(reward).view(-1)
        next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(np.logical_or(terminations, truncations))

    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
            nextvalues = next_value if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        returns = advantages + values

    b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
    b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
    b_inds = np.arange(num_steps * num_envs)
    for _epoch in range(2):
        np.random.shuffle(b_inds)
        for start in range(0, len(b_inds), 128):
            mb_inds = b_inds[start:start + 128]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
            ratio = (newlogprob - b_logprobs[mb_inds]).exp()
            mb_advantages = b_advantages[mb_inds]
            mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
            pg_loss = torch.max(-mb_advantages * ratio,
                                -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
            newvalue = newvalue.view(-1)
            v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -clip_coef, clip_coef)
            v_loss = 0.5 * torch.max((newvalue - b_returns[mb_inds]) ** 2, (v_clipped - b_returns[mb_inds]) ** 2).mean()
            loss = pg_loss - 0.01 * entropy.mean() + v_loss * 0.5
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
