"""Bad input fails early with a message naming the problem and the fix."""

import gymnasium as gym
import numpy as np
import pytest

from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import EnvConfig, OptimConfig, TrainConfig, from_dict, to_dict
from ppo_td.envs import EnvStepError, make_env
from ppo_td.persist import load_actor, load_checkpoint, save_checkpoint
from ppo_td.presets import get_preset
from ppo_td.training import train


def test_unknown_env_id_suggests_the_close_match():
    with pytest.raises(ValueError, match=r"unknown Gymnasium env id 'CartPol-v1'.*CartPole-v1"):
        make_env(EnvConfig("CartPol-v1"))


class MultiBinaryActions(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.MultiBinary(3)


if "ppo_td_test/MultiBinary-v0" not in gym.registry:
    gym.register("ppo_td_test/MultiBinary-v0", entry_point=MultiBinaryActions)


def test_unsupported_action_space_is_refused():
    with pytest.raises(ValueError, match=r"MultiBinary-v0.*MultiBinary\(3\).*Discrete actions.*1-D Box actions"):
        make_env(EnvConfig("ppo_td_test/MultiBinary-v0", num_envs=2))


def test_frames_per_batch_not_divisible_into_minibatches():
    with pytest.raises(ValueError, match=r"frames_per_batch=100.*num_minibatches=3"):
        TrainConfig(env=EnvConfig(num_envs=4), frames_per_batch=100, optim=OptimConfig(num_minibatches=3))


def test_frames_per_batch_not_divisible_by_num_envs():
    with pytest.raises(ValueError, match=r"frames_per_batch=90.*multiple of env.num_envs=4"):
        TrainConfig(env=EnvConfig(num_envs=4), frames_per_batch=90, optim=OptimConfig(num_minibatches=1))


@pytest.mark.parametrize("lr", [-1e-3, 0.0, float("nan")])
def test_bad_learning_rate(lr):
    with pytest.raises(ValueError, match=r"optim.lr=.*must be a finite number"):
        OptimConfig(lr=lr)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown preset 'cartpol'.*Did you mean 'cartpole'"):
        get_preset("cartpol")


def test_config_round_trips_and_rejects_unknown_fields():
    config = get_preset("cleanrl")
    assert from_dict(to_dict(config)) == config
    data = to_dict(config)
    data["optim"]["learning_rate"] = 1.0
    with pytest.raises(ValueError, match="unknown config field.*learning_rate"):
        from_dict(data)


def test_cli_reports_bad_env_id_with_exit_code_2(capsys):
    assert main(["train", "--env.env-id", "CartPol-v1", "--no-progress"]) == 2
    assert "unknown Gymnasium env id" in capsys.readouterr().err


def test_cli_rejects_negative_learning_rate(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--optim.lr", "-0.1"])
    assert exit_info.value.code != 0
    captured = capsys.readouterr()
    assert "optim.lr=-0.1" in captured.out + captured.err


def test_checkpoint_for_another_env_is_refused_with_both_shapes(tmp_path):
    result = train(small_config(total_frames=64, eval_episodes=0))
    path = save_checkpoint(tmp_path / "c.pt", result.pipeline, frames=64, iteration=1)
    state = load_checkpoint(path)
    state["config"]["env"]["env_id"] = "Acrobot-v1"  # 6-dim observations, 3 actions
    import torch

    torch.save(state, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"observation_shape': \[4\].*Discrete\(2\).*observation_shape': \[6\]"):
        load_actor(tmp_path / "other.pt")


def test_truncated_checkpoint_is_refused_clearly(tmp_path):
    result = train(small_config(total_frames=64, eval_episodes=0))
    path = save_checkpoint(tmp_path / "c.pt", result.pipeline, frames=64, iteration=1)
    data = path.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="unreadable .truncated or corrupt"):
        load_checkpoint(tmp_path / "cut.pt")
    (tmp_path / "other.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a checkpoint .not a file torch.save wrote.: pass a run folder"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")


def test_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    result = train(small_config(total_frames=64, eval_episodes=0))
    path = save_checkpoint(tmp_path / "c.pt", result.pipeline, frames=64, iteration=1)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk died between write and rename")

    monkeypatch.setattr("ppo_td.persist.checkpoint.os.replace", crash)
    with pytest.raises(OSError, match="disk died"):
        save_checkpoint(path, result.pipeline, frames=128, iteration=2)
    assert path.read_bytes() == before
    assert load_checkpoint(path)["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"], "the temp file must be cleaned up"


def test_a_text_file_or_a_checkpoint_missing_entries_is_refused(tmp_path):
    text = tmp_path / "notes.pt"
    text.write_text("epoch 3: loss 0.2\n")
    with pytest.raises(ValueError, match="is not a checkpoint") as refused:
        load_checkpoint(text)
    assert "\n" not in str(refused.value)  # one line, not torch's unpickling advice
    import torch

    from ppo_td.persist.checkpoint import FORMAT, VERSION

    partial = tmp_path / "partial.pt"
    torch.save({"format": FORMAT, "version": VERSION, "config": {}, "frames": 0}, partial)
    with pytest.raises(ValueError, match=r"lacks \['env_signature', 'actor'"):
        load_checkpoint(partial)


class _ResetFails(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the simulator licence server is unreachable")

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


gym.register("ppo_td_test/ResetFails-v0", entry_point=_ResetFails, max_episode_steps=10)


def test_an_env_whose_reset_raises_is_named_with_the_seed():
    with pytest.raises(EnvStepError, match=r"env 'ppo_td_test/ResetFails-v0' raised RuntimeError in reset "
                                           r"\(seed 7.*licence server"):
        make_env(EnvConfig("ppo_td_test/ResetFails-v0", num_envs=2), seed=7)


def test_cli_reports_an_unwritable_run_folder(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["train", "--run-dir", str(blocker / "run"), "--total-frames", "512"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ppo-td train: error:") and "a_file" in err and "Traceback" not in err


def test_a_config_missing_a_section_is_refused():
    data = to_dict(small_config())
    del data["optim"]
    with pytest.raises(ValueError, match=r"no \['optim'\] section"):
        from_dict(data)


class _IntObservations(gym.Env):
    observation_space = gym.spaces.Box(0, 9, (3,), dtype=np.int64)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, dtype=np.int64), {}

    def step(self, action):
        return np.zeros(3, dtype=np.int64), 1.0, False, False, {}


class _TextObservations(_IntObservations):
    observation_space = gym.spaces.Dict({"x": gym.spaces.Box(0, 9, (3,), dtype=np.int64), "note": gym.spaces.Text(5)})


class _ArrayReward(_IntObservations):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,))

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(3, dtype=np.float32), np.array([1.0, 2.0]), False, False, {}


gym.register("ppo_td_test/IntObs-v0", entry_point=_IntObservations, max_episode_steps=10)
gym.register("ppo_td_test/TextObs-v0", entry_point=_TextObservations, max_episode_steps=10)
gym.register("ppo_td_test/ArrayReward-v0", entry_point=_ArrayReward, max_episode_steps=10)


def test_text_observations_and_array_rewards_get_messages():
    with pytest.raises(ValueError, match=r"its observation\['note'\] is Text.*no encoder reads.*env.wrappers"):
        make_env(EnvConfig("ppo_td_test/TextObs-v0", num_envs=2))
    env = make_env(EnvConfig("ppo_td_test/ArrayReward-v0", num_envs=2), seed=0)
    with pytest.raises(EnvStepError, match=r"reward of shape \(2,\) at step 1"):
        env.rollout(3)


def test_parts_passed_from_python_are_checked_like_config_values():
    from tensordict.nn import TensorDictModule
    from torch import nn

    from ppo_td.training import build_pipeline

    config = small_config()
    with pytest.raises(TypeError, match="config must be a ppo_td TrainConfig"):
        build_pipeline(to_dict(config))
    with pytest.raises(TypeError, match="actor=Linear is not a TensorDict module"):
        build_pipeline(config, actor=nn.Linear(4, 2))
    with pytest.raises(TypeError, match="optimizer=list is not a torch.optim.Optimizer"):
        build_pipeline(config, optimizer=[])
    with pytest.raises(ValueError, match=r"env steps 2 copies but config.env.num_envs=4"):
        build_pipeline(config, env=make_env(EnvConfig("CartPole-v1", num_envs=2)))
    no_action = TensorDictModule(nn.Linear(4, 2), in_keys=["observation"], out_keys=["logits"])
    with pytest.raises(ValueError, match="the actor writes \\['logits'\\], not 'action'"):
        build_pipeline(config, actor=no_action)
    no_value = TensorDictModule(nn.Linear(4, 1), in_keys=["observation"], out_keys=["v"])
    with pytest.raises(ValueError, match="the critic writes \\['v'\\], not 'state_value'"):
        build_pipeline(config, critic=no_value)


def test_env_kwargs_and_wrappers_are_applied_and_bad_ones_refused():
    from ppo_td.envs import build_env

    vec = build_env(EnvConfig("CartPole-v1", num_envs=2, kwargs=("sutton_barto_reward=True",),
                              wrappers=("gymnasium.wrappers:FlattenObservation",))).vector
    assert type(vec).__name__ == "SyncVectorEnv"  # (Gymnasium's numpy CartPole takes no kwargs or wrappers)
    vec.reset(seed=0)
    assert vec.step(np.zeros(2, dtype=np.int64))[1].tolist() == [0.0, 0.0]  # Sutton & Barto's reward: 0 per step
    with pytest.raises(ValueError, match="env.kwargs='g' is invalid: it must be KEY=VALUE"):
        EnvConfig("Pendulum-v1", kwargs=("g",))
    with pytest.raises(ValueError, match="env.wrappers='FlattenObservation' is invalid: it must be 'module:Name "
                       "KEY=VALUE ...' .*not a module:name import path"):
        EnvConfig("Pendulum-v1", wrappers=("FlattenObservation",))
    clipped = build_env(EnvConfig("Pendulum-v1", num_envs=1, wrappers=(  # a wrapper's arguments, as KEY=VALUE tokens
        "gymnasium.wrappers:ClipReward", "min_reward=-0.5", "max_reward=0.0"))).vector
    clipped.reset(seed=0)
    assert clipped.step(np.zeros((1, 1), dtype=np.float32))[1].tolist() == [-0.5]  # Pendulum's reward is below -0.5
    with pytest.raises(ValueError, match=r"env.wrappers: gymnasium.wrappers:ClipReward low=-1 failed: .*low"):
        build_env(EnvConfig("Pendulum-v1", wrappers=("gymnasium.wrappers:ClipReward low=-1",)))
    with pytest.raises(ValueError, match=r"env.wrappers: cannot import 'gymnasium.wrappers:Nope'"):
        build_env(EnvConfig("Pendulum-v1", wrappers=("gymnasium.wrappers:Nope",)))
    with pytest.raises(ValueError, match="without env.kwargs or env.wrappers"):
        build_env(EnvConfig("CartPole-v1", vectorization="numpy", kwargs=("sutton_barto_reward=True",)))
