"""TorchRL envs (a class or module-level factory making one, ``torchrl.envs.custom.pendulum:PendulumEnv``): batched as
``env.num_envs`` copies (:mod:`ppo_td.envs.torchrl_envs`), their observation entries read into one ``"observation"`` (or
kept apart under it: ``env.observation_dict``); no Gymnasium vector env under them (ppo_td's env loop steps them)."""

from __future__ import annotations

import functools

import torch
from torchrl.data import Bounded
from torchrl.envs import EnvBase

from ppo_td.config import EnvConfig
from ppo_td.envs.custom import with_statistics
from ppo_td.envs.games import GAME_DEFAULTS, opponents_named
from ppo_td.envs.ids import EnvId
from ppo_td.envs.sources.base import Base
from ppo_td.envs.torchrl_envs import batched, close, observation_transforms, takes_num_envs
from ppo_td.envs.transforms import ClipActions, FiniteCheck


def build(config: EnvConfig, env_id: EnvId, seed: int | None) -> Base:
    """``config.num_envs`` copies of the TorchRL env ``env_id.torchrl`` makes, its observation entries as one
    ``"observation"``, then the finite check; truncated at ``env.max_episode_steps`` by the standard layers."""
    factory = env_id.torchrl
    assert factory is not None, "the torchrl source takes ids whose factory makes TorchRL envs"
    said: list[str] = []
    if config.info_keys:
        raise ValueError(f"env.info_keys={list(config.info_keys)} reads a Gymnasium env's info; {config.env_id} is a "
                         "TorchRL env, whose values are in its TensorDict: write them with a transform, or leave "
                         "env.info_keys empty")
    named = opponents_named(config)
    if named:
        raise ValueError(f"{named}; {config.env_id} is a TorchRL env, not one (a PettingZoo AEC game): "
                         f"{GAME_DEFAULTS}")
    if takes_num_envs(factory):  # a batched simulator: it makes the whole batch
        factory = functools.partial(factory, num_envs=config.num_envs)
    env = batched(with_statistics(factory, f"env {config.env_id}", said), config.num_envs, config.env_id)
    try:
        first, read = observation_transforms(env, config.observation_keys, config.observation_dict)
    except BaseException:
        close(env)
        raise
    clip = action_clipping(env) if config.clip_actions and config.clip_torchrl_actions else None
    if clip is not None:  # env.clip_actions, as for every other source: the env gets the action within its bounds
        first.append(clip)
    if config.check_finite:
        first.append(FiniteCheck(config.env_id))
    notes = [*said, *([f"env {config.env_id}: {read}"] if read else [])]
    if config.max_episode_steps is None:
        notes.append(f"env {config.env_id} is a TorchRL env without a time limit ppo_td can read: its episodes end "
                     "only when it says so (set env.max_episode_steps to truncate them)")
    return Base(env=env, close=lambda: close(env), first=first, limit=config.max_episode_steps, users_first=True,
                notes=notes)


def action_clipping(env: EnvBase) -> ClipActions | None:
    """:class:`~ppo_td.envs.transforms.ClipActions` on the action sent to ``env``, at its bounds, for a bounded
    continuous action (the stored action and its log-probability stay as sampled); None for any other action."""
    spec = env.action_spec
    if not isinstance(spec, Bounded) or not spec.domain == "continuous":
        return None
    low, high = spec.space.low, spec.space.high
    if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
        return None
    return ClipActions(low, high)
