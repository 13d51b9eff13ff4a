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
    assert len(result.eval_returns) == config.eval_episodes
    assert statistics.fmean(result.eval_returns) >= 475, result.eval_returns


def test_pendulum_preset_learns():
    """Pendulum-v1 (Gaussian policy, both normalizations): deterministic evaluation above -400."""
    config = get_preset("pendulum")
    result = train(config)
    assert config.total_frames == 100_352 and config.seed == 1
    assert statistics.fmean(result.eval_returns) > -400, result.eval_returns
