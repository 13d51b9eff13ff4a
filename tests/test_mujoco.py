"""The MuJoCo presets build and run (short budgets; the 1M-frame results come from benchmarks/speed/mujoco.py)."""

import dataclasses

import pytest

from ppo_td.presets import MUJOCO_PRESETS, get_preset
from ppo_td.training import train

pytest.importorskip("mujoco")


@pytest.mark.parametrize("name", MUJOCO_PRESETS)
def test_mujoco_preset_runs_an_iteration(name):
    config = get_preset(name)
    assert config.total_frames == 1_000_000 and config.frames_per_batch == 2048
    assert config.env.normalize_observations and config.env.normalize_rewards
    short = dataclasses.replace(config, frames_per_batch=256, total_frames=256, eval_episodes=1,
                                env=dataclasses.replace(config.env, max_episode_steps=50),
                                optim=dataclasses.replace(config.optim, num_minibatches=4, update_epochs=1))
    result = train(short)
    assert result.history[-1]["frames"] == 256 and len(result.eval_returns) == 1


def test_ant_preset_observes_as_v4_did():
    """Ant-v5 on the ``ant`` preset sees v4's 27 numbers, not v5's default 105 (78 contact forces more): the
    observation the published Ant numbers come from (docs/learning.md, the mujoco suite)."""
    import gymnasium as gym

    from ppo_td.envs import build_env

    built = build_env(get_preset("ant").env, seed=0)
    try:
        assert built.description.observation_shape == (27,)
    finally:
        built.env.close()
    v5 = gym.make("Ant-v5")
    assert v5.observation_space.shape == (105,)  # what the preset leaves out
    v5.close()
