"""Each kind of env has one source (``ppo_td.envs.sources``), chosen from the config by the table's order, without
entering any source but the one that takes it."""

import dataclasses

import pytest
import torch

from ppo_td.config import EnvConfig
from ppo_td.envs.sources import SOURCES, source_for
from ppo_td.presets import get_preset

torch.set_num_threads(1)


@pytest.mark.parametrize(("config", "name"), [
    (EnvConfig("CartPole-v1"), "gymnasium"),
    (EnvConfig("ppo_td.envs.partial:cartpole_no_velocity"), "gymnasium"),  # a Gymnasium factory
    (EnvConfig("torchrl.envs.custom.pendulum:PendulumEnv", max_episode_steps=50), "torchrl"),
    (dataclasses.replace(get_preset("atari").env, vectorization="envpool"), "envpool"),
    (get_preset("vmas-navigation").env, "vmas"),
    (get_preset("mpe-spread").env, "pettingzoo"),
], ids=lambda x: x if isinstance(x, str) else x.env_id)
def test_the_first_source_that_takes_a_config_builds_it(config, name):
    source, env_id = source_for(config)
    assert source.name == name
    assert (env_id is None) == config.multiagent
    assert [s.name for s in SOURCES] == ["vmas", "pettingzoo", "torchrl", "envpool", "gymnasium"]


def test_a_source_is_a_row_naming_a_module_with_build_and_an_unknown_id_is_refused_naming_close_ones():
    for source in SOURCES:
        assert isinstance(source.name, str) and callable(source.module.build) and callable(source.takes)
    with pytest.raises(ValueError, match="unknown Gymnasium env id 'CartPol-v1'.*CartPole-v1"):
        source_for(EnvConfig("CartPol-v1"))


def test_choosing_a_source_enters_no_source_module(monkeypatch):
    """The table is read, not asked: only the chosen source's module runs (here, none: it is only chosen)."""
    from ppo_td.envs import sources

    entered = []
    for source in SOURCES:
        monkeypatch.setattr(source.module, "build", lambda *a, name=source.name: entered.append(name))
    assert source_for(EnvConfig("Pendulum-v1"))[0].name == "gymnasium" and entered == []
    sources.build(EnvConfig("Pendulum-v1"), seed=0)
    assert entered == ["gymnasium"]


@pytest.mark.parametrize(("config", "match"), [
    (EnvConfig("FrozenLake-v1", normalize_observations=True), "and it is Discrete\\(16\\)"),
    (EnvConfig("CartPole-v1", normalize_observations=True,
               transforms=("torchrl.envs:CatTensors in_keys=['observation'] out_key=x",)),
     "after the env's transforms it is None"),
], ids=["raw", "after-transforms"])
def test_a_normalizer_over_an_observation_it_cannot_standardize_is_refused_with_the_way_out(config, match):
    from ppo_td.envs import build_env

    with pytest.raises(ValueError, match=f"env.normalize_observations standardizes a vector of numbers .observation..*"
                                         f"{match}.*Set it to False"):
        build_env(config, seed=0)


def test_envpool_refuses_observation_keys_as_every_gymnasium_env_does():
    from ppo_td.envs.sources import envpool

    config = dataclasses.replace(get_preset("atari").env, vectorization="envpool", observation_keys=("x",))
    with pytest.raises(ValueError, match="env.observation_keys=\\['x'\\] chooses a TorchRL env's entries"):
        envpool.build(config, None, seed=0)


def test_async_copies_leave_the_learners_ctrl_c_alone():
    import signal

    from ppo_td.envs import build_env

    before = signal.getsignal(signal.SIGINT)
    built = build_env(EnvConfig("Pendulum-v1", num_envs=2, vectorization="async"), seed=0)
    try:  # Gymnasium made one copy here to read the spaces: it used to set SIGINT to ignored in the learner
        assert signal.getsignal(signal.SIGINT) is before
        assert built.env.rollout(3).shape == (2, 3)
    finally:
        built.env.close()
