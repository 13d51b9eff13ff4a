"""The asymmetric actor-critic (model.actor_keys, model.critic_keys): each network reads its own entries of a Dict
observation and nothing else, the normalizer standardizes each vector entry on its own statistics, the refusals,
the command line and the Python API alike. (load_policy and export reading the actor's entries only: the
``asymmetric`` case of tests/test_deploy.py.)"""

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torchrl.data import Categorical, Composite, Unbounded

import ppo_td
from conftest import ctrl_c_after, small_config
from ppo_td.cli import main
from ppo_td.config import ModelConfig
from ppo_td.envs import RunningObsNorm, build_env
from ppo_td.envs.partial import noisy_sensors
from ppo_td.models import make_actor_critic

torch.set_num_threads(1)

NOISY = "ppo_td.envs.partial:noisy_sensors"


def asymmetric(**model) -> ppo_td.TrainConfig:
    base = ppo_td.get_preset("pendulum")
    return dataclasses.replace(
        base, env=dataclasses.replace(base.env, env_id=NOISY, num_envs=4), frames_per_batch=128, total_frames=384,
        eval_episodes=1, optim=dataclasses.replace(base.optim, num_minibatches=2, update_epochs=2),
        model=dataclasses.replace(base.model, hidden_sizes=(16,), **{"actor_keys": ("policy",),
                                                                    "critic_keys": ("critic",), **model}))


def test_each_network_reads_its_own_entries_only():
    config = asymmetric()
    built = build_env(config.env, seed=1)
    try:
        torch.manual_seed(0)
        actor, critic = make_actor_critic(built.description, config.model)
        td = built.env.reset()
    finally:
        built.env.close()
    other_critic, other_policy = td.clone(), td.clone()
    other_critic["observation", "critic"] = torch.randn(4, 3)
    other_policy["observation", "policy"] = torch.randn(4, 3)
    with torch.no_grad():
        loc, value = actor(td.clone())["loc"], critic(td.clone())["state_value"]
        assert torch.equal(actor(other_critic)["loc"], loc)  # the critic's entry changes no action
        assert torch.equal(critic(other_policy)["state_value"], value)  # the actor's entry changes no value
        assert not torch.equal(actor(other_policy)["loc"], loc)
        assert not torch.equal(critic(other_critic)["state_value"], value)
    # each network sized from its own entries: 3 inputs each, not the 6 of both
    assert [m.in_features for m in actor.modules() if isinstance(m, torch.nn.Linear)][0] == 3
    assert [m.in_features for m in critic.modules() if isinstance(m, torch.nn.Linear)][0] == 3


def test_the_normalizer_standardizes_each_vector_entry_on_its_own_statistics():
    """Against numpy over the stream: every element of each part its own mean and variance; an index entry passes
    untouched; at a partial reset only the reset rows count; the spec of the parts becomes bounded."""
    norm = RunningObsNorm(5, clip=3.0, parts=(("a", (2,)), ("b", (3,))))
    rng = np.random.default_rng(0)
    seen_a, seen_b = [], []
    for step in range(6):
        a = rng.normal(5.0, 2.0, (4, 2)).astype(np.float32)
        b = rng.integers(-10, 10, (4, 3))  # integers come out float32
        td = TensorDict({"a": torch.as_tensor(a), "b": torch.as_tensor(b), "i": torch.arange(4)}, batch_size=[4])
        reset = None if step % 2 == 0 else torch.tensor([True, False, True, False])
        rows = slice(None) if reset is None else reset.numpy()
        seen_a.append(a[rows])
        seen_b.append(b[rows])
        out = norm.observed(td, reset)
        all_a, all_b = np.concatenate(seen_a), np.concatenate(seen_b).astype(np.float64)
        expect_a = np.clip((a - all_a.astype(np.float64).mean(0)) / np.sqrt(all_a.astype(np.float64).var(0) + 1e-8),
                           -3, 3)
        expect_b = np.clip((b - all_b.mean(0)) / np.sqrt(all_b.var(0) + 1e-8), -3, 3)
        np.testing.assert_allclose(out["a"].numpy(), expect_a, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["b"].numpy(), expect_b, rtol=1e-5, atol=1e-5)
        assert out["b"].dtype == torch.float32 and torch.equal(out["i"], torch.arange(4))
        assert torch.equal(td["a"], torch.as_tensor(a))  # the input is left as it was
    spec = Composite(observation=Composite(a=Unbounded(shape=(4, 2)), b=Unbounded(shape=(4, 3), dtype=torch.int64),
                                           i=Categorical(4, shape=(4,)), shape=(4,)), shape=(4,))
    spec = norm.transform_observation_spec(spec)
    assert spec["observation", "a"].space.high.max() == 3.0 and spec["observation", "b"].dtype == torch.float32
    assert isinstance(spec["observation", "i"], Categorical)
    with pytest.raises(ValueError, match="hold 5 numbers, not size=4"):
        RunningObsNorm(4, parts=(("a", (2,)), ("b", (3,))))


