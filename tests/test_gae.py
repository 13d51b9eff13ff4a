"""GAE against a plain reference loop, on [env, time] data with episode ends in the middle."""

import dataclasses

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import ValueOperator
from torchrl.objectives.value import GAE

from ppo_td.config import LossConfig
from ppo_td.training import make_advantage
from ppo_td.training.objective import OnePassGAE, ValueNorm


def reference_gae(value, next_value, reward, terminated, done, gamma, lam):
    """CleanRL-style backward loop over one env's time axis, bootstrapping through truncation."""
    T = reward.shape[0]
    advantages = torch.zeros(T)
    last = 0.0
    for t in reversed(range(T)):
        delta = reward[t] + gamma * next_value[t] * (1.0 - terminated[t]) - value[t]
        last = delta + gamma * lam * (1.0 - done[t]) * last
        advantages[t] = last
    return advantages


def test_gae_matches_reference_loop_with_terminations_and_truncations():
    torch.manual_seed(0)
    n_envs, T, obs_dim, gamma, lam = 3, 17, 5, 0.97, 0.9
    critic = ValueOperator(nn.Linear(obs_dim, 1), in_keys=["observation"])
    obs = torch.randn(n_envs, T, obs_dim)
    reward = torch.randn(n_envs, T, 1)
    terminated = torch.zeros(n_envs, T, 1, dtype=torch.bool)
    truncated = torch.zeros(n_envs, T, 1, dtype=torch.bool)
    terminated[0, 4] = terminated[1, 10] = terminated[2, T - 1] = True
    truncated[0, 9] = truncated[1, 3] = truncated[2, 7] = True
    done = terminated | truncated
    # as a collector writes them: the next observation is the following step's, but where an episode ended
    next_obs = torch.cat([obs[:, 1:], torch.randn(n_envs, 1, obs_dim)], 1)
    next_obs[done.squeeze(-1)] = torch.randn(int(done.sum()), obs_dim)
    batch = TensorDict(
        {
            "observation": obs,
            "next": {"observation": next_obs, "reward": reward, "terminated": terminated,
                     "truncated": truncated, "done": done},
        },
        batch_size=[n_envs, T],
        names=[None, "time"],
    )
    gae = make_advantage(critic, LossConfig(gamma=gamma, gae_lambda=lam))
    with torch.no_grad():
        gae(batch)
        for e in range(n_envs):
            v = critic.module(obs[e]).squeeze(-1)
            nv = critic.module(next_obs[e]).squeeze(-1)
            expected = reference_gae(v, nv, reward[e, :, 0], terminated[e, :, 0].float(), done[e, :, 0].float(),
                                     gamma, lam)
            torch.testing.assert_close(batch["advantage"][e, :, 0], expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(batch["value_target"][e, :, 0], expected + v, atol=1e-5, rtol=1e-5)


def test_one_pass_values_equal_torchrls_gae_on_collected_batches():
    """OnePassGAE's V(s') (V(s) shifted, plus the episode ends) gives TorchRL's GAE(value_network=critic)'s
    advantages on real batches: truncations, terminations, an image encoder; and both passes in full on a batch
    whose rows are not consecutive."""
    from torchrl.objectives.value import GAE

    from ppo_td import EnvConfig, get_preset
    from ppo_td.training import build_pipeline

    cartpole = EnvConfig("CartPole-v1", num_envs=4, max_episode_steps=12)
    grid = EnvConfig("minigrid:MiniGrid-Empty-5x5-v0", num_envs=2, max_episode_steps=9,
                     wrappers=("minigrid.wrappers:ImgObsWrapper",))
    for env, shared in ((cartpole, False), (grid, False), (grid, True)):
        config = get_preset("cartpole")
        config = dataclasses.replace(config, env=env, frames_per_batch=4 * 32,
                                     model=dataclasses.replace(config.model, shared_trunk=shared))
        p = build_pipeline(config)
        batch = next(iter(p.collector))
        p.collector.shutdown()
        assert batch["next", "truncated"].any()
        reference = GAE(gamma=0.99, lmbda=0.95, value_network=p.critic, average_gae=False)
        assert (("collector", "state_value") in batch.keys(True)) == shared
        for shuffled in (False, True):
            data = batch[:, torch.randperm(batch.shape[1])] if shuffled else batch
            if shuffled:
                data = data.exclude(("collector", "state_value"))
            ours, theirs = data.clone(), data.clone()
            rows = []
            hook = p.critic.module.register_forward_hook(
                lambda m, i, out, rows=rows: rows.append(out.shape[:-1].numel()))
            with torch.no_grad():
                make_advantage(p.critic, LossConfig(gamma=0.99, gae_lambda=0.95))(ours)
            hook.remove()
            n = batch.numel()
            if shuffled:
                assert rows == [n, n]
            elif shared:  # V(s) came with the batch (the fast collector, from the shared trunk): the ends only
                assert len(rows) == 1 and rows[0] < n / 4 and ("collector", "state_value") not in ours.keys(True)
            else:
                assert rows[0] == n and rows[1] < n / 4  # one pass plus the ends
            with torch.no_grad():
                reference(theirs)
            torch.testing.assert_close(ours["advantage"], theirs["advantage"], atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(ours["next", "state_value"], theirs["next", "state_value"],
                                       atol=1e-6, rtol=1e-5)


def test_one_pass_values_of_a_critic_reading_a_dict_observation():
    """A critic that reads the observation as a TensorDict of entries (``env.observation_dict``; TorchRL's GAE with a
    value network cannot read one): OnePassGAE compares and indexes each entry, and gives the critic's own values of
    every next observation and the reference loop's advantages; with one entry's next step changed (rows not
    consecutive), both passes in full."""
    plain = _batch_with_episode_ends()
    rows = []

    def value(obs: TensorDict) -> torch.Tensor:
        rows.append(obs.batch_size.numel())
        return obs["policy"].sum(-1, keepdim=True) - 2 * obs["critic"].tanh()

    critic = TensorDictModule(value, in_keys=["observation"], out_keys=["state_value"])
    for consecutive in (True, False):
        batch = plain.clone()
        for td in (batch, batch["next"]):
            obs = td.get("observation")
            td.set("observation", TensorDict({"policy": obs, "critic": obs[..., :1] * 3}, batch_size=td.batch_size))
        if not consecutive:
            batch["next", "observation", "critic"][1, 2] += 1.0  # row 1 goes on after step 2: not the next step
        rows.clear()
        ours = OnePassGAE(critic, gamma=0.9, lmbda=0.8)(batch.clone())
        n = batch.numel()
        assert rows == ([n, int(batch["next", "done"].sum()) + 3] if consecutive else [n, n])
        value_of, next_value = value(batch["observation"]), value(batch["next", "observation"])
        torch.testing.assert_close(ours["next", "state_value"], next_value)
        for e in range(batch.shape[0]):
            expected = reference_gae(value_of[e, :, 0], next_value[e, :, 0], batch["next", "reward"][e, :, 0],
                                     batch["next", "terminated"][e, :, 0].float(),
                                     batch["next", "done"][e, :, 0].float(), 0.9, 0.8)
            torch.testing.assert_close(ours["advantage"][e, :, 0], expected, atol=1e-5, rtol=1e-5)



def test_a_critic_input_the_next_steps_lack_is_refused():
    """The critic reads an entry every step carries but the next steps do not: refused by name (it would otherwise
    read something else there, a recurrent critic a state of zeros)."""
    batch = _batch_with_episode_ends()
    batch.set("extra", torch.ones(*batch.shape, 1))
    critic = TensorDictModule(lambda obs, extra: obs.sum(-1, keepdim=True) + extra, in_keys=["observation", "extra"],
                              out_keys=["state_value"])
    with pytest.raises(KeyError, match=r"the critic reads \['extra'\] at each step but the batch's next steps lack"):
        OnePassGAE(critic, gamma=0.9, lmbda=0.8)(batch)

def test_truncation_bootstraps_but_termination_does_not():
    """The same transition differs only by terminated vs truncated: only truncation adds gamma * V(next)."""
    critic = ValueOperator(nn.Linear(1, 1), in_keys=["observation"])
    nn.init.zeros_(critic.module.weight)
    nn.init.constant_(critic.module.bias, 2.0)  # V(s) = 2 everywhere
    ones = torch.ones(1, 1, 1)

    def advantage(terminated: bool) -> float:
        td = TensorDict(
            {"observation": ones, "next": {"observation": ones, "reward": ones,
                                           "terminated": torch.full((1, 1, 1), terminated),
                                           "truncated": torch.full((1, 1, 1), not terminated),
                                           "done": torch.ones(1, 1, 1, dtype=torch.bool)}},
            batch_size=[1, 1], names=[None, "time"],
        )
        with torch.no_grad():
            make_advantage(critic, LossConfig(gamma=0.5, gae_lambda=0.95))(td)
        return float(td["advantage"])

    assert advantage(terminated=True) == 1.0 - 2.0  # r - V(s)
    assert advantage(terminated=False) == 1.0 + 0.5 * 2.0 - 2.0  # r + gamma V(s') - V(s)


@pytest.mark.parametrize(("gamma", "lmbda"), [(0.0, 0.95), (0.99, 0.0), (1e-4, 1e-4), (0.99, 1.0), (1.0, 1.0)])
def test_degenerate_discounts_give_the_reference_advantages(gamma, lmbda):
    # the vectorized recursion cannot run with gamma * lambda of about 0: the step-by-step one does
    g = torch.Generator().manual_seed(0)
    value = torch.randn(2, 9, 1, generator=g)
    batch = TensorDict({"observation": value,
                        "next": {"observation": torch.randn(2, 9, 1, generator=g),
                                 "reward": torch.randn(2, 9, 1, generator=g),
                                 "done": torch.zeros(2, 9, 1, dtype=torch.bool),
                                 "terminated": torch.zeros(2, 9, 1, dtype=torch.bool)}}, batch_size=[2, 9])
    batch["next", "done"][0, 4] = batch["next", "terminated"][0, 4] = True
    critic = TensorDictModule(lambda obs: obs, in_keys=["observation"], out_keys=["state_value"])
    ours = OnePassGAE(critic, gamma=gamma, lmbda=lmbda)(batch.clone())
    reference = GAE(gamma=gamma, lmbda=lmbda, value_network=critic, vectorized=False)(batch.clone())
    torch.testing.assert_close(ours["advantage"], reference["advantage"], atol=1e-5, rtol=1e-5)


def _batch_with_episode_ends(n_envs=3, T=17, obs_dim=5):
    obs = torch.randn(n_envs, T, obs_dim)
    terminated = torch.zeros(n_envs, T, 1, dtype=torch.bool)
    truncated = torch.zeros(n_envs, T, 1, dtype=torch.bool)
    terminated[0, 4] = terminated[1, 10] = True
    truncated[0, 9] = truncated[2, 7] = True
    done = terminated | truncated
    next_obs = torch.cat([obs[:, 1:], torch.randn(n_envs, 1, obs_dim)], 1)
    next_obs[done.squeeze(-1)] = torch.randn(int(done.sum()), obs_dim)
    reward = 3 + 2 * torch.randn(n_envs, T, 1)  # values far from the critic's initial units
    return TensorDict({"observation": obs, "next": {"observation": next_obs, "reward": reward,
                                                   "terminated": terminated, "truncated": truncated, "done": done}},
                      batch_size=[n_envs, T], names=[None, "time"])


def test_value_norm_statistics_are_the_debiased_running_averages():
    norm = ValueNorm(beta=0.9)
    mean, std = norm.stats()
    assert float(mean) == 0.0 and float(std) == pytest.approx(0.1)  # before any update: the variance floor
    batches = [torch.tensor([1.0, 3.0]), torch.tensor([10.0, 14.0, 12.0]), torch.tensor([-2.0])]
    mean_avg = square_avg = weight = 0.0
    for x in batches:  # by hand, in float64
        norm.update(x)
        mean_avg = 0.9 * mean_avg + 0.1 * x.double().mean().item()
        square_avg = 0.9 * square_avg + 0.1 * x.double().square().mean().item()
        weight = 0.9 * weight + 0.1
    mean, std = norm.stats()
    expected_mean = mean_avg / weight
    assert float(mean) == pytest.approx(expected_mean, rel=1e-6)
    assert float(std) == pytest.approx((square_avg / weight - expected_mean**2) ** 0.5, rel=1e-6)
    values = torch.randn(7)
    torch.testing.assert_close(norm.denormalize(norm.normalize(values)), values)
    with pytest.raises(ValueError, match="beta"):
        ValueNorm(beta=1.0)


def test_normalized_values_run_gae_in_value_units_and_give_the_loss_the_critics_units():
    """With loss.normalize_values the critic outputs normalized values: GAE runs on their denormalized values
    (the reference loop on mean + std * output), then the statistics take the batch's targets and the loss gets
    the targets and the rollout's values normalized by them."""
    torch.manual_seed(0)
    gamma, lam = 0.97, 0.9
    critic = ValueOperator(nn.Linear(5, 1), in_keys=["observation"])
    gae = make_advantage(critic, LossConfig(gamma=gamma, gae_lambda=lam, normalize_values=True))
    assert isinstance(gae.value_norm, ValueNorm)
    gae.value_norm.update(torch.tensor([4.0, 9.0, -1.0]))  # statistics from an earlier batch
    before = ValueNorm()
    before.load_state_dict(gae.value_norm.state_dict())
    batch = _batch_with_episode_ends()
    with torch.no_grad():
        gae(batch)
        raw_targets, raw_values = [], []
        for e in range(batch.shape[0]):
            out, next_out = critic.module(batch["observation"][e]), critic.module(batch["next", "observation"][e])
            v, nv = before.denormalize(out).squeeze(-1), before.denormalize(next_out).squeeze(-1)
            expected = reference_gae(v, nv, batch["next", "reward"][e, :, 0],
                                     batch["next", "terminated"][e, :, 0].float(),
                                     batch["next", "done"][e, :, 0].float(), gamma, lam)
            torch.testing.assert_close(batch["advantage"][e, :, 0], expected, atol=1e-5, rtol=1e-5)
            raw_targets.append(expected + v)
            raw_values.append(v)
        raw, values = torch.stack(raw_targets).unsqueeze(-1), torch.stack(raw_values).unsqueeze(-1)
        after = ValueNorm()
        after.load_state_dict(before.state_dict())
        after.update(raw)  # the statistics after this batch
        torch.testing.assert_close(gae.value_norm.stats(), after.stats())
        torch.testing.assert_close(batch["value_target"], after.normalize(raw), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(batch["state_value"], after.normalize(values), atol=1e-5, rtol=1e-5)


def test_value_statistics_are_checkpointed_and_an_estimator_without_them_is_refused(tmp_path):
    from conftest import small_config
    from ppo_td.collect import shutdown
    from ppo_td.persist import load_checkpoint
    from ppo_td.persist.checkpoint import restore, save_checkpoint
    from ppo_td.training import build_pipeline, run

    base = small_config()
    config = dataclasses.replace(base, loss=dataclasses.replace(base.loss, normalize_values=True))
    p = build_pipeline(config)
    run(p, evaluate_at_end=False)
    stats = p.advantage.value_norm.stats()
    assert float(p.advantage.value_norm.debias) > 0  # updated by the run
    save_checkpoint(tmp_path / "c.pt", p, frames=config.total_frames, iteration=config.num_iterations)
    fresh = build_pipeline(config)
    restore(fresh, load_checkpoint(tmp_path / "c.pt"))
    torch.testing.assert_close(fresh.advantage.value_norm.stats(), stats)
    plain = build_pipeline(base)  # a critic in value units would read the checkpoint's in other units
    with pytest.raises(ValueError, match="normalize_values=True and this pipeline has False"):
        restore(plain, load_checkpoint(tmp_path / "c.pt"))
    with pytest.raises(ValueError, match="normalize_values"):
        build_pipeline(config, advantage=GAE(gamma=0.99, lmbda=0.95, value_network=p.critic))
    for pipeline in (p, fresh, plain):
        shutdown(pipeline.collector)


def test_ppo_tds_own_critic_runs_directly_with_the_same_values_and_no_pandas():
    """GAE runs ppo_td's own critic's network directly (unless loss.fast_forward=False): the same values bit for bit
    as through a TensorDictModule (the path of any other critic), without tensordict's ``from_any``, whose first
    call imports pandas (0.2-0.33 s of a run's first iteration where pandas is installed): a run's training imports
    no pandas."""
    import subprocess
    import sys

    from ppo_td import get_preset
    from ppo_td.training import build_pipeline

    p = build_pipeline(dataclasses.replace(get_preset("cleanrl"), frames_per_batch=4 * 32))
    batch = next(iter(p.collector))
    p.collector.shutdown()
    plain = TensorDictModule(p.critic.module, in_keys=list(p.critic.in_keys), out_keys=list(p.critic.out_keys))
    ours, theirs = batch.clone(), batch.clone()
    calls = []
    hook = p.critic.register_forward_hook(lambda *_: calls.append(1))  # the TensorDictModule's own forward
    with torch.no_grad():
        make_advantage(p.critic, LossConfig())(ours)
        make_advantage(plain, LossConfig())(theirs)
        make_advantage(p.critic, LossConfig(fast_forward=False))(batch.clone())  # through the wrapper, asked
    hook.remove()
    assert len(calls) == 2  # ppo_td's critic: its network only, but with fast_forward=False (two passes: V(s), ends)
    for key in ("state_value", ("next", "state_value"), "advantage", "value_target"):
        assert torch.equal(ours[key], theirs[key]), key
    code = ("import dataclasses, sys, torch; torch.set_num_threads(1)\n"
            "from ppo_td import get_preset; from ppo_td.training import train\n"
            "train(dataclasses.replace(get_preset('cleanrl'), total_frames=1024, eval_episodes=0))\n"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split()[-1] == "False"
