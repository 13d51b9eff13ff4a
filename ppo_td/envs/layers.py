"""ppo_td's standard layers over any source's env (:mod:`ppo_td.envs.sources`), in one order.

One agent: the source's first transforms (adapters, checks, masks, casts), ``StepCounter`` (truncating at the
source's limit) and ``RewardSum`` (the raw return), the user's transforms, then the normalizers of what they made
(``RunningObsNorm``), Atari's reward clip (after ``RewardSum``: returns count the raw score) and ``ReturnScaling``.
Without user transforms, a Gymnasium env's ``RunningObsNorm`` sits before ``StepCounter`` instead (the same
numbers: neither counter reads the observation), where the checkpoints of such runs have always indexed it.

Agent groups: ``StepCounter`` (``env.max_episode_steps`` as a truncation) and a ``RewardSum`` per group.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchrl.envs import Compose, RewardClipping, RewardSum, StepCounter, TransformedEnv

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs.custom import UserTransform, initialize_statistics, needing_statistics
from ppo_td.envs.description import BuiltEnv, describe, observation_space
from ppo_td.envs.multiagent import describe_agents, groups_of
from ppo_td.envs.sources.base import Base
from ppo_td.envs.transforms import ReturnScaling, RunningObsNorm


def one_agent(config: EnvConfig, base: Base, users: Sequence[UserTransform], seed: int | None,
              gamma: float) -> BuiltEnv:
    """The standard layers over ``base`` (closed if they fail), seeded with ``seed``."""
    if users or base.users_first:
        built = _with_user_transforms(config, base, list(users), seed, gamma)
    else:
        built = _plain(config, base, seed, gamma)
    built.notes = base.notes + built.notes
    return built


def _plain(config: EnvConfig, base: Base, seed: int | None, gamma: float) -> BuiltEnv:
    """The layers without user transforms, in one ``Compose``: first, ``RunningObsNorm``, counters, clip, scaling."""
    stack = list(base.first)
    obs_norm = scaling = None
    try:
        if config.normalize_observations:
            spec = base.env.observation_spec[keys.OBSERVATION]
            space = observation_space(spec, 1)  # before DoubleToFloat
            if not (space.kind == "vector" and len(space.shape) == 1 and space.dtype in ("float32", "float64")):
                raise ValueError(f"env {config.env_id!r}: env.normalize_observations standardizes float vector "
                                 f"observations, and this one is {space}. Set it to False (images are scaled by 1/255 "
                                 "in the encoder), or flatten the observation in a wrapper")
            obs_norm = RunningObsNorm(spec.shape[-1], clip=config.obs_clip)
            stack.append(obs_norm)
        stack += [StepCounter(max_steps=base.limit), RewardSum()]
        if config.atari:  # after RewardSum: returns count the raw score
            stack.append(RewardClipping(-1.0, 1.0))
        if config.normalize_rewards:
            scaling = ReturnScaling(gamma=gamma, clip=config.reward_clip)
            stack.append(scaling)
        env = TransformedEnv(base.env, Compose(*stack))
        if seed is not None:
            env.set_seed(seed)
        return BuiltEnv(env=env, vector=base.vector, description=describe(env), obs_norm=obs_norm,
                        return_scaling=scaling, config=config)
    except BaseException:
        base.close()
        raise


def _with_user_transforms(config: EnvConfig, base: Base, users: list[UserTransform], seed: int | None,
                          gamma: float) -> BuiltEnv:
    """The layers with the user's transforms: first, ``StepCounter`` (truncating at the source's limit) and
    ``RewardSum``, the user's, then the normalizers (of what the user's transforms made) and Atari's reward clip."""
    try:
        env = TransformedEnv(base.env, Compose(*base.first, StepCounter(max_steps=base.limit), RewardSum()))
        made, notes = [], []
        for user in users:
            transform = user.make()
            env.append_transform(transform)
            made.append(transform)
            if needing_statistics(transform):
                if seed is not None:  # the random steps are the seed's: a rebuild gets the same statistics
                    env.set_seed(seed)
                setting = "env.transforms" if user.evaluation else "env.train_transforms"
                notes.append(initialize_statistics(transform, f"{setting} {user.name}", env.batch_size.numel(), seed))
        obs_norm = scaling = None
        if config.normalize_observations:
            spec = env.observation_spec.get(keys.OBSERVATION, None)
            space = observation_space(spec, 1) if spec is not None else None
            if space is None or not (space.kind == "vector" and len(space.shape) == 1):
                raise ValueError(f"env {config.env_id!r}: env.normalize_observations standardizes a float vector "
                                 f"'observation', and after the env's transforms it is {space}. Set it to False, or "
                                 "make the transforms emit one")
            obs_norm = RunningObsNorm(spec.shape[-1], clip=config.obs_clip)
            env.append_transform(obs_norm)
        if config.atari:
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