def test_training_keeps_the_dict_entries_statistics_in_its_checkpoint(tmp_path):
    ppo_td.train(asymmetric(), run_dir=str(tmp_path), progress=False)
    stats = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["obs_stats"]
    # both entries' 3 elements; every observation counted once: 4 first ones and 384 steps (no episode ended)
    assert stats["mean"].shape == (6,) and int(stats["count"]) == 4 + 384
    # "critic" first (sorted); "policy" has the noise's variance (0.25) added to cos and sin's
    assert (stats["var"][3:5] - stats["var"][:2] > 0.1).all()


def test_the_command_line_and_the_python_api_train_alike(tmp_path, capsys):
    config = asymmetric()
    args = ["train", "--preset", "pendulum", "--env.env-id", NOISY, "--env.num-envs", "4", "--frames-per-batch", "128",
            "--total-frames", "384", "--eval-episodes", "1", "--optim.num-minibatches", "2", "--optim.update-epochs",
            "2", "--model.hidden-sizes", "16", "--model.actor-keys", "policy", "--model.critic-keys", "critic",
            "--run-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    ppo_td.train(config, run_dir=str(tmp_path / "api"), progress=False)
    cli, api = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("cli", "api"))
    assert cli == api
    rows = [list(csv.DictReader((tmp_path / name / "metrics.csv").open())) for name in ("cli", "api")]
    learned = ("loss_policy", "loss_value", "kl_k3", "explained_variance", "grad_norm")
    assert [[r[k] for k in learned] for r in rows[0]] == [[r[k] for k in learned] for r in rows[1]]


@pytest.mark.parametrize("model, message", [
    ({"critic_keys": ("state",)}, r"model.critic_keys names \['state'\], not entries .* choose among "
                                  r"\['critic', 'policy'\]"),
    ({"actor_keys": ("policy", "policy")}, "distinct, non-empty entry names"),
    ({"shared_trunk": True}, "model.shared_trunk.*one trunk cannot read both"),
])
def test_refusals_name_the_setting_and_the_way_out(model, message):
    with pytest.raises(ValueError, match=message):
        config = asymmetric(**model)
        built = build_env(config.env, seed=1)
        try:
            make_actor_critic(built.description, config.model)
        finally:
            built.env.close()


def test_keys_for_an_observation_that_is_not_a_dict_are_refused():
    config = small_config(model=ModelConfig(hidden_sizes=(16,), actor_keys=("policy",)))
    with pytest.raises(ValueError, match=r"model.actor_keys=\['policy'\] picks entries of a Dict observation; this "
                                         r"env's observation is vector\(float32\[4\]\): leave model.actor_keys empty"):
        ppo_td.train(config, progress=False)
    assert ModelConfig(actor_keys=("a",), critic_keys=("a",)).reads_differ is False  # same entries: one trunk may
    assert ModelConfig(shared_trunk=True, actor_keys=("a",), critic_keys=("a",)).shared_trunk


