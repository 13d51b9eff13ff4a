"""PPO with one shared-trunk network (policy and value heads) and one optimizer, a correct host for ``ppo-td doctor``.

The toy env is written here: 8 envs stepped as arrays; each observation holds 3 numbers and the action is two binary
guesses (the signs of the first two numbers), so the action has two dimensions."""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

num_envs, num_steps, num_iterations, epochs, minibatch_size = 8, 16, 2, 2, 32
gamma, lam, clip, ent_coef, vf_coef, lr = 0.9, 0.95, 0.2, 0.01, 0.5, 1e-3


class SignEnv:
    def __init__(self, n, rng):
        self.n, self.rng, self.t = n, rng, np.zeros(n, dtype=np.int64)
        self.obs = rng.standard_normal((n, 3)).astype(np.float32)

    def step(self, action):  # action: [n, 2] of 0/1
        reward = (action == (self.obs[:, :2] > 0)).mean(1).astype(np.float32)
        self.t += 1
        done = self.t >= 8
        self.t[done] = 0
        self.obs = self.rng.standard_normal((self.n, 3)).astype(np.float32)
        return self.obs, reward, done.astype(np.float32)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.pi = nn.Linear(64, 2 * 2)
        self.v = nn.Linear(64, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.pi(h).view(-1, 2, 2), self.v(h).squeeze(-1)


torch.set_num_threads(1)
torch.manual_seed(0)
env = SignEnv(num_envs, np.random.default_rng(0))
net = Net()
optimizer = torch.optim.Adam(net.parameters(), lr=lr)
obs = env.obs
for _iteration in range(num_iterations):
    obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf = [], [], [], [], [], []
    with torch.no_grad():
        for _t in range(num_steps):
            obs_t = torch.as_tensor(obs)
            logits, value = net(obs_t)
            dist = Categorical(logits=logits)
            action = dist.sample()
            logprob = dist.log_prob(action).sum(-1)
            obs, reward, done = env.step(action.numpy())
            obs_buf.append(obs_t)
            act_buf.append(action)
            logp_buf.append(logprob)
            val_buf.append(value)
            rew_buf.append(torch.as_tensor(reward))
            done_buf.append(torch.as_tensor(done))

    with torch.no_grad():
        _, last_value = net(torch.as_tensor(obs))
        rewards, dones, values = torch.stack(rew_buf), torch.stack(done_buf), torch.stack(val_buf)
        advantages = torch.zeros_like(rewards)
        last_gae = torch.zeros(num_envs)
        for t in reversed(range(num_steps)):
            next_value = last_value if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * next_value * (1 - dones[t]) - values[t]
            last_gae = delta + gamma * lam * (1 - dones[t]) * last_gae
            advantages[t] = last_gae
        returns = advantages + values
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

    b_obs, b_act, b_logp = torch.cat(obs_buf), torch.cat(act_buf), torch.cat(logp_buf)
    b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
    for _epoch in range(epochs):
        perm = torch.randperm(num_envs * num_steps)
        for start in range(0, len(perm), minibatch_size):
            mb = perm[start:start + minibatch_size]
            logits, value = net(b_obs[mb])
            dist = Categorical(logits=logits)
            logprob = dist.log_prob(b_act[mb]).sum(-1)
            ratio = torch.exp(logprob - b_logp[mb])
            surr1 = ratio * b_adv[mb]
            surr2 = torch.clamp(ratio, 1 - clip, 1 + clip) * b_adv[mb]
            pg_loss = -torch.min(surr1, surr2).mean()
            v_loss = ((value - b_ret[mb]) ** 2).mean()
            entropy = dist.entropy().sum(-1).mean()
            loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
print(f"shared_trunk: done, last loss {loss.item():.4f}")
