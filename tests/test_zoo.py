"""RL Zoo hyper-parameter files -> ppo_td configs: every key mapped or named, and the CLI's --from-zoo."""

import json
import textwrap

import pytest

from ppo_td import get_preset
from ppo_td.cli.main import main
from ppo_td.zoo import from_zoo, zoo_entry

ZOO = textwrap.dedent("""
    # in RL Zoo's format (hyperparams/ppo.yml): SB3 names, YAML tags, policy_kwargs as a dict(...) string
    CartPole-v1:
      n_envs: 8
      n_timesteps: !!float 1e5
      policy: 'MlpPolicy'
      n_steps: 32
      batch_size: 256
      gae_lambda: 0.8
      gamma: 0.98
      n_epochs: 20
      ent_coef: 0.0
      learning_rate: lin_0.001
      clip_range: lin_0.2
    Pendulum-v1:
      normalize: "{'norm_obs': True, 'norm_reward': False}"
      n_envs: 4
      n_timesteps: !!float 1e5
      n_steps: 1024
      gae_lambda: 0.95
      gamma: 0.9
      n_epochs: 10
      ent_coef: 0.0
      learning_rate: !!float 1e-3
      clip_range: 0.2
      use_sde: True
      sde_sample_freq: 4
      policy_kwargs: "dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                           net_arch=dict(pi=[256, 256], vf=[256, 256]))"
    atari:
      env_wrapper:
        - stable_baselines3.common.atari_wrappers.AtariWrapper
      frame_stack: 4
      policy: 'CnnPolicy'
      n_envs: 8
      n_steps: 128
      n_epochs: 4
      batch_size: 256
      n_timesteps: !!float 1e7
      learning_rate: lin_2.5e-4
      clip_range: lin_0.1
      vf_coef: 0.5
      ent_coef: 0.01
    Odd-v0:
      n_envs: 3
      n_steps: 100
      batch_size: 64
""")


@pytest.fixture
def zoo_file(tmp_path):
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO)
    return path


def test_an_entry_maps_onto_the_config_over_sb3_defaults(zoo_file):
    key, entry = zoo_entry(zoo_file, "CartPole-v1")
    config, notes = from_zoo(entry, "CartPole-v1")
    assert key == "CartPole-v1" and config.env.num_envs == 8 and config.total_frames == 100_000
    assert config.frames_per_batch == 256 and config.optim.num_minibatches == 1  # 8 x 32 steps, minibatches of 256
    assert (config.optim.lr, config.optim.anneal_lr, config.optim.update_epochs) == (1e-3, True, 20)
    assert (config.loss.gamma, config.loss.gae_lambda, config.loss.clip_epsilon) == (0.98, 0.8, 0.2)
    generic = get_preset("generic")  # what the entry does not set stays SB3's default
    assert config.optim.max_grad_norm == generic.optim.max_grad_norm and config.loss.critic_coeff == 0.5
    assert notes == ["clip_range lin_0.2: ppo_td keeps the clip range constant at 0.2"]


def test_policy_kwargs_normalize_and_unknown_keys(zoo_file):
    config, notes = from_zoo(zoo_entry(zoo_file, "Pendulum-v1")[1], "Pendulum-v1")
    assert config.env.normalize_observations and not config.env.normalize_rewards
    assert config.model.hidden_sizes == (256, 256) and config.model.activation == "relu"
    assert config.model.log_std_init == -2.0 and config.optim.num_minibatches == 64  # SB3's batch_size 64
    assert config.model.exploration == "gsde" and config.model.sde_sample_every == 4  # SB3's use_sde, sde_sample_freq
    assert config.model.orthogonal_init is False and not any("ortho_init" in n for n in notes)


def test_atari_ids_read_the_atari_entry(zoo_file):
    key, entry = zoo_entry(zoo_file, "ALE/Breakout-v5")
    config, notes = from_zoo(entry, "ALE/Breakout-v5")
    assert key == "atari" and config.env.atari and config.model.shared_trunk and config.model.hidden_sizes == ()
    assert "frameskip=1" in config.env.kwargs and config.frames_per_batch == 1024
    assert config.optim.num_minibatches == 4 and config.total_frames == 10_000_000
    assert notes == ["clip_range lin_0.1: ppo_td keeps the clip range constant at 0.1"]


def test_bad_entries_are_named(zoo_file, tmp_path):
    with pytest.raises(ValueError, match=r"batch_size 64 does not divide n_steps \* n_envs = 300"):
        from_zoo(zoo_entry(zoo_file, "Odd-v0")[1], "Odd-v0")
    with pytest.raises(ValueError, match=r"no entry for 'CartPole-v2'; close: \['CartPole-v1'\]"):
        zoo_entry(zoo_file, "CartPole-v2")
    (tmp_path / "bad.yml").write_text("[1, 2")
    with pytest.raises(ValueError, match="cannot read it as an RL Zoo hyper-parameter file"):
        zoo_entry(tmp_path / "bad.yml", "CartPole-v1")