def test_noisy_sensors_env_draws_its_noise_from_its_seed():
    envs = [noisy_sensors(noise_std=0.5) for _ in range(3)]
    firsts = [env.reset(seed=s)[0] for env, s in zip(envs, (3, 3, 4), strict=True)]
    np.testing.assert_array_equal(firsts[0]["policy"], firsts[1]["policy"])
    assert not np.array_equal(firsts[0]["policy"], firsts[2]["policy"])
    env = envs[0]
    noise = []
    for _ in range(400):
        obs, *_ = env.step(env.action_space.sample())
        noise.append(obs["policy"] - obs["critic"])
        assert obs["critic"].dtype == np.float32 and env.observation_space.contains(obs)
    assert abs(np.std(noise) - 0.5) < 0.05
    with pytest.raises(ValueError, match="needs a Box observation"):
        noisy_sensors("Blackjack-v1")


class AllEntries(torch.nn.Module):
    """A user's encoder that concatenates every entry it is given."""

    def __init__(self, space):
        super().__init__()
        self.out_features = sum(entry.shape[0] for _, entry in space.entries)
        self.net = torch.nn.Linear(self.out_features, self.out_features)

    def forward(self, td):
        return self.net(torch.cat([td[k] for k in sorted(td.keys())], -1))


def test_a_users_encoder_is_given_its_networks_entries_only():
    config = asymmetric()
    built = build_env(config.env, seed=1)
    try:
        actor, critic = make_actor_critic(built.description, config.model, encoder=AllEntries)
        td = built.env.reset()
    finally:
        built.env.close()
    other = td.clone()
    other["observation", "critic"] = torch.randn(4, 3)
    with torch.no_grad():
        assert torch.equal(actor(td.clone())["loc"], actor(other)["loc"])  # built on 3 inputs, run on 3
        assert critic(td.clone())["state_value"].shape == (4, 1)


GROUPED = "torchrl_factories:grouped_pendulums"


def grouped(**env) -> ppo_td.TrainConfig:
    """The asymmetric run on a TorchRL env whose groups are top-level entries (as Isaac Lab's through TorchRL)."""
    config = asymmetric()
    env = {"env_id": GROUPED, "max_episode_steps": 200, "observation_dict": True, **env}
    return dataclasses.replace(config, env=dataclasses.replace(config.env, **env))


def test_a_torchrl_envs_groups_are_split_between_actor_and_critic(tmp_path):
    config = grouped()
    built = build_env(dataclasses.replace(config.env, normalize_observations=False), seed=1)
    try:
        assert str(built.description.observation_space) == "Dict(critic=vector(float32[3]), policy=vector(float32[3]))"
        td = built.env.reset()
        for group in ("policy", "critic"):  # each group as the env gives it, under "observation" (unnormalized)
            assert torch.equal(td["observation", group], td[group])
        actor, critic = make_actor_critic(built.description, config.model)
    finally:
        built.env.close()
    other = td.clone()
    other["observation", "critic"] = torch.randn(4, 3)
    with torch.no_grad():  # the critic's group changes no action, and changes the value
        assert torch.equal(actor(other.clone())["loc"], actor(td.clone())["loc"])
        assert not torch.equal(critic(other.clone())["state_value"], critic(td.clone())["state_value"])
    ppo_td.train(config, run_dir=str(tmp_path), progress=False)
    stats = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["obs_stats"]
    assert stats["mean"].shape == (6,)  # each group's own statistics ("critic" first, sorted)
    assert (stats["var"][3:5] - stats["var"][:2] > 0.1).all()  # the policy group's noise (std 0.5)


