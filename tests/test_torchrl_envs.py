"""Any TorchRL env trains: its observation entries concatenated into 'observation' (or chosen), parameter and
non-tensor entries left out with a note, unbatched envs made into a batch of copies, batched envs taken as they are;
a TorchRL env given as a class or factory is recorded, so evaluation, ppo-td eval and resume rebuild it."""

import dataclasses
import json

import pytest
import torch
from torchrl.envs import PendulumEnv, SerialEnv, StepCounter, TransformedEnv

import ppo_td
from ppo_td import EnvConfig, get_preset
from ppo_td.cli.main import main
from ppo_td.envs import build_env

torch.set_num_threads(1)

PENDULUM = "torchrl.envs.custom.pendulum:PendulumEnv"


def _config(num_envs: int = 2, **env):
    config = get_preset("pendulum")
    return dataclasses.replace(config, frames_per_batch=128, total_frames=256, eval_episodes=2,
                               optim=dataclasses.replace(config.optim, num_minibatches=2, update_epochs=1),
                               env=dataclasses.replace(config.env, num_envs=num_envs, max_episode_steps=40, **env))


def test_a_torchrl_env_class_is_recorded_read_as_one_observation_and_evaluated(caplog):
    result = ppo_td.train(_config(), env=PendulumEnv)
    assert result.pipeline.config.env.env_id == PENDULUM
    assert result.pipeline.description.observation_shape == (2,)  # th + thdot
    assert "observation: th + thdot (left out: params)" in caplog.text
    assert {e["length"] for e in result.episodes} == {40}  # env.max_episode_steps truncates
    assert len(result.evaluation.returns) == 2 and all(r < 0 for r in result.evaluation.returns)


def test_a_batched_torchrl_env_object_trains_as_it_is():
    env = TransformedEnv(SerialEnv(2, PendulumEnv), StepCounter(40))
    result = ppo_td.train(_config(), env=env)
    assert result.pipeline.description.observation_shape == (2,)
    assert len(result.evaluation.returns) == 2  # evaluated on the env itself


def test_observation_keys_choose_the_entries_and_bad_choices_are_named():
    built = build_env(EnvConfig(PENDULUM, num_envs=2, observation_keys=("thdot",)))
    try:
        assert built.description.observation_shape == (1,)
        td = built.env.reset()
        assert torch.equal(td["observation"][:, 0], td["thdot"])
    finally:
        built.close()
    with pytest.raises(ValueError, match=r"names \['speed'\], which the env's observation spec lacks"):
        build_env(EnvConfig(PENDULUM, num_envs=2, observation_keys=("speed",)))
    with pytest.raises(ValueError, match=r"\['params'\] are not tensors"):
        build_env(EnvConfig(PENDULUM, num_envs=2, observation_keys=("params",)))
    with pytest.raises(ValueError, match="is a Gymnasium env: choose its Dict entries with a wrapper"):
        build_env(EnvConfig("CartPole-v1", num_envs=2, observation_keys=("x",)))


def test_an_unbatched_env_object_and_a_batch_of_another_size_are_refused_with_the_way_out():
    with pytest.raises(ValueError, match=r"unbatched \(batch_size=\[\]\).*train\(config, env=PendulumEnv\)"):
        ppo_td.train(_config(), env=PendulumEnv())
    with pytest.raises(ValueError, match=r"batch_size=\[3\].*set env.num_envs=3"):
        build_env(EnvConfig("torchrl_factories:three_pendulums", num_envs=2))


def test_a_torchrl_env_run_folder_evaluates_and_resumes_and_load_policy_names_the_way(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--preset", "pendulum", "--env.env-id", PENDULUM, "--env.num-envs", "2",
            "--env.max-episode-steps", "40", "--frames-per-batch", "128", "--total-frames", "512",
            "--optim.num-minibatches", "2", "--optim.update-epochs", "1", "--eval-episodes", "2",
            "--checkpoint-every", "1", "--run-dir", str(run)]
    assert main(args) == 0
    assert json.loads((run / "config.json").read_text())["env"]["env_id"] == PENDULUM
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "deterministic evaluation" in capsys.readouterr().out
    (run / "summary.json").unlink()
    (run / "checkpoint.pt").unlink()
    first = sorted((run / "checkpoints").glob("iter_*.pt"))[0]
    (run / "checkpoint.pt").hardlink_to(first)
    assert main(["train", "--resume", str(run)]) == 0
    assert json.loads((run / "summary.json").read_text())["frames"] == 512
    with pytest.raises(ValueError, match="is a TorchRL env: this needs a Gymnasium env"):
        ppo_td.load_policy(run)
