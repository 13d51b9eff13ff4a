"""Gaussian policies for Box actions: state-independent log-std, clipping for the env only, tanh option."""

import gymnasium as gym
import numpy as np
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from conftest import small_config
from ppo_td.config import EnvConfig, ModelConfig
from ppo_td.envs import make_env
from ppo_td.models import GaussianHead, make_actor_critic
from ppo_td.training import build_pipeline

RECEIVED: list[np.ndarray] = []


class ActionRecorder(gym.Env):
    """Box(-1, 1, (2,)) actions; records what the env is actually given."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        RECEIVED.append(np.array(action, copy=True))
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), -float(np.sum(np.square(action))), False, False, {}


if "ppo_td_test/ActionRecorder-v0" not in gym.registry:
    gym.register("ppo_td_test/ActionRecorder-v0", entry_point=ActionRecorder, max_episode_steps=50)


def _gaussian(actor):
    return next(m for m in actor.modules() if isinstance(m, GaussianHead))


def test_log_std_is_state_independent_and_starts_at_zero():
    env = make_env(EnvConfig("Pendulum-v1", num_envs=3), seed=0)
    actor, _ = make_actor_critic(env, ModelConfig())
    head = _gaussian(actor)
    assert torch.equal(head.log_std.detach(), torch.zeros(1))
    td = actor(env.reset())
    assert torch.equal(td["scale"], torch.ones(3, 1)) and td["loc"].shape == (3, 1)


def test_samples_are_stored_unclipped_and_clipped_for_the_env_only():
    RECEIVED.clear()
    config = small_config(env=EnvConfig("ppo_td_test/ActionRecorder-v0", num_envs=2),
                          model=ModelConfig(hidden_sizes=(8,), log_std_init=1.5), frames_per_batch=64)
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    p.collector.shutdown()
    actions = batch["action"].reshape(-1, 2)
    assert (actions.abs() > 1).any(), "std e^1.5 must produce samples outside [-1, 1]"
    given = np.stack(RECEIVED[-64:]).reshape(32, 2, 2).transpose(1, 0, 2).reshape(-1, 2)  # [env, time] order
    np.testing.assert_allclose(given, actions.clamp(-1, 1).numpy(), rtol=0, atol=0)
    dist = torch.distributions.Independent(torch.distributions.Normal(batch["loc"], batch["scale"]), 1)
    torch.testing.assert_close(batch[p.loss.tensor_keys.sample_log_prob], dist.log_prob(batch["action"]))


def test_tanh_squashed_policy_stays_in_bounds():
    env = make_env(EnvConfig("Pendulum-v1", num_envs=4), seed=0)
    actor, _ = make_actor_critic(env, ModelConfig(squash_actions=True, log_std_init=1.0))
    td = env.reset()
    for mode in (ExplorationType.RANDOM, ExplorationType.DETERMINISTIC):
        with set_exploration_type(mode), torch.no_grad():
            out = actor(td.clone())
        assert out["action"].abs().max() <= 2.0 and torch.isfinite(out["action_log_prob"]).all()


def test_log_std_learns_from_the_actor_loss_only():
    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2), model=ModelConfig(hidden_sizes=(8,)),
                          frames_per_batch=64)
    p = build_pipeline(config)
    batch = next(iter(p.collector))
    with torch.no_grad():
        p.advantage(batch)
    p.buffer.extend(batch.reshape(-1))
    losses = p.loss(p.buffer.sample())
    log_std = _gaussian(p.actor).log_std
    (grad_actor,) = torch.autograd.grad(losses["loss_objective"], [log_std], retain_graph=True)
    (grad_critic,) = torch.autograd.grad(losses["loss_critic"], [log_std], allow_unused=True)
    assert grad_actor.abs().sum() > 0 and grad_critic is None
    p.collector.shutdown()
