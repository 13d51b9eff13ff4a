"""Short learning tests with fixed seeds."""

import statistics

import pytest

from ppo_td.presets import get_preset
from ppo_td.training import train

pytestmark = pytest.mark.slow  # the quick tier (pytest -m 'not slow') skips this module


def test_default_preset_solves_cartpole():
    """The default preset (what `ppo-td train` runs) reaches a deterministic evaluation mean >= 475."""
    config = get_preset("cartpole")
    result = train(config)
    assert config.total_frames == 50_000 and config.seed == 1
    assert result.pipeline.collector.fast_policy.numpy is not None  # collected with the numpy policy
    assert len(result.eval_returns) == config.eval_episodes
    assert statistics.fmean(result.eval_returns) >= 475, result.eval_returns


def test_pendulum_preset_learns():
    """Pendulum-v1 (Gaussian policy, both normalizations): deterministic evaluation above -400."""
    config = get_preset("pendulum")
    result = train(config)
    assert config.total_frames == 100_352 and config.seed == 1
    assert result.pipeline.collector.fast_policy.numpy is not None
    assert statistics.fmean(result.eval_returns) > -400, result.eval_returns


def test_a_small_image_task_learns():
    """MiniGrid-Empty-5x5 (7x7x3 uint8 image, the small CNN): near the optimal return (0.955) in 15,360 frames."""
    import dataclasses

    from ppo_td import EnvConfig

    config = get_preset("cartpole")
    config = dataclasses.replace(config, total_frames=15_360, eval_episodes=10, env=EnvConfig(
        "minigrid:MiniGrid-Empty-5x5-v0", num_envs=16, wrappers=("minigrid.wrappers:ImgObsWrapper",)),
        loss=dataclasses.replace(config.loss, gamma=0.99))
    result = train(config)
    assert result.pipeline.description.observation_space.kind == "image"
    assert statistics.fmean(result.eval_returns) >= 0.9, result.eval_returns


def test_atari_smoke_run():
    """The atari preset end to end on Breakout for a few thousand frames: 4 stacked 84x84 uint8 frames, the
    Nature CNN, an evaluation (episodic life and FIRE reset: test_encoders.py)."""
    import dataclasses

    config = get_preset("atari")
    config = dataclasses.replace(config, total_frames=2048, eval_episodes=1,
                                 env=dataclasses.replace(config.env, env_id="ALE/Breakout-v5", max_episode_steps=400))
    result = train(config)
    batch_obs = result.pipeline.description.observation_space
    assert batch_obs.shape == (4, 84, 84) and batch_obs.dtype == "uint8"
    assert type(result.pipeline.actor.module[0].module.trunk).__name__ == "NatureCNN"
    assert len(result.history) == 2 and all(0 <= r <= 400 for r in result.eval_returns)