def test_a_run_on_a_torchrl_envs_groups_resumes_with_them(tmp_path):
    with pytest.raises(KeyboardInterrupt, match="continue with ppo_td.resume"):
        ppo_td.train(grouped(), run_dir=str(tmp_path), progress=False, callbacks=[ctrl_c_after(1)])
    result = ppo_td.resume(str(tmp_path), progress=False)  # rebuilt from the record: the groups apart again
    assert [m["iteration"] for m in result.history] == [2, 3] and result.eval_returns
    assert json.loads((tmp_path / "config.json").read_text())["env"]["observation_dict"] is True


def test_the_command_line_reads_a_torchrl_envs_groups_as_the_python_api(tmp_path):
    args = ["train", "--preset", "pendulum", "--env.env-id", GROUPED, "--env.num-envs", "4", "--env.max-episode-steps",
            "200", "--env.observation-dict", "--frames-per-batch", "128", "--total-frames", "256",
            "--eval-episodes", "1", "--optim.num-minibatches", "2", "--optim.update-epochs", "2",
            "--model.hidden-sizes", "16", "--model.actor-keys", "policy", "--model.critic-keys", "critic",
            "--run-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    ppo_td.train(dataclasses.replace(grouped(), total_frames=256), run_dir=str(tmp_path / "api"), progress=False)
    cli, api = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("cli", "api"))
    assert cli == api and cli["env"]["observation_dict"] is True
    rows = [list(csv.DictReader((tmp_path / name / "metrics.csv").open())) for name in ("cli", "api")]
    assert [r["loss_policy"] for r in rows[0]] == [r["loss_policy"] for r in rows[1]]


def test_without_observation_dict_a_torchrl_envs_groups_are_refused_naming_it():
    config = grouped(observation_dict=False)
    built = build_env(config.env, seed=1)
    try:
        with pytest.raises(ValueError, match=r"picks entries of a Dict observation; this env's observation is "
                                             r"vector\(float32\[6\]\).*kept apart with env.observation_dict"):
            make_actor_critic(built.description, config.model)
    finally:
        built.env.close()


@pytest.mark.parametrize("env_id, expect", [
    ("torchrl.envs.custom.pendulum:PendulumEnv", "Dict(th=vector(float32[1]), thdot=vector(float32[1]))"),
    ("torchrl_factories:observation_and_critic", "Dict(critic=vector(float32[3]), observation=vector(float32[3]))"),
])
def test_scalar_entries_and_one_named_observation_are_kept_apart(env_id, expect):
    built = build_env(ppo_td.EnvConfig(env_id, num_envs=2, max_episode_steps=20, observation_dict=True), seed=1)
    try:
        assert str(built.description.observation_space) == expect
        steps = built.env.rollout(3, break_when_any_done=False)
    finally:
        built.env.close()
    inner = steps["next", "observation"]
    assert sorted(inner.keys()) == sorted(k.split("=")[0] for k in expect[5:-1].split(", "))
    if env_id.endswith("PendulumEnv"):  # the scalars given one dimension, their values unchanged
        assert torch.equal(inner["th"].squeeze(-1), steps["next", "th"])
    else:  # the noisy group that was named "observation", nested under its name, apart from the critic's
        assert inner["observation"].shape == inner["critic"].shape == (2, 3, 3)
        assert not torch.equal(inner["observation"], inner["critic"])


def test_observation_dict_is_refused_where_it_would_do_nothing():
    config = small_config()
    with pytest.raises(ValueError, match="env.observation_dict keeps a TorchRL env's entries apart; 'CartPole-v1' is "
                                         "a Gymnasium env.*leave env.observation_dict off"):
        ppo_td.train(dataclasses.replace(config, env=dataclasses.replace(config.env, observation_dict=True)),
                     progress=False)
    for field, value, expect in [("observation_keys", ("a",), r"\(\)"), ("observation_dict", True, "False")]:
        with pytest.raises(ValueError, match=rf"env.{field}=.* is invalid: it must be {expect} with env.suite='vmas'"):
            ppo_td.EnvConfig("navigation", suite="vmas", max_episode_steps=10, **{field: value})
