"""SB3-flavoured PPO on CartPole-v1, a correct host for ``ppo-td doctor``: separate Actor and Critic modules with an
optimizer each, and a small numpy RolloutBuffer."""
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

n_iterations, n_steps, n_epochs, batch_size = 2, 128, 2, 32
gamma, gae_lambda, clip_range, ent_coef, max_grad_norm = 0.99, 0.95, 0.2, 0.01, 0.5


class Actor(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_actions))

    def forward(self, obs):
        return self.net(obs)


class Critic(nn.Module):
    def __init__(self, obs_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, obs):
        return self.net(obs)


class RolloutBuffer:
    def __init__(self, size, obs_dim):
        self.obs = np.zeros((size, obs_dim), dtype=np.float32)
        self.actions = np.zeros(size, dtype=np.int64)
        self.rewards, self.dones = np.zeros(size, dtype=np.float32), np.zeros(size, dtype=np.float32)
        self.values, self.log_probs = np.zeros(size, dtype=np.float32), np.zeros(size, dtype=np.float32)

    def compute_returns_and_advantage(self, last_value, last_done):
        self.advantages = np.zeros_like(self.rewards)
        last_gae = 0.0
        for t in reversed(range(len(self.rewards))):
            next_non_terminal = 1.0 - (last_done if t == len(self.rewards) - 1 else self.dones[t + 1])
            next_value = last_value if t == len(self.rewards) - 1 else self.values[t + 1]
            delta = self.rewards[t] + gamma * next_value * next_non_terminal - self.values[t]
            last_gae = delta + gamma * gae_lambda * next_non_terminal * last_gae
            self.advantages[t] = last_gae
        self.returns = self.advantages + self.values


torch.set_num_threads(1)
torch.manual_seed(0)
np.random.seed(0)
env = gym.make("CartPole-v1")
obs_dim, n_actions = env.observation_space.shape[0], int(env.action_space.n)
actor = Actor(obs_dim, n_actions)
critic = Critic(obs_dim)
actor_optim = torch.optim.Adam(actor.parameters(), lr=3e-4)
critic_optim = torch.optim.Adam(critic.parameters(), lr=1e-3)
buffer = RolloutBuffer(n_steps, obs_dim)

obs, _ = env.reset(seed=0)
done = 0.0
for _iteration in range(n_iterations):
    with torch.no_grad():
        for t in range(n_steps):
            obs_t = torch.as_tensor(obs, dtype=torch.float32)[None]
            dist = Categorical(logits=actor(obs_t))
            action = dist.sample()
            buffer.obs[t], buffer.dones[t], buffer.actions[t] = obs, done, action.item()
            buffer.log_probs[t] = dist.log_prob(action).item()
            buffer.values[t] = critic(obs_t).item()
            obs, reward, terminated, truncated, _ = env.step(action.item())
            buffer.rewards[t], done = reward, float(terminated or truncated)
            if done:
                obs, _ = env.reset()
        last_value = critic(torch.as_tensor(obs, dtype=torch.float32)[None]).item()
        buffer.compute_returns_and_advantage(last_value, done)

    for _epoch in range(n_epochs):
        for idx in np.split(np.random.permutation(n_steps), n_steps // batch_size):
            obs_b, actions = torch.as_tensor(buffer.obs[idx]), torch.as_tensor(buffer.actions[idx])
            old_log_prob = torch.as_tensor(buffer.log_probs[idx])
            returns = torch.as_tensor(buffer.returns[idx])
            adv = torch.as_tensor(buffer.advantages[idx])
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)

            dist = Categorical(logits=actor(obs_b))
            log_prob = dist.log_prob(actions)
            ratio = torch.exp(log_prob - old_log_prob)
            policy_loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * adv).mean()
            entropy_loss = -dist.entropy().mean()
            actor_optim.zero_grad()
            (policy_loss + ent_coef * entropy_loss).backward()
            nn.utils.clip_grad_norm_(actor.parameters(), max_grad_norm)
            actor_optim.step()

            value_loss = F.mse_loss(critic(obs_b).squeeze(-1), returns)
            critic_optim.zero_grad()
            value_loss.backward()
            nn.utils.clip_grad_norm_(critic.parameters(), max_grad_norm)
            critic_optim.step()
print(f"sb3_style: done, policy loss {policy_loss.item():.4f}, value loss {value_loss.item():.4f}")
