"""A user's own env from Python, end to end: factories, Gymnasium env objects, vector envs and TorchRL envs;
training, checkpoints, resume, ``ppo-td eval`` and the final evaluation all on that same env stack."""

import dataclasses
import json
import sys
import textwrap

import gymnasium as gym
import pytest
import torch

import ppo_td
from ppo_td import EnvConfig, get_preset
from ppo_td.cli.main import main
from ppo_td.envs import build_env, make_env
from ppo_td.envs.rebuild import NotRebuildable, env_config_for
from ppo_td.training import StopTraining, build_pipeline

torch.set_num_threads(1)

SEEK = textwrap.dedent('''
    """A Dict-observation env a user would write: a 5x5 grid image, the agent's cell, a tuple of extras."""
    import gymnasium as gym
    import numpy as np


    class Seek(gym.Env):
        def __init__(self, size=5):
            self.size = size
            self.observation_space = gym.spaces.Dict({
                "grid": gym.spaces.Box(0, 255, (size, size, 1), np.uint8),
                "cell": gym.spaces.Discrete(size * size),
                "extra": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Box(-1, 1, (2,)))),
            })
            self.action_space = gym.spaces.Discrete(4)

        def _obs(self):
            grid = np.zeros((self.size, self.size, 1), np.uint8)
            grid[divmod(self.goal, self.size)] = 255
            return {"grid": grid, "cell": self.cell, "extra": (np.array([1, 0], np.int8), np.zeros(2, np.float32))}

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.cell, self.goal = (int(v) for v in self.np_random.choice(self.size ** 2, 2, replace=False))
            return self._obs(), {}

        def step(self, action):
            r, c = divmod(self.cell, self.size)
            dr, dc = [(-1, 0), (1, 0), (0, -1), (0, 1)][int(action)]
            self.cell = min(max(r + dr, 0), self.size - 1) * self.size + min(max(c + dc, 0), self.size - 1)
            found = self.cell == self.goal
            return self._obs(), float(found), found, False, {}


    def make_seek(size=5):
        return Seek(size)


    class Tag(gym.Wrapper):
        """A user wrapper: counts how often it is applied around one copy."""
        def __init__(self, env):
            super().__init__(env)
            self.depth = getattr(env, "depth", 0) + 1


    def flat_encoder(space):
        from ppo_td.models.encoders import make_encoder

        return make_encoder(space, "flat")


    if "SeekUser-v0" not in gym.registry:
        gym.register("SeekUser-v0", entry_point=Seek, max_episode_steps=30)
''')


