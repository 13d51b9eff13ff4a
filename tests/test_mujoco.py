"""The MuJoCo presets build and run (short budgets; the 1M-frame results come from benchmarks/mujoco.py)."""

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
