import dataclasses
import logging

import pytest
import torch

import examples.trading  # noqa: F401 - registers the example env ids (ppo_td/Trading-v0 and variants)
from ppo_td.config import EnvConfig, ModelConfig, TrainConfig
from ppo_td.presets import get_preset

torch.set_num_threads(1)  # the machines' two cores are shared
logging.getLogger("torchrl").setLevel(logging.WARNING)


def small_config(**overrides) -> TrainConfig:
    """A few-iteration CartPole config with a small network, for plumbing tests."""
    base = dataclasses.replace(
        get_preset("cleanrl"),
        env=EnvConfig("CartPole-v1", num_envs=4),
        model=ModelConfig(hidden_sizes=(16, 16)),
        frames_per_batch=64,
        total_frames=192,
        eval_episodes=2,
    )
    return dataclasses.replace(base, **overrides)


@pytest.fixture
def tiny_config() -> TrainConfig:
    return small_config()
