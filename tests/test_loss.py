"""The wrapped ClipPPOLoss against CleanRL's ppo.py formula on fixed tensors."""

import dataclasses

import pytest
import torch
from tensordict import TensorDict

from ppo_td.config import ModelConfig
from ppo_td.envs import make_env
from ppo_td.models import make_actor_critic
from ppo_td.presets import get_preset
from ppo_td.training import make_loss, total_loss


def cleanrl_loss(logits, values_new, actions, old_logprob, advantages, old_values, returns, cfg):
    """CleanRL ppo.py, lines for one minibatch (norm_adv, clip_vloss), written out by hand."""
    dist = torch.distributions.Categorical(logits=logits)
    newlogprob = dist.log_prob(actions)
    logratio = newlogprob - old_logprob
    ratio = logratio.exp()
    old_approx_kl = (-logratio).mean()
    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = ((ratio - 1.0).abs() > cfg.clip_epsilon).float().mean()
    mb_adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss1 = -mb_adv * ratio
    pg_loss2 = -mb_adv * torch.clamp(ratio, 1 - cfg.clip_epsilon, 1 + cfg.clip_epsilon)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    v_loss_unclipped = (values_new - returns) ** 2
    v_clipped = old_values + torch.clamp(values_new - old_values, -cfg.clip_value, cfg.clip_value)
    v_loss_clipped = (v_clipped - returns) ** 2
    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    entropy_loss = dist.entropy().mean()
    vf_coef, ent_coef = 0.5, 0.01
    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
    return {"loss": loss, "pg_loss": pg_loss, "v_loss_weighted": vf_coef * v_loss, "entropy": entropy_loss,
            "old_approx_kl": old_approx_kl, "approx_kl": approx_kl, "clipfrac": clipfrac}


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(3)
    config = get_preset("cleanrl")
    env = make_env(dataclasses.replace(config.env, num_envs=2), seed=0)
    actor, critic = make_actor_critic(env, ModelConfig(hidden_sizes=(8,)))
    env.close()
    return config, actor, critic


def _minibatch(actor, critic, n=256):
    g = torch.Generator().manual_seed(11)
    obs = torch.randn(n, 4, generator=g)
    with torch.no_grad():
        logits = actor.module[0].module(obs)  # the policy network
        values = critic.module(obs).squeeze(-1)
    actions = torch.randint(0, 2, (n,), generator=g)
    # old policy: the current one perturbed, so some ratios fall outside the clip range
    old_logits = logits + 0.6 * torch.randn(n, 2, generator=g)
    old_logprob = torch.distributions.Categorical(logits=old_logits).log_prob(actions)
    old_values = values + 0.5 * torch.randn(n, generator=g)
    returns = values + torch.randn(n, generator=g)
    advantages = torch.randn(n, generator=g) * 3 + 1
    return obs, actions, old_logprob, advantages, old_values, returns


@pytest.mark.parametrize("fast", [True, False], ids=["FastLoss", "ClipPPOLoss"])
def test_loss_equals_cleanrl_formula(parts, fast):
    """Both forwards (ppo_td's plain-tensor one and TorchRL's ClipPPOLoss.forward) equal CleanRL's formula."""
    config, actor, critic = parts
    loss = make_loss(actor, critic, dataclasses.replace(config.loss, fast_forward=fast))
    assert (loss.fast is not None) == fast  # the path under test is the one that runs
    obs, actions, old_logprob, advantages, old_values, returns = _minibatch(actor, critic)
    td = TensorDict({
        "observation": obs, "action": actions, loss.tensor_keys.sample_log_prob: old_logprob,
        "advantage": advantages[:, None], "state_value": old_values[:, None], "value_target": returns[:, None],
    }, batch_size=[len(obs)])
    if fast:
        assert loss.fast.applies(td)
    out = loss(td)
    with torch.no_grad():
        logits = actor.module[0].module(obs)
        values_new = critic.module(obs).squeeze(-1)
    ref = cleanrl_loss(logits, values_new, actions, old_logprob, advantages, old_values, returns, config.loss)
    assert 0.05 < float(ref["clipfrac"]) < 0.95, "the fixture must exercise the clipping"
    close = dict(atol=1e-6, rtol=0)
    torch.testing.assert_close(out["loss_objective"], ref["pg_loss"], **close)
    torch.testing.assert_close(out["loss_critic"], ref["v_loss_weighted"], **close)
    torch.testing.assert_close(out["loss_entropy"], -0.01 * ref["entropy"], **close)
    torch.testing.assert_close(total_loss(out), ref["loss"], **close)
    torch.testing.assert_close(out["kl_approx"], ref["old_approx_kl"], **close)
    torch.testing.assert_close(out["kl_approx_k3"], ref["approx_kl"], **close)
    torch.testing.assert_close(out["clip_fraction"], ref["clipfrac"], **close)


def test_unnormalized_advantage_option_changes_the_objective(parts):
    config, actor, critic = parts
    obs, actions, old_logprob, advantages, old_values, returns = _minibatch(actor, critic)
    results = []
    for normalize in (True, False):
        loss = make_loss(actor, critic, dataclasses.replace(config.loss, normalize_advantage=normalize))
        td = TensorDict({
            "observation": obs, "action": actions, loss.tensor_keys.sample_log_prob: old_logprob,
            "advantage": advantages[:, None], "state_value": old_values[:, None], "value_target": returns[:, None],
        }, batch_size=[len(obs)])
        results.append(float(loss(td)["loss_objective"].detach()))
    assert results[0] != pytest.approx(results[1], abs=1e-3)


def test_cleanrl_preset_matches_cleanrl_defaults():
    c = get_preset("cleanrl")
    assert (c.env.env_id, c.env.num_envs, c.steps_per_env, c.total_frames, c.seed) == (
        "CartPole-v1", 4, 128, 500_000, 1)
    assert (c.optim.lr, c.optim.adam_eps, c.optim.anneal_lr, c.optim.update_epochs, c.optim.num_minibatches,
            c.optim.max_grad_norm, c.optim.target_kl) == (2.5e-4, 1e-5, True, 4, 4, 0.5, None)
    assert (c.loss.gamma, c.loss.gae_lambda, c.loss.clip_epsilon, c.loss.clip_value, c.loss.entropy_coeff,
            c.loss.critic_coeff, c.loss.loss_critic_type, c.loss.normalize_advantage) == (
        0.99, 0.95, 0.2, 0.2, 0.01, 0.25, "l2", True)
    assert (c.model.hidden_sizes, c.model.activation, c.model.policy_head_gain, c.model.value_head_gain) == (
        (64, 64), "tanh", 0.01, 1.0)
