"""Multi-agent PPO with parameter sharing, a correct host for ``ppo-td doctor``: 3 agents, one shared actor, a
centralised critic on the joint observation, a shared team reward, per-agent log-probs, GAE and PPO loss.

The cooperative toy env is written here: each agent sees 4 private numbers and makes two binary choices (the signs of
its first two numbers), so each agent's action has two dimensions; the team reward is the fraction of right choices.
Tensors keep a trailing singleton dim per agent, TorchRL-style: rewards, values, advantages, log-probs [B, 3, 1]."""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

n_agents, obs_dim, n_sub, n_choices = 3, 4, 2, 2
num_envs, num_steps, num_iterations, epochs, num_minibatches = 8, 16, 2, 2, 2
gamma, lam, clip, ent_coef, vf_coef, lr = 0.9, 0.95, 0.2, 0.01, 0.5, 1e-3


class TeamEnv:
    def __init__(self, rng):
        self.rng, self.t = rng, np.zeros(num_envs, dtype=np.int64)
        self.obs = rng.standard_normal((num_envs, n_agents, obs_dim)).astype(np.float32)

    def step(self, action):  # action [num_envs, n_agents, n_sub] -> obs, team reward [num_envs], done [num_envs]
        reward = (action == (self.obs[..., :n_sub] > 0)).mean(axis=(1, 2)).astype(np.float32)
        self.t += 1
        done = self.t >= 8
        self.t[done] = 0
        self.obs = self.rng.standard_normal(self.obs.shape).astype(np.float32)
        return self.obs, reward, done.astype(np.float32)


def value_of(obs):  # [B, n_agents, obs_dim] -> the joint value [B, 1], copied to every agent: [B, n_agents, 1]
    return critic(obs.flatten(-2)).unsqueeze(-2).expand(-1, n_agents, -1)


torch.set_num_threads(1)
torch.manual_seed(0)
env = TeamEnv(np.random.default_rng(0))
actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_sub * n_choices))
critic = nn.Sequential(nn.Linear(n_agents * obs_dim, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=lr)
obs = env.obs
for _iteration in range(num_iterations):
    obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf = [], [], [], [], [], []
    with torch.no_grad():
        for _t in range(num_steps):
            obs_t = torch.as_tensor(obs)
            dist = Categorical(logits=actor(obs_t).unflatten(-1, (n_sub, n_choices)))
            action = dist.sample()
            logprob = dist.log_prob(action).sum(-1, keepdim=True)
            val_buf.append(value_of(obs_t))
            obs, reward, done = env.step(action.numpy())
            obs_buf.append(obs_t)
            act_buf.append(action)
            logp_buf.append(logprob)
            rew_buf.append(torch.as_tensor(reward)[:, None, None].expand(-1, n_agents, 1))
            done_buf.append(torch.as_tensor(done)[:, None, None])

    with torch.no_grad():
        last_value = value_of(torch.as_tensor(obs))
        rewards, dones, values = torch.stack(rew_buf), torch.stack(done_buf), torch.stack(val_buf)
        advantages, last_gae = torch.zeros_like(values), torch.zeros_like(last_value)
        for t in reversed(range(num_steps)):
            next_value = last_value if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + gamma * next_value * (1 - dones[t]) - values[t]
            last_gae = delta + gamma * lam * (1 - dones[t]) * last_gae
            advantages[t] = last_gae
        returns = advantages + values

    b_obs, b_act, b_logp = torch.cat(obs_buf), torch.cat(act_buf), torch.cat(logp_buf)
    b_adv, b_ret = advantages.flatten(0, 1), returns.flatten(0, 1)
    for _epoch in range(epochs):
        for mb in torch.randperm(len(b_obs)).chunk(num_minibatches):
            dist = Categorical(logits=actor(b_obs[mb]).unflatten(-1, (n_sub, n_choices)))
            newlogprob = dist.log_prob(b_act[mb]).sum(-1, keepdim=True)
            ratio = torch.exp(newlogprob - b_logp[mb])
            mb_adv = b_adv[mb]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            surr1 = ratio * mb_adv
            surr2 = torch.clamp(ratio, 1 - clip, 1 + clip) * mb_adv
            pg_loss = -torch.min(surr1, surr2).mean()
            v_loss = ((value_of(b_obs[mb]) - b_ret[mb]) ** 2).mean()
            entropy = dist.entropy().sum(-1).mean()
            loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_([*actor.parameters(), *critic.parameters()], 0.5)
            optimizer.step()
print(f"agent_group: done, last loss {loss.item():.4f}")