def test_cli_from_zoo_with_flags_that_still_win(zoo_file, tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "--from-zoo", str(zoo_file), "--env.env-id", "CartPole-v1", "--total-frames", "512",
                 "--eval-episodes", "1", "--run-dir", str(run), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert f"defaults: RL Zoo entry 'CartPole-v1' of {zoo_file}" in out and "note: RL Zoo clip_range" in out
    config = json.loads((run / "config.json").read_text())
    assert config["total_frames"] == 512 and config["env"]["num_envs"] == 8 and config["loss"]["gamma"] == 0.98
    assert json.loads((run / "run.json").read_text())["preset"] == "zoo"
    assert main(["train", "--from-zoo", str(zoo_file)]) == 2
    assert "give the env with --env.env-id" in capsys.readouterr().err


RL_ZOO_ENTRIES = textwrap.dedent("""
    # rl-baselines3-zoo hyperparams/ppo.yml at commit 22e3ff2 (the entries the RL Zoo presets carry; the
    # MountainCarContinuous batch_size is 8, the whole 8-step rollout SB3 takes for its 256)
    CartPole-v1: {n_envs: 8, n_timesteps: !!float 1e5, policy: 'MlpPolicy', n_steps: 32, batch_size: 256,
                  gae_lambda: 0.8, gamma: 0.98, n_epochs: 20, ent_coef: 0.0, learning_rate: lin_0.001,
                  clip_range: lin_0.2}
    MountainCar-v0: {normalize: true, n_envs: 16, n_timesteps: !!float 1e6, policy: 'MlpPolicy', n_steps: 16,
                     gae_lambda: 0.98, gamma: 0.99, n_epochs: 4, ent_coef: 0.0}
    MountainCarContinuous-v0: {normalize: true, n_envs: 1, n_timesteps: !!float 20000, policy: 'MlpPolicy',
                               batch_size: 8, n_steps: 8, gamma: 0.9999, learning_rate: !!float 7.77e-05,
                               ent_coef: 0.00429, clip_range: 0.1, n_epochs: 10, gae_lambda: 0.9, max_grad_norm: 5,
                               vf_coef: 0.19, use_sde: True,
                               policy_kwargs: "dict(log_std_init=-3.29, ortho_init=False)"}
    Acrobot-v1: {normalize: true, n_envs: 16, n_timesteps: !!float 1e6, policy: 'MlpPolicy', n_steps: 256,
                 gae_lambda: 0.94, gamma: 0.99, n_epochs: 4, ent_coef: 0.0}
    BipedalWalker-v3: {normalize: true, n_envs: 32, n_timesteps: !!float 5e6, policy: 'MlpPolicy', n_steps: 2048,
                       batch_size: 64, gae_lambda: 0.95, gamma: 0.999, n_epochs: 10, ent_coef: 0.0,
                       learning_rate: !!float 3e-4, clip_range: 0.18}
    LunarLander-v3: {n_envs: 16, n_timesteps: !!float 1e6, policy: 'MlpPolicy', n_steps: 1024, batch_size: 64,
                     gae_lambda: 0.98, gamma: 0.999, n_epochs: 4, ent_coef: 0.01}
    LunarLanderContinuous-v3: {n_envs: 16, n_timesteps: !!float 1e6, policy: 'MlpPolicy', n_steps: 1024,
                               batch_size: 64, gae_lambda: 0.98, gamma: 0.999, n_epochs: 4, ent_coef: 0.01}
    Swimmer-v5: {normalize: true, n_timesteps: !!float 1e6, policy: 'MlpPolicy', gamma: 0.9999, n_envs: 4,
                 n_steps: 1024, batch_size: 256, learning_rate: !!float 6e-4, gae_lambda: 0.98}
    MiniGrid-Empty-Random-5x5-v0: {env_wrapper: minigrid.wrappers.FlatObsWrapper, normalize: true, n_envs: 8,
                                   n_timesteps: !!float 1e5, policy: 'MlpPolicy', n_steps: 128, batch_size: 64,
                                   gae_lambda: 0.95, gamma: 0.99, n_epochs: 10, ent_coef: 0.0,
                                   learning_rate: 2.5e-4, clip_range: 0.2}
    HalfCheetah-v5: {normalize: true, n_envs: 1, policy: 'MlpPolicy', n_timesteps: !!float 1e6, batch_size: 64,
                     n_steps: 512, gamma: 0.98, learning_rate: 2.0633e-05, ent_coef: 0.000401762, clip_range: 0.1,
                     n_epochs: 20, gae_lambda: 0.92, max_grad_norm: 0.8, vf_coef: 0.58096,
                     policy_kwargs: "dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                                     net_arch=dict(pi=[256, 256], vf=[256, 256]))"}
""")
"""RL Zoo's entries (Swimmer-v4's with RL Zoo's mujoco defaults merged, and HalfCheetah-v4's, on v5; MiniGrid's
minigrid-defaults)."""

PRESET_OF = {"CartPole-v1": "cartpole-zoo", "MountainCar-v0": "mountaincar",
             "MountainCarContinuous-v0": "mountaincar-continuous", "Acrobot-v1": "acrobot",
             "BipedalWalker-v3": "bipedalwalker", "LunarLander-v3": "lunarlander",
             "LunarLanderContinuous-v3": "lunarlander-continuous", "Swimmer-v5": "swimmer",
             "HalfCheetah-v5": "halfcheetah-zoo", "minigrid:MiniGrid-Empty-Random-5x5-v0": "minigrid"}
STARTS_FROM = {"CartPole-v1": "cartpole", "HalfCheetah-v5": "halfcheetah"}
"""Ids whose own preset comes first without --preset (the default, CleanRL's MuJoCo settings)."""


@pytest.mark.parametrize("env_id", PRESET_OF)
def test_the_rl_zoo_presets_are_rl_zoos_entries(env_id, tmp_path):
    from ppo_td.presets import preset_for

    path = tmp_path / "ppo.yml"
    path.write_text(RL_ZOO_ENTRIES)
    config, notes = from_zoo(zoo_entry(path, env_id)[1], env_id)
    assert get_preset(PRESET_OF[env_id]) == config
    assert preset_for(env_id)[0] == STARTS_FROM.get(env_id, PRESET_OF[env_id])
    assert all("clip_range lin" in n for n in notes), notes
