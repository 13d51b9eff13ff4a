"""Orthogonal init with the published gains, and the policy/value heads' shapes."""

import math

import pytest
import torch
from torch import nn

from ppo_td.config import EnvConfig, ModelConfig
from ppo_td.envs import make_env
from ppo_td.models import make_actor_critic


def _linears(module):
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize("shared", [False, True])
def test_orthogonal_init_gains(shared):
    env = make_env(EnvConfig("Acrobot-v1", num_envs=2), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(64, 64), shared_trunk=shared))
    actor_layers, critic_layers = _linears(actor), _linears(critic)
    gains = {id(layer): math.sqrt(2) for layer in actor_layers[:-1] + critic_layers[:-1]}
    gains[id(actor_layers[-1])] = 0.01
    gains[id(critic_layers[-1])] = 1.0
    for layer in actor_layers + critic_layers:
        # an orthogonal matrix times g has all singular values equal to g
        singular = torch.linalg.svdvals(layer.weight.detach())
        torch.testing.assert_close(singular, torch.full_like(singular, gains[id(layer)]), rtol=1e-4, atol=1e-5)
        assert torch.count_nonzero(layer.bias) == 0
    td = actor(env.reset())
    assert td["logits"].shape == (2, 3) and td["action"].shape == (2,)
    assert critic(td)["state_value"].shape == (2, 1)
    env.close()


@pytest.mark.parametrize("shared", [False, True])
def test_pytorch_default_init_when_orthogonal_init_is_off(shared):
    """model.orthogonal_init=False (SB3's ortho_init=False, RL Zoo's MuJoCo entries): every MLP layer and head keeps
    nn.Linear's own init: the same weights as nn.Linear layers of the same sizes made in the same order."""
    env = make_env(EnvConfig("Acrobot-v1", num_envs=2), seed=0)
    torch.manual_seed(3)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(64, 32), shared_trunk=shared,
                                                       orthogonal_init=False))
    layers = _linears(actor) + [m for m in _linears(critic) if all(m is not a for a in _linears(actor))]
    torch.manual_seed(3)
    plain = [nn.Linear(m.in_features, m.out_features) for m in layers]
    for layer, reference in zip(layers, plain, strict=True):
        assert torch.equal(layer.weight, reference.weight) and torch.equal(layer.bias, reference.bias)
        assert torch.count_nonzero(layer.bias) > 0  # orthogonal init zeroes them
    env.close()
