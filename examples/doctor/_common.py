"""A small batch of CartPole experience shared by the gallery's minibatch-update scripts (not a mistake itself)."""

import gymnasium as gym
import numpy as np
import torch
from torch import nn


def cartpole_batch(steps: int = 128, seed: int = 0):
    """(observations, actions, rewards, next observations, dones) from a random policy, as tensors."""
    env = gym.make("CartPole-v1")
    rng = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        action = int(torch.randint(2, (1,), generator=rng))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, reward, next_obs, terminated))
        obs = env.reset()[0] if terminated or truncated else next_obs
    obs, actions, rewards, next_obs, dones = zip(*rows, strict=True)
    return (torch.tensor(np.array(obs)), torch.tensor(actions), torch.tensor(rewards, dtype=torch.float32),
            torch.tensor(np.array(next_obs)), torch.tensor(dones, dtype=torch.float32))


def actor_critic(lr: float = 3e-4):
    """A small CartPole actor, critic and one Adam optimizer over both."""
    actor = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
    return actor, critic, torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=lr)


def rollout(actor, critic, obs, actions, rewards, next_obs, dones):
    """The rollout's log-probs of ``actions`` and one-step advantages and returns, all without gradient."""
    from torch.distributions import Categorical

    with torch.no_grad():
        old_log_probs = Categorical(logits=actor(obs)).log_prob(actions)
        returns = rewards + 0.99 * critic(next_obs).squeeze(-1) * (1 - dones)
        advantages = returns - critic(obs).squeeze(-1)
    return old_log_probs, returns, advantages
