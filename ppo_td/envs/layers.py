"""ppo_td's standard layers over any source's env (:mod:`ppo_td.envs.sources`), in one order.

One agent: the source's first transforms (adapters, checks, masks, casts), ``StepCounter`` (truncating at the
source's limit) and ``RewardSum`` (the raw return), the user's transforms, then the normalizers of what they made
(``RunningObsNorm``), Atari's reward clip (after ``RewardSum``: returns count the raw score) and ``ReturnScaling``:
one function, :func:`one_agent`, for every source. Without user transforms, a Gymnasium env's ``RunningObsNorm``
sits before ``StepCounter`` instead (the same numbers: neither counter reads the observation), where the
checkpoints of such runs have always indexed it.

Agent groups: ``StepCounter`` (``env.max_episode_steps`` as a truncation) and a ``RewardSum`` per group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from torchrl.data import TensorSpec
from torchrl.envs import Compose, RewardClipping, RewardSum, StepCounter, TransformedEnv

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs.custom import UserTransform, initialize_statistics, needing_statistics
from ppo_td.envs.description import BuiltEnv, ObservationSpace, describe, observation_space
from ppo_td.envs.multiagent import describe_agents, groups_of
from ppo_td.envs.sources.base import Base
from ppo_td.envs.transforms import ReturnScaling, RunningObsNorm


def one_agent(config: EnvConfig, base: Base, users: Sequence[UserTransform], seed: int | None,
              gamma: float) -> BuiltEnv:
    """The standard layers over ``base`` (closed if they fail), seeded with ``seed``: the source's first
    transforms, ``StepCounter`` (truncating at the source's limit) and ``RewardSum``, the user's transforms, then
    the normalizer of what they made, Atari's reward clip and the return scaling."""
    users = list(users)
    early = not users and not base.users_first  # where a Gymnasium env's checkpoints have always indexed the norm
    obs_norm = scaling = None
    try:
        stack = list(base.first)
        if config.normalize_observations and early:
            obs_norm = _observation_norm(config, base.env.observation_spec[keys.OBSERVATION], raw=True)
            stack.append(obs_norm)
        env = TransformedEnv(base.env, Compose(*stack, StepCounter(max_steps=base.limit), RewardSum()))
        made, notes = [], list(base.notes)
        for user in users:
            transform = user.make()
            env.append_transform(transform)
            made.append(transform)
            if needing_statistics(transform):
                if seed is not None:  # the random steps are the seed's: a rebuild gets the same statistics
                    env.set_seed(seed)
                setting = "env.transforms" if user.evaluation else "env.train_transforms"
                notes.append(initialize_statistics(transform, f"{setting} {user.name}", env.batch_size.numel(), seed))
        if config.normalize_observations and not early:
            obs_norm = _observation_norm(config, env.observation_spec.get(keys.OBSERVATION, None), raw=False)
            env.append_transform(obs_norm)
        if config.atari:  # after RewardSum: returns count the raw score
            env.append_transform(RewardClipping(-1.0, 1.0))
        if config.normalize_rewards:
            scaling = ReturnScaling(gamma=gamma, clip=config.reward_clip)
            env.append_transform(scaling)
        if seed is not None:
            env.set_seed(seed)
        return BuiltEnv(env=env, vector=base.vector, description=describe(env), obs_norm=obs_norm,
                        return_scaling=scaling, config=config, user_transforms=tuple(zip(users, made, strict=True)),
                        notes=notes)
    except BaseException:  # the copies (a SerialEnv's, an AsyncVectorEnv's processes) do not outlive the error
        base.close()
        raise


def _observation_norm(config: EnvConfig, spec: TensorSpec | None, *, raw: bool) -> RunningObsNorm:
    """``RunningObsNorm`` for a vector ``"observation"``: the env's own (``raw``), of float32/float64 or integers
    (normalized to float32), or what the user's transforms made of it; a clear error for anything else."""
    space = observation_space(spec, 1) if spec is not None else None
    if space is not None and space.kind == "dict":  # each vector entry standardized, each element its own moments
        parts = tuple((name, entry.shape) for name, entry in space.entries
                      if entry.kind == "vector" and (not raw or _numbers(entry)))
        if parts:
            return RunningObsNorm(sum(math.prod(shape) for _, shape in parts), clip=config.obs_clip, parts=parts)
    if space is None or not (space.kind == "vector" and len(space.shape) == 1 and (not raw or _numbers(space))):
        where = "" if raw else " after the env's transforms"
        raise ValueError(f"env {config.env_id!r}: env.normalize_observations standardizes a vector of numbers "
                         f"'observation' (or the vector entries of a Dict), and{where} it is {space}. Set it to "
                         "False (images are scaled by 1/255 in the encoder), or make it one (flatten it in a "
                         "wrapper, or a transform that emits one)")
    return RunningObsNorm(spec.shape[-1], clip=config.obs_clip)


def _numbers(space: ObservationSpace) -> bool:
    """Floats or integers (not booleans): what the normalizer standardizes."""
    return space.dtype in ("float32", "float64") or np.dtype(space.dtype).kind in "iu"


def agents(config: EnvConfig, base: Base) -> BuiltEnv:
    """The layers of an env of agent groups: ``StepCounter`` and one ``RewardSum`` over each group's reward."""
    groups = groups_of(base.env)
    if not groups:
        base.close()
        raise ValueError(f"env {config.env_id!r} gives no agent group with an 'observation' entry")
    transforms = [StepCounter(max_steps=base.limit),
                  RewardSum(in_keys=[(g, "reward") for g in groups], out_keys=[(g, "episode_reward") for g in groups])]
    env = TransformedEnv(base.env, Compose(*transforms))
    try:
        description = describe_agents(env)
    except BaseException:
        env.close()
        raise
    return BuiltEnv(env=env, vector=None, description=description, config=config, simulator=base.simulator)
