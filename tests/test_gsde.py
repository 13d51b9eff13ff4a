"""Generalized state-dependent exploration (model.exploration='gsde'): SB3's formulas, the noise held for
sde_sample_every steps and redrawn at episode starts, samples and log-probs in collected batches, the gradient
paths, every entry point (evaluation, resume, workers, export, a deployed policy), and the refusals."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from ppo_td.cli.main import main
from ppo_td.config import EnvConfig, ModelConfig, TrainConfig
from ppo_td.envs import make_env
from ppo_td.models import make_actor_critic
from ppo_td.models.gsde import NOISE_KEY, VARIANCE_EPS, ExplorationNoise, GSDEHead, add_noise, gsde_head
from ppo_td.models.plain import policy_net
from ppo_td.presets import get_preset
from ppo_td.training import StopTraining, build_pipeline

torch.set_num_threads(1)

GSDE = ModelConfig(hidden_sizes=(16, 16), exploration="gsde", log_std_init=-1.0)


def _config(**changes) -> TrainConfig:
    base = dataclasses.replace(get_preset("pendulum"), env=EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=12),
                               model=GSDE, frames_per_batch=32, total_frames=64, eval_episodes=2)
    return dataclasses.replace(base, **changes)


def test_the_head_is_sb3s_state_dependent_noise_distribution():
    """SB3's StateDependentNoiseDistribution (full_std, learn_features=False): variance = z^2 @ std^2 + 1e-6,
    noise = z @ (eps * std), the action loc + noise, scored by the Gaussian of that variance."""
    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh())
    head = GSDEHead(body, torch.nn.Linear(5, 2), log_std_init=-0.5)
    with torch.no_grad():
        head.log_std.add_(0.1 * torch.randn(5, 2))
    x, eps = torch.randn(7, 3), torch.randn(7, 5, 2)
    loc, scale, noise = head(x, eps)
    z, std = body(x).detach(), head.log_std.exp()
    torch.testing.assert_close(loc, head.mean(body(x)))
    torch.testing.assert_close(scale, torch.sqrt(z.square() @ std.square() + VARIANCE_EPS))
    torch.testing.assert_close(noise, torch.einsum("bi,bij->bj", z, eps * std))
    assert torch.equal(head(x)[2], torch.zeros(7, 2))  # without eps: the mean action
    # the features are held out of the exploration: scale and noise do not train the body, log_std trains
    scale.sum().backward(retain_graph=True)
    assert all(p.grad is None for p in body.parameters()) and head.log_std.grad is not None


def test_the_noise_is_held_for_every_steps_and_redrawn_at_episode_starts():
    env = make_env(EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=5), seed=0)
    env.append_transform(ExplorationNoise((4, 1), every=3))
    assert env.observation_spec[NOISE_KEY].shape == (2, 4, 1)
    torch.manual_seed(0)
    td = env.rollout(12, break_when_any_done=False)
    eps = td[NOISE_KEY][0, :, :, 0]  # copy 0, steps 0-11: [12, 4]
    # drawn at the reset (step 0), held, a new one every 3 steps of the copy (steps 3, 6, 9) and at the episode
    # starts every 5 steps (steps 5 and 10)
    starts = {0, 3, 5, 6, 9, 10}
    for t in range(1, 12):
        assert torch.equal(eps[t], eps[t - 1]) is (t not in starts), t
    assert not torch.equal(td[NOISE_KEY][0, 0], td[NOISE_KEY][1, 0])  # each copy its own
    env.close()


def test_at_a_partial_reset_only_the_copies_that_start_again_draw_a_new_matrix():
    env = make_env(EnvConfig("CartPole-v1", num_envs=4), seed=1)  # episodes of different lengths
    env.append_transform(ExplorationNoise((3, 2), every=0))  # episode starts only
    torch.manual_seed(0)
    td = env.rollout(60, break_when_any_done=False)
    eps, done = td[NOISE_KEY], td["next", "done"].squeeze(-1)
    starts = 0
    for t in range(1, 60):
        for copy in range(4):
            new = not torch.equal(eps[copy, t], eps[copy, t - 1])
            assert new is bool(done[copy, t - 1]), (copy, t)
            starts += new
    assert starts >= 3 and not done[:, :-1].all(0).any()  # resets happened, never all copies at once
    env.close()


def test_collected_actions_are_the_mean_plus_the_state_dependent_noise_and_scored_by_its_gaussian():
    p = build_pipeline(_config())
    assert type(p.collector).__name__ == "FastCollector"  # the noise transform's own code, stepped by ppo_td's loop
    batch = next(iter(p.collector))
    p.collector.shutdown()
    torch.testing.assert_close(batch["action"], batch["loc"] + batch["action_noise"])
    gaussian = torch.distributions.Normal(batch["loc"], batch["scale"])
    torch.testing.assert_close(batch["action_log_prob"], gaussian.log_prob(batch["action"]).sum(-1))
    assert batch[NOISE_KEY].shape == (*batch.shape, 16, 1)
    with torch.no_grad():  # the noise is the one the copy's eps gives at that state
        loc, scale, noise = policy_net(p.actor, acting=True)(batch["observation"], batch[NOISE_KEY])
    for name, value in (("loc", loc), ("scale", scale), ("action_noise", noise)):
        torch.testing.assert_close(batch[name], value)
    head = gsde_head(p.actor)
    # one training step moves log_std (the exploration is learned) and keeps every gradient finite
    before = head.log_std.detach().clone()
    loss = p.loss(batch.reshape(-1))
    sum(loss[k] for k in loss.keys() if k.startswith("loss_")).backward()
    assert head.log_std.grad is not None and bool(head.log_std.grad.isfinite().all())
    p.optimizer.step()
    assert not torch.equal(head.log_std.detach(), before)


def test_every_entry_point_takes_a_gsde_run(tmp_path, capsys):
    """Python training stopped after an iteration, the command line resumes it exactly (the noise matrices and the
    steps to their next draw are in the checkpoint, tests/test_resume.py), its evaluation adds the noise transform
    too; ppo-td eval and export take the run, a deployed policy acts with its mean and samples with fresh noise."""
    import ppo_td

    run = tmp_path / "run"

    def stop_after_first(metrics, pipeline):
        if metrics["iteration"] == 1:
            raise StopTraining

    result = ppo_td.train(_config(total_frames=96), run_dir=run, callbacks=[stop_after_first])
    assert result.stopped and json.loads((run / "config.json").read_text())["model"]["exploration"] == "gsde"
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "exactly" in out and "over 2 episodes" in out
    assert json.loads((run / "summary.json").read_text())["frames"] == 96
    assert main(["eval", str(run), "--episodes", "1", "--max-steps", "20"]) == 0
    assert main(["export", "--format", "torchscript", "--out", str(tmp_path / "p.pt"), str(run / "checkpoint.pt")]) == 0
    exported = torch.jit.load(str(tmp_path / "p.pt"))

    from ppo_td import load_policy

    policy = load_policy(run)
    obs = np.array([[1.0, 0.0, 0.3], [0.0, 1.0, -0.2]], dtype=np.float32)
    mean = policy(obs)
    np.testing.assert_allclose(mean, exported(torch.as_tensor(obs)).numpy(), atol=1e-6)
    torch.manual_seed(0)
    sampled = policy(obs, deterministic=False)
    assert sampled.shape == mean.shape and not np.allclose(sampled, mean)


def test_worker_processes_carry_the_noise_matrices():
    config = _config(collector=dataclasses.replace(get_preset("pendulum").collector, backend="process",
                                                   num_workers=2), frames_per_batch=32)
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
    assert batch[NOISE_KEY].shape[-2:] == (16, 1)
    torch.testing.assert_close(batch["action"], batch["loc"] + batch["action_noise"])


def test_what_gsde_does_not_explore_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="explores Box actions.*model.exploration='gaussian'"):
        build_pipeline(_config(env=EnvConfig("CartPole-v1", num_envs=2)))
    env = make_env(EnvConfig("Pendulum-v1", num_envs=1))
    with pytest.raises(ValueError, match="wrap it as TransformedEnv"):  # a plain env cannot take the noise
        add_noise(env.base_env, make_actor_critic(env, GSDE)[0], 4)
    env.close()
    with pytest.raises(ValueError, match="model.squash_actions"):
        ModelConfig(exploration="gsde", squash_actions=True)
    with pytest.raises(ValueError, match="model.recurrent"):
        ModelConfig(exploration="gsde", recurrent="lstm")
    with pytest.raises(ValueError, match="model.sde_sample_every"):
        ModelConfig(sde_sample_every=-1)
    with pytest.raises(ValueError, match="model.exploration"):
        ModelConfig(exploration="sde")
