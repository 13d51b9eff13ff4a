"""Each kind of env has one source (``ppo_td.envs.sources``), chosen from the config by the table's order."""

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
def test_the_first_source_that_claims_a_config_builds_it(config, name):
    source, builder = source_for(config)
    assert source.NAME == name and callable(builder)
    assert [s.NAME for s in SOURCES] == ["vmas", "pettingzoo", "torchrl", "envpool", "gymnasium"]


def test_a_source_is_a_module_with_a_name_and_a_claim_and_an_unknown_id_is_refused_naming_close_ones():
    for source in SOURCES:
        assert isinstance(source.NAME, str) and callable(source.claim)
    with pytest.raises(ValueError, match="unknown Gymnasium env id 'CartPol-v1'.*CartPole-v1"):
        source_for(EnvConfig("CartPol-v1"))


def test_envpool_refuses_observation_keys_as_every_gymnasium_env_does():
    from ppo_td.envs.sources import envpool

    config = dataclasses.replace(get_preset("atari").env, vectorization="envpool", observation_keys=("x",))
    with pytest.raises(ValueError, match="env.observation_keys=\\['x'\\] chooses a TorchRL env's entries"):
        envpool.build(config)


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
