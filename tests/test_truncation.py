"""An env that never terminates and is cut by a time limit: V(s0) must approach 1/(1-gamma)."""


import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDictBase
from torchrl.envs import Transform

from conftest import small_config
from ppo_td.config import EnvConfig, LossConfig, OptimConfig
from ppo_td.envs import make_env
from ppo_td.training import train

ENV_ID = "ppo_td_test/EndlessReward-v0"
GAMMA = 0.9


class EndlessReward(gym.Env):
    """Reward 1 forever, the same observation forever; only the time limit ends an episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, False, False, {}


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=EndlessReward, max_episode_steps=5)


class TruncationAsTermination(Transform):
    """The classic bug: a time-limit cut recorded as a true termination."""

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set("terminated", next_tensordict.get("done").clone())
        return next_tensordict


def _learned_v0(env) -> float:
    config = small_config(
        env=EnvConfig(ENV_ID, num_envs=4),
        loss=LossConfig(gamma=GAMMA, gae_lambda=0.95, clip_value=None, entropy_coeff=0.0),
        optim=OptimConfig(lr=3e-3, anneal_lr=False, update_epochs=4, num_minibatches=2),
        frames_per_batch=64,
        total_frames=64 * 60,
        eval_episodes=0,
    )
    result = train(config, env=env(config))
    with torch.no_grad():
        return float(result.critic.module(torch.zeros(1, 1)))


def test_truncation_is_bootstrapped():
    v0 = _learned_v0(lambda c: make_env(c.env, seed=c.seed))
    assert v0 == pytest.approx(1 / (1 - GAMMA), abs=1.0)


def test_truncation_as_termination_fails_the_same_check():
    def broken(c):
        env = make_env(c.env, seed=c.seed)
        env.append_transform(TruncationAsTermination())
        return env

    v0 = _learned_v0(broken)
    assert abs(v0 - 1 / (1 - GAMMA)) > 3.0, f"V(s0)={v0}: treating truncation as termination must miss 10"