@pytest.fixture
def seek_module(tmp_path, monkeypatch):
    (tmp_path / "seek_env.py").write_text(SEEK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import seek_env

    yield seek_env
    sys.modules.pop("seek_env", None)


def small(config, frames=256):
    return dataclasses.replace(config, frames_per_batch=128, total_frames=frames, eval_episodes=2,
                               optim=dataclasses.replace(config.optim, num_minibatches=2, update_epochs=1))


def base_config(num_envs=2):
    config = get_preset("generic")
    return small(dataclasses.replace(config, env=dataclasses.replace(config.env, num_envs=num_envs,
                                                                     max_episode_steps=30)))


def test_a_factory_is_recorded_by_import_path_and_rebuilds_the_same_env(seek_module):
    config = env_config_for(seek_module.make_seek, EnvConfig(num_envs=2))
    assert config.env_id == "seek_env:make_seek"
    built = build_env(dataclasses.replace(config, kwargs=("size=6",), max_episode_steps=30), seed=0)
    space = built.description.observation_space
    assert dict(space.entries)["grid"].shape == (6, 6, 1)  # kwargs reach the factory
    torch.manual_seed(0)  # the rollout's random actions (a goal found within 30 steps ends an episode first)
    assert built.env.rollout(120, break_when_any_done=False)["next", "truncated"].any()  # the time limit ppo_td adds
    built.close()


def test_a_factory_gets_each_wrapper_once(seek_module):
    built = build_env(EnvConfig("seek_env:make_seek", num_envs=2, wrappers=("seek_env:Tag",)))
    copy = built.vector.envs[0]
    while not isinstance(copy, seek_module.Tag):
        copy = copy.env
    assert copy.depth == 1
    built.close()


def test_an_encoder_from_python_is_recorded_in_the_run_folder(seek_module, tmp_path, capsys):
    run = tmp_path / "run"
    result = ppo_td.train(base_config(), env=seek_module.make_seek, encoder=seek_module.flat_encoder, run_dir=run)
    assert json.loads((run / "config.json").read_text())["model"]["encoder"] == "seek_env:flat_encoder"
    assert len(result.eval_returns) == 2
    assert main(["eval", str(run), "--episodes", "2"]) == 0  # rebuilds the same networks from the record
    with pytest.raises(ValueError, match="run_dir: actor passed from Python cannot be rebuilt"):
        ppo_td.train(base_config(), env=seek_module.make_seek, actor=result.actor, run_dir=tmp_path / "other")
    with pytest.raises(ValueError, match="the encoder cannot be recorded.*not a function or class at module level"):
        ppo_td.train(base_config(), env=seek_module.make_seek, encoder=lambda space: None, run_dir=tmp_path / "x")


def test_dict_env_trains_to_a_run_folder_that_resumes_and_evaluates(seek_module, tmp_path, capsys):
    run = tmp_path / "run"

    def stop_after_first(metrics, pipeline):
        if metrics["iteration"] == 1:
            raise StopTraining

    result = ppo_td.train(base_config(), env=seek_module.make_seek, run_dir=run, callbacks=[stop_after_first])
    assert result.stopped and (run / "checkpoint.pt").exists() and not (run / "summary.json").exists()
    saved = json.loads((run / "config.json").read_text())
    assert saved["env"]["env_id"] == "seek_env:make_seek"  # what rebuilds the env
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0  # the CLI rebuilds it from the record
    summary = json.loads((run / "summary.json").read_text())
    assert summary["frames"] == 256 and len(summary["eval_returns"]) == 2
    assert main(["eval", str(run), "--episodes", "3"]) == 0
    assert "over 3 episodes" in capsys.readouterr().out


def test_python_training_with_a_factory_evaluates_on_that_env(seek_module):
    result = ppo_td.train(base_config(), env=seek_module.Seek)  # a gymnasium.Env class is a factory too
    assert result.pipeline.config.env.env_id == "seek_env:Seek"
    assert len(result.eval_returns) == 2 and all(0.0 <= r <= 1.0 for r in result.eval_returns)


def test_gymnasium_env_objects_are_read_from_their_spec(seek_module):
    env = gym.wrappers.FlattenObservation(gym.make("Pendulum-v1", g=9.0, max_episode_steps=50))
    config = env_config_for(env, EnvConfig())
    assert (config.env_id, config.kwargs, config.max_episode_steps) == ("Pendulum-v1", ("g=9.0",), 50)
    assert config.wrappers == ("gymnasium.wrappers.transform_observation:FlattenObservation",)
    user = env_config_for(gym.make("SeekUser-v0"), EnvConfig())
    assert user.env_id == "seek_env:SeekUser-v0"  # importing seek_env registers it (workers, ppo-td eval)
    vec = env_config_for(gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync"), EnvConfig())
    assert (vec.num_envs, vec.env_id, vec.kwargs, vec.max_episode_steps) == (4, "CartPole-v1", (), None)
    limited = env_config_for(gym.make_vec("CartPole-v1", num_envs=2, max_episode_steps=50), EnvConfig())
    assert (limited.kwargs, limited.max_episode_steps) == ((), 50)


def test_envs_ppo_td_cannot_rebuild_are_refused_with_the_way_out(seek_module):
    with pytest.raises(NotRebuildable, match=r"not made by gym.make.*pass a factory instead"):
        env_config_for(seek_module.Seek(), EnvConfig())
    with pytest.raises(NotRebuildable, match="not a function or class at module level"):
        env_config_for(lambda: seek_module.Seek(), EnvConfig())
    wrapped = gym.wrappers.TransformReward(gym.make("CartPole-v1"), lambda r: 2 * r)
    with pytest.raises(NotRebuildable, match="wrapped in TransformReward: .*argument func=.* is not a literal"):
        env_config_for(wrapped, EnvConfig())
    with pytest.raises(TypeError, match="env=int is not an env factory"):
        build_pipeline(base_config(), env=3)


class ClosingPendulum(gym.Wrapper):
    """Refuses to step once closed, as an env that frees its simulator would."""

    def __init__(self, env):
        super().__init__(env)
        self.closed = False

    def step(self, action):
        if self.closed:
            raise RuntimeError("stepped after close")
        return self.env.step(action)

    def close(self):
        self.closed = True
        return self.env.close()


def test_a_torchrl_env_passed_in_is_evaluated_on_itself(tmp_path):
    config = base_config()  # its env id says CartPole; the env passed in is Pendulum
    pendulum = make_env(EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=20,
                                  wrappers=("test_custom_env:ClosingPendulum",)), seed=0)  # evaluated before closed
    result = ppo_td.train(config, env=pendulum)
    assert not result.pipeline.rebuildable
    assert len(result.eval_returns) == 2 and all(r < 0 for r in result.eval_returns)  # Pendulum's, not CartPole's
    with pytest.raises(ValueError, match="TorchRL env ppo_td cannot rebuild"):
        ppo_td.train(config, env=make_env(EnvConfig("Pendulum-v1", num_envs=2), seed=0), run_dir=tmp_path / "r")


def test_a_built_env_brings_its_own_config():
    built = build_env(EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=20, normalize_observations=True))
    pipeline = build_pipeline(base_config(num_envs=4), env=built)  # its 2 copies, not the config's 4
    assert pipeline.config.env.env_id == "Pendulum-v1" and pipeline.config.env.normalize_observations
    assert pipeline.config.env.num_envs == 2
    pipeline.collector.shutdown()


def test_taxi_trains_on_its_info_mask():
    """Taxi-v4: a Discrete(500) observation (one-hot) and Gymnasium's info['action_mask'], found by 'auto'."""
    config = get_preset("generic")
    config = dataclasses.replace(config, env=EnvConfig("Taxi-v4", num_envs=4), frames_per_batch=256,
                                 total_frames=512, eval_episodes=0,
                                 optim=dataclasses.replace(config.optim, num_minibatches=4, update_epochs=2))
    pipeline = build_pipeline(config)
    desc = pipeline.description
    assert desc.action_mask and str(desc.observation_space) == "Discrete(500)"
    batch = next(iter(pipeline.collector))
    legal = batch["action_mask"].gather(-1, batch["action"].unsqueeze(-1))
    assert legal.all() and not batch["action_mask"].all()  # some actions were illegal, none was taken
    pipeline.collector.shutdown()
    result = ppo_td.train(config)
    assert len(result.history) == 2
