"""Environments: a config -> a batched TorchRL env with the transforms PPO needs, and its description (a source per
kind of env, :mod:`ppo_td.envs.sources`, then the standard layers, :mod:`ppo_td.envs.layers`).

The bottom layer: it imports nothing else of ppo_td but ``config`` and ``keys``.
"""

from ppo_td.envs.description import BuiltEnv, EnvDescription, describe
from ppo_td.envs.ids import env_factory, episode_limit, own_step_limit
from ppo_td.envs.imports import import_attr
from ppo_td.envs.make import build_env, find_transform, make_env, observation_stats
from ppo_td.envs.masking import MASK_KEY, InfoMaskToObservation, MaskCheck
from ppo_td.envs.sources import ends_episodes
from ppo_td.envs.sources.gymnasium import gym_env
from ppo_td.envs.transforms import (
    FiniteCheck,
    IndexObservations,
    NonFiniteEnvError,
    ReturnScaling,
    RunningMoments,
    RunningObsNorm,
    StepCheck,
    indexed_running_moments,
    merge_moments,
    moments_since,
    running_moments,
)
from ppo_td.envs.vector import PartialResetCartPole, numpy_vectorized
from ppo_td.envs.wrappers import ClipToBounds, EnvStepError, StepErrorContext, StepLimit

__all__ = [
    "MASK_KEY",
    "BuiltEnv",
    "ClipToBounds",
    "EnvDescription",
    "EnvStepError",
    "FiniteCheck",
    "IndexObservations",
    "InfoMaskToObservation",
    "MaskCheck",
    "NonFiniteEnvError",
    "PartialResetCartPole",
    "ReturnScaling",
    "RunningMoments",
    "RunningObsNorm",
    "StepCheck",
    "StepErrorContext",
    "StepLimit",
    "build_env",
    "describe",
    "ends_episodes",
    "env_factory",
    "episode_limit",
    "find_transform",
    "gym_env",
    "import_attr",
    "indexed_running_moments",
    "make_env",
    "merge_moments",
    "moments_since",
    "running_moments",
    "numpy_vectorized",
    "observation_stats",
    "own_step_limit",
]
