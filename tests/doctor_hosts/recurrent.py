"""Recurrent PPO with a GRU policy, a correct host for ``ppo-td doctor``.

The toy memory task is written here: a cue (+1 or -1) is seen at t=0 only, and the action at t=3 (the last step of
the episode) is rewarded when it matches the cue. Rollouts of 16 fixed-length episodes are collected step by step
with the hidden state carried; the update replays whole episodes from a zero initial state."""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

num_envs, seq_len, num_iterations, epochs, num_minibatches = 16, 4, 2, 2, 2
gamma, lam, clip, ent_coef, vf_coef, lr = 0.99, 0.95, 0.2, 0.01, 0.5, 3e-3
obs_dim, n_actions, hidden = 3, 2, 32


class CueEnv:
    def __init__(self, rng):
        self.rng = rng

    def reset(self):
        self.cue, self.t = self.rng.integers(0, 2, num_envs), 0
        return self._obs()

    def _obs(self):  # [cue or 0, "answer now" flag, bias]
        obs = np.zeros((num_envs, obs_dim), dtype=np.float32)
        obs[:, 0] = (2.0 * self.cue - 1.0) if self.t == 0 else 0.0
        obs[:, 1], obs[:, 2] = float(self.t == seq_len - 1), 1.0
        return obs

    def step(self, action):
        reward = ((action == self.cue) & (self.t == seq_len - 1)).astype(np.float32)
        self.t += 1
        return self._obs(), reward


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(obs_dim, hidden, batch_first=True)
        self.actor = nn.Sequential(nn.Linear(hidden, 32), nn.Tanh(), nn.Linear(32, n_actions))
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs, h):  # obs [B, T, obs_dim], h [1, B, hidden] -> logits [B, T, A], value [B, T, 1], h
        out, h = self.gru(obs, h)
        return self.actor(out), self.critic(out), h


torch.set_num_threads(1)
torch.manual_seed(0)
env = CueEnv(np.random.default_rng(0))
agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=lr)
for _iteration in range(num_iterations):
    obs_buf = torch.zeros(num_envs, seq_len, obs_dim)
    act_buf = torch.zeros(num_envs, seq_len, dtype=torch.long)
    logp_buf, val_buf, rew_buf = (torch.zeros(num_envs, seq_len) for _ in range(3))
    with torch.no_grad():
        obs, h = env.reset(), torch.zeros(1, num_envs, hidden)
        for t in range(seq_len):
            obs_buf[:, t] = torch.as_tensor(obs)
            logits, value, h = agent(obs_buf[:, t:t + 1], h)
            dist = Categorical(logits=logits[:, 0])
            action = dist.sample()
            act_buf[:, t] = action
            logp_buf[:, t] = dist.log_prob(action)
            val_buf[:, t] = value[:, 0, 0]
            obs, reward = env.step(action.numpy())
            rew_buf[:, t] = torch.as_tensor(reward)

    with torch.no_grad():  # GAE; every episode ends after seq_len steps, so nothing is bootstrapped
        advantages, last_gae = torch.zeros(num_envs, seq_len), torch.zeros(num_envs)
        for t in reversed(range(seq_len)):
            next_value = val_buf[:, t + 1] if t + 1 < seq_len else torch.zeros(num_envs)
            delta = rew_buf[:, t] + gamma * next_value - val_buf[:, t]
            last_gae = delta + gamma * lam * last_gae
            advantages[:, t] = last_gae
        returns = advantages + val_buf

    for _epoch in range(epochs):
        for mb in torch.randperm(num_envs).chunk(num_minibatches):
            logits, newvalue, _ = agent(obs_buf[mb], torch.zeros(1, len(mb), hidden))
            dist = Categorical(logits=logits)
            newlogprob = dist.log_prob(act_buf[mb]).reshape(-1)
            logratio = newlogprob - logp_buf[mb].reshape(-1)
            ratio = logratio.exp()
            mb_adv = advantages[mb].reshape(-1)
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = -torch.min(ratio * mb_adv, torch.clamp(ratio, 1 - clip, 1 + clip) * mb_adv).mean()
            newvalue = newvalue.reshape(-1)
            v_loss = 0.5 * ((newvalue - returns[mb].reshape(-1)) ** 2).mean()
            loss = pg_loss - ent_coef * dist.entropy().mean() + vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
print(f"recurrent: done, last loss {loss.item():.4f}")
