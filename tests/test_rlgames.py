"""rl_games PPO configs (ppo-td train --from-rl-games FILE): a robot config of Isaac Lab's shape and an envpool
MuJoCo config of rl_games' own mapped field by field, the reward shaper against its formula on Pendulum's own reward,
the refusals, the command line and Python giving the same config."""

import dataclasses

import pytest
import torch
import yaml

from ppo_td.cli import main
from ppo_td.presets import get_preset
from ppo_td.rlgames import from_rl_games, read_rl_games
from ppo_td.training import build_pipeline


def robot_params(**config) -> dict:
    """An rl_games config shaped as Isaac Lab's locomotion ones (anymal_c rough: a shared ELU trunk, thousands of
    envs x 24 steps, the KL-adaptive rate, the count of envs left to the launching script)."""
    network = {"name": "actor_critic", "separate": False,
               "space": {"continuous": {"mu_activation": "None", "sigma_activation": "None",
                                        "mu_init": {"name": "default"},
                                        "sigma_init": {"name": "const_initializer", "val": 0}, "fixed_sigma": True}},
               "mlp": {"units": [512, 256, 128], "activation": "elu", "d2rl": False,
                       "initializer": {"name": "default"}, "regularizer": {"name": "None"}}}
    base = {"name": "robot", "env_name": "rlgpu", "device": "cuda:0", "multi_gpu": False, "ppo": True,
            "mixed_precision": True, "normalize_input": False, "normalize_value": True, "value_bootstrap": True,
            "num_actors": -1, "reward_shaper": {"scale_value": 0.6}, "normalize_advantage": True, "gamma": 0.99,
            "tau": 0.95, "learning_rate": 1e-3, "lr_schedule": "adaptive", "schedule_type": "legacy",
            "kl_threshold": 0.01, "score_to_win": 20000, "max_epochs": 1500, "save_best_after": 100,
            "save_frequency": 50, "grad_norm": 1.0, "entropy_coef": 0.005, "truncate_grads": True, "e_clip": 0.2,
            "horizon_length": 24, "minibatch_size": 24576, "mini_epochs": 5, "critic_coef": 2.0, "clip_value": True,
            "seq_length": 4, "bounds_loss_coef": 0.0}
    return {"seed": 42, "algo": {"name": "a2c_continuous"}, "model": {"name": "continuous_a2c_logstd"},
            "network": network, "config": {k: v for k, v in {**base, **config}.items() if v is not None}}


def test_a_robot_config_maps_field_by_field():
    config, notes = from_rl_games(robot_params(), "Pendulum-v1", num_envs=4096)
    assert config.env.num_envs == 4096 and config.frames_per_batch == 24 * 4096
    assert config.optim.num_minibatches == 4 and config.optim.update_epochs == 5
    assert config.total_frames == 1500 * 24 * 4096 and config.seed == 42
    assert (config.loss.gamma, config.loss.gae_lambda, config.loss.clip_epsilon, config.loss.clip_value) == (
        0.99, 0.95, 0.2, 0.2)
    assert config.loss.critic_coeff == 1.0  # rl_games' 0.5 * critic_coef * squared error
    assert config.loss.entropy_coeff == 0.005 and config.loss.normalize_values and config.loss.normalize_advantage
    assert not config.env.normalize_observations
    assert (config.optim.lr, config.optim.adam_eps, config.optim.max_grad_norm) == (1e-3, 1e-8, 1.0)
    assert (config.optim.desired_kl, config.optim.anneal_lr, config.optim.kl_lr_every) == (0.01, False, "minibatch")
    assert (config.optim.min_lr, config.optim.max_lr) == (1e-6, 1e-2)
    assert config.model.hidden_sizes == (512, 256, 128) and config.model.activation == "elu"
    assert config.model.shared_trunk and not config.model.orthogonal_init and config.model.log_std_init == 0.0
    assert config.env.train_transforms == ("torchrl.envs:RewardScaling loc=0.0 scale=0.6",)
    said = "\n".join(notes)
    for key in ("normalize_advantage", "normalize_value", "lr_schedule adaptive", "value_bootstrap",
                "mixed_precision", "minibatches", "mlp.initializer"):
        assert key in said, key
    with pytest.raises(ValueError, match="num_actors -1: the launching script sets it; give the number of env "
                                         "copies with --env.num-envs N"):
        from_rl_games(robot_params(), "Pendulum-v1")


