"""Gradient separation, and rollout data that carries no autograd graph."""

import torch

from conftest import small_config
from ppo_td.config import ModelConfig
from ppo_td.training import build_pipeline, update


def _first_minibatch(pipeline):
    batch = next(iter(pipeline.collector))
    with torch.no_grad():
        pipeline.advantage(batch)
    pipeline.buffer.extend(batch.reshape(-1))
    return batch, pipeline.buffer.sample()


def _grads(loss_value, params):
    return torch.autograd.grad(loss_value, params, allow_unused=True, retain_graph=True)


def test_rollout_data_carries_no_graph(tiny_config):
    p = build_pipeline(tiny_config)
    batch, _ = _first_minibatch(p)
    for key, value in batch.items(include_nested=True, leaves_only=True):
        assert not value.requires_grad and value.grad_fn is None, f"{key} carries an autograd graph"
    p.collector.shutdown()


def test_actor_loss_reaches_only_actor_and_value_loss_only_critic(tiny_config):
    p = build_pipeline(tiny_config)
    _, minibatch = _first_minibatch(p)
    losses = p.loss(minibatch)
    actor_params = list(p.actor.parameters())
    critic_params = list(p.critic.parameters())
    policy_part = losses["loss_objective"] + losses["loss_entropy"]
    for grad in _grads(policy_part, critic_params):
        assert grad is None or torch.count_nonzero(grad) == 0, "the actor loss put gradient on the critic"
    assert all(g is not None and g.abs().sum() > 0 for g in _grads(policy_part, actor_params))
    for grad in _grads(losses["loss_critic"], actor_params):
        assert grad is None or torch.count_nonzero(grad) == 0, "the value loss put gradient on the actor"
    assert all(g is not None and g.abs().sum() > 0 for g in _grads(losses["loss_critic"], critic_params))
    p.collector.shutdown()


def test_shared_trunk_gets_gradient_from_both_losses():
    config = small_config(model=ModelConfig(hidden_sizes=(16, 16), shared_trunk=True))
    p = build_pipeline(config)
    _, minibatch = _first_minibatch(p)
    losses = p.loss(minibatch)
    shared = [a for a in p.actor.parameters() if any(a is c for c in p.critic.parameters())]
    assert shared, "shared_trunk=True must share parameters between actor and critic"
    for part in ("loss_objective", "loss_critic"):
        assert all(g is not None and g.abs().sum() > 0 for g in _grads(losses[part], shared))
    assert len(p.parameters) == len({id(x) for x in list(p.actor.parameters()) + list(p.critic.parameters())})
    p.collector.shutdown()


def test_optimizer_covers_every_actor_and_critic_parameter(tiny_config):
    p = build_pipeline(tiny_config)
    in_optimizer = {id(x) for group in p.optimizer.param_groups for x in group["params"]}
    for param in list(p.actor.parameters()) + list(p.critic.parameters()):
        assert id(param) in in_optimizer
    assert p.optimizer.defaults["eps"] == 1e-5
    p.collector.shutdown()


def test_ratio_is_one_on_first_minibatch_after_an_update(tiny_config):
    """The collector acts with the very parameters being trained, so after an update the next
    batch's log-probs match the current policy: no stale copy of the network."""
    p = build_pipeline(tiny_config)
    batches = iter(p.collector)
    first = next(batches)
    with torch.no_grad():
        p.advantage(first)
    before = [x.detach().clone() for x in p.actor.parameters()]
    update(p, first)
    assert any(not torch.equal(a, b) for a, b in zip(before, p.actor.parameters(), strict=True))
    second = next(batches)
    with torch.no_grad():
        p.advantage(second)
    p.buffer.empty()
    p.buffer.extend(second.reshape(-1))
    out = p.loss(p.buffer.sample())
    torch.testing.assert_close(out["kl_approx"], torch.tensor(0.0), atol=1e-6, rtol=0)
    assert float(out["clip_fraction"]) == 0.0
    p.collector.shutdown()