def test_a_central_value_reads_the_states_entry_in_its_own_network():
    params = robot_params()
    params["config"]["central_value_config"] = {"learning_rate": 5e-4, "mini_epochs": 5, "minibatch_size": 8192,
                                                "network": {"mlp": {"units": [512, 256]}}}
    config, notes = from_rl_games(params, "Pendulum-v1", num_envs=4096)
    assert (config.model.actor_keys, config.model.critic_keys, config.model.shared_trunk) == (
        ("obs",), ("states",), False)
    said = next(n for n in notes if n.startswith("central_value_config"))
    assert "--model.critic-keys NAME" in said and "network, learning_rate, mini_epochs, minibatch_size" in said
    assert not any("has no ppo_td counterpart" in n for n in notes)


def test_schedules_and_gradients_map_as_rl_games_runs_them():
    standard, _ = from_rl_games(robot_params(schedule_type="standard"), "Pendulum-v1", num_envs=4096)
    assert standard.optim.kl_lr_every == "epoch"
    linear, notes = from_rl_games(robot_params(lr_schedule="linear"), "Pendulum-v1", num_envs=4096)
    assert linear.optim.anneal_lr and linear.optim.desired_kl is None and any("1e-6" in n for n in notes)
    constant, _ = from_rl_games(robot_params(lr_schedule=None), "Pendulum-v1", num_envs=4096)
    assert not constant.optim.anneal_lr and constant.optim.desired_kl is None
    unclipped, notes = from_rl_games(robot_params(truncate_grads=False), "Pendulum-v1", num_envs=4096)
    assert unclipped.optim.max_grad_norm == 1e9 and any("truncate_grads" in n for n in notes)
    no_value_clip, _ = from_rl_games(robot_params(clip_value=False), "Pendulum-v1", num_envs=4096)
    assert no_value_clip.loss.clip_value is None
    per_env, _ = from_rl_games(robot_params(minibatch_size_per_env=6, minibatch_size=None), "Pendulum-v1",
                               num_envs=4096)
    assert per_env.optim.num_minibatches == 4  # 6 of each env's 24 steps a minibatch
    _, notes = from_rl_games(robot_params(some_new_key=3), "Pendulum-v1", num_envs=4096)
    assert "some_new_key: 3 has no ppo_td counterpart; ignored" in notes


@pytest.mark.parametrize("change, problem", [
    ({"network": {"rnn": {"name": "lstm", "units": 256}}}, "network.rnn"),
    ({"network": {"mlp": {"units": [64], "activation": "selu"}}}, "activation 'selu'"),
    ({"network": {"mlp": {"units": [64], "activation": "elu", "d2rl": True}}}, "d2rl"),
    ({"network": {"mlp": {"units": [64], "activation": "elu", "initializer": {"name": "kaiming_normal"}}}},
     "initializer 'kaiming_normal'"),
    ({"network": {"space": {"continuous": {"fixed_sigma": False}}}}, "fixed_sigma: False"),
    ({"network": {"space": {"continuous": {"fixed_sigma": True, "mu_activation": "tanh"}}}}, "mu_activation"),
    ({"algo": {"name": "sac"}}, "algo 'sac'"),
    ({"config": {"minibatch_size": 1000}}, "minibatch_size 1000 does not divide"),
    ({"config": {"e_clip": None}}, "config.e_clip is missing"),
    ({"config": {"normalize_rms_advantage": True}}, "normalize_rms_advantage"),
    ({"config": {"reward_shaper": {"log_val": True}}}, "log_val"),
    ({"config": {"schedule_type": "standard_epoch"}}, "schedule_type 'standard_epoch'"),
])
def test_what_ppo_td_cannot_train_as_written_is_refused_naming_it(change, problem):
    params = robot_params()
    for section, values in change.items():
        if section == "config":
            params["config"].update(values)
            params["config"] = {k: v for k, v in params["config"].items() if v is not None}
        else:
            params[section] = values
    with pytest.raises(ValueError, match=problem):
        from_rl_games(params, "Pendulum-v1", num_envs=4096)


def test_the_reward_shaper_is_rl_games_formula_on_the_training_rewards():
    """clip((r + shift) * scale, min_val, max_val) on Pendulum's reward, recomputed from the observation and
    action each step came from (the env's own formula)."""
    shaper = {"scale_value": 0.5, "shift_value": 2.0, "min_val": -3.0, "max_val": 0.25}
    params = robot_params(reward_shaper=shaper, horizon_length=32, minibatch_size=64, normalize_value=False)
    config, _ = from_rl_games(params, "Pendulum-v1", num_envs=4)
    config = dataclasses.replace(config, total_frames=128, eval_episodes=0)
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
    cos, sin, speed = batch["observation"].unbind(-1)
    torque = batch["action"].clamp(-2.0, 2.0).squeeze(-1)
    raw = -(torch.atan2(sin, cos) ** 2 + 0.1 * speed ** 2 + 0.001 * torque ** 2)
    want = ((raw + 2.0) * 0.5).clamp(-3.0, 0.25)
    got = batch["next", "reward"].squeeze(-1)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    assert (got == 0.25).any() and (got < 0.25).any()  # the clip and the formula both reached


ENVPOOL = """
params:
  seed: 5
  algo: {name: a2c_continuous}
  model: {name: continuous_a2c_logstd}
  network:
    name: actor_critic
    separate: False
    space:
      continuous:
        mu_activation: None
        sigma_activation: None
        mu_init: {name: default}
        sigma_init: {name: const_initializer, val: 0}
        fixed_sigma: True
    mlp:
      units: [32, 32]
      activation: elu
      initializer: {name: default}
  config:
    name: pendulum_envpool
    env_name: envpool
    normalize_input: True
    normalize_value: True
    value_bootstrap: True
    normalize_advantage: True
    reward_shaper: {scale_value: 0.1}
    gamma: 0.99
    tau: 0.95
    learning_rate: 3e-4
    lr_schedule: adaptive
    kl_threshold: 0.008
    grad_norm: 1.0
    entropy_coef: 0.0
    truncate_grads: True
    e_clip: 0.2
    clip_value: True
    bounds_loss_coef: 0.0
    max_epochs: 3
    num_actors: 8
    horizon_length: 16
    minibatch_size: 64
    mini_epochs: 2
    critic_coef: 2
    env_config: {env_name: Pendulum-v1, seed: 5}
"""


def test_the_command_line_and_python_start_from_the_same_config(tmp_path, capsys):
    path = tmp_path / "pendulum_envpool.yaml"
    path.write_text(ENVPOOL)
    folder = tmp_path / "run"
    assert main(["train", "--from-rl-games", str(path), "--optim.update-epochs", "3", "--eval-episodes", "1",
                 "--run-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"defaults: rl_games config {path} for Pendulum-v1" in out  # the env the file names
    assert "note: rl_games normalize_input" in out and "iteration 3/3" in out
    from ppo_td.persist import load_checkpoint

    written = load_checkpoint(folder / "checkpoint.pt")["config"]
    config, notes, env_id = read_rl_games(path, base=get_preset("generic"))
    assert env_id == "Pendulum-v1" and notes
    assert written == dataclasses.asdict(dataclasses.replace(
        config, optim=dataclasses.replace(config.optim, update_epochs=3), eval_episodes=1))  # a flag still wins
    assert written["env"]["obs_clip"] == 5.0 and written["optim"]["desired_kl"] == 0.008
    assert yaml.safe_load(ENVPOOL)["params"]["config"]["max_epochs"] * 8 * 16 == written["total_frames"]
    assert main(["train", "--from-rl-games", str(path), "--from-zoo", str(path)]) != 0
    assert "give one of them" in capsys.readouterr().err
    assert written["loss"]["critic_coeff"] == 1.0  # the file's critic_coef 2, rl_games' 0.5 factor


def test_a_first_rate_outside_the_adaptive_bounds_widens_them_saying_so():
    config, notes = from_rl_games(robot_params(learning_rate=0.05), "Pendulum-v1", num_envs=4096)
    assert (config.optim.min_lr, config.optim.max_lr, config.optim.lr) == (1e-6, 0.05, 0.05)
    assert "learning_rate 0.05 lies outside min_lr 1e-06 and max_lr 0.01: the bounds are widened to [1e-06, 0.05]" \
        in notes
