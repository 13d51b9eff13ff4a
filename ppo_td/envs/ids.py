"""What an env id names: a registered Gymnasium id, Gymnasium's ``module:EnvId`` (importing the module registers
it), a factory ``module:function``, or a packaged id registered on demand (``ALE/...``, ``MinAtar/...``); and the
time limit it comes with."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import gymnasium as gym
from torchrl.envs import EnvBase

from ppo_td.config import EnvConfig
from ppo_td.envs.atari import FRAME_SKIP, import_ale
from ppo_td.envs.imports import env_kwargs_of, import_from_cwd, register_minatar, register_minigrid
from ppo_td.envs.scripts import MAIN
from ppo_td.envs.torchrl_envs import torchrl_factory


@dataclasses.dataclass(frozen=True)
class EnvId:
    """What a one-agent config's env id names, read once per build (:func:`resolve`): what every source needs of it."""

    env_id: str
    factory: Callable[..., Any] | None
    """The user's factory (``module:function`` or ``module:Class``), None for a registered id."""
    spec: gym.envs.registration.EnvSpec | None
    """A registered id's spec without its time limit (:class:`~ppo_td.envs.wrappers.StepLimit` takes its place)."""
    limit: int | None
    """The time limit: ``env.max_episode_steps``, else the registered one (:func:`episode_limit`)."""
    kwargs: dict[str, Any]
    """``env.kwargs`` as keyword arguments."""
    torchrl: Callable[[], EnvBase] | None = None
    """The factory with its arguments where it makes TorchRL envs (looked at only when asked: one env is made)."""


def register_packaged(env_id: str) -> None:
    """Register the ids of a package that does not register them by itself for Gymnasium's ``module:EnvId`` form:
    Atari's ``ALE/...`` (``ale_py`` registers them on import), ``MinAtar/...`` (``minatar.gym.register_envs``) and
    ``MiniGrid-...`` (``minigrid`` registers them on import). Called where an id is first read, so every process
    (workers, evaluation, a resume) registers them too."""
    import_ale(env_id)
    register_minatar(env_id)
    register_minigrid(env_id)


def resolve(config: EnvConfig, *, look_for_torchrl: bool = True) -> EnvId:
    """``config``'s env id checked (:func:`check_env_id`) and read once: factory, spec, limit, arguments, and with
    ``look_for_torchrl`` whether the factory makes TorchRL envs (one is made to see, and closed)."""
    factory = check_env_id(config.env_id)
    kwargs = env_kwargs_of(config)
    spec = None if factory is not None else gym.spec(config.env_id.rpartition(":")[2])
    limit = config.max_episode_steps if config.max_episode_steps is not None or spec is None else spec.max_episode_steps
    return EnvId(config.env_id, factory, None if spec is None else dataclasses.replace(spec, max_episode_steps=None),
                 limit, kwargs, torchrl_factory(factory, kwargs) if look_for_torchrl else None)


def check_env_id(env_id: str) -> Callable[..., gym.Env] | None:
    """Known id, Gymnasium's ``module:EnvId`` form whose module registers it when imported (that
    form also reaches worker processes, which do not share this process's registrations), or
    ``module:function``, a factory returning one env copy (see :func:`env_factory`). Returns the factory (None for
    a registered id)."""
    register_packaged(env_id)
    module, sep, name = env_id.rpartition(":")
    found = None
    if sep:
        try:
            found = import_from_cwd(module)
        except ImportError as err:
            raise ValueError(f"env id {module}:{name}: cannot import {module!r} ({err}); it must be importable "
                             "from the current folder or PYTHONPATH where training runs (and in every worker)") from err
    if name in gym.registry:
        return None
    factory = _callable_in(found, name) if sep else None
    if factory is not None:
        return factory
    if module == MAIN:
        raise ValueError(f"env id {env_id}: {name} was defined in the script, notebook or console that trained, as "
                         "__main__, which no other process can import (a notebook, or a script whose training was not "
                         'under `if __name__ == "__main__":`): use it in that session, or move it into a module and '
                         "train again")
    close = difflib.get_close_matches(name, list(gym.registry), n=3)
    hint = f" Close matches: {close}." if close else ""
    raise ValueError(
        f"unknown Gymnasium env id {name!r}.{hint} Check the spelling and version suffix, "
        "or import the package that registers it before building the env"
        + (f" (or give module:function, a function of {module!r} returning the env)." if sep else ".")
    )


def _callable_in(module: ModuleType, name: str) -> Callable[..., gym.Env] | None:
    found = getattr(module, name, None)
    return found if callable(found) and not isinstance(found, gym.Env) else None


def env_factory(env_id: str) -> Callable[..., gym.Env] | None:
    """The user's env factory when ``env_id`` is ``module:function`` (or ``module:Class``) naming a callable of
    that module rather than a registered id: each env copy is ``function(**env.kwargs)``. None otherwise."""
    module, sep, name = env_id.rpartition(":")
    if not sep or name in gym.registry:
        return None
    try:
        found = import_from_cwd(module)
    except ImportError:
        return None
    return _callable_in(found, name)


def episode_limit(config: EnvConfig) -> int | None:
    """The env's time limit: ``max_episode_steps``, else the registered one (None for a factory without one)."""
    if config.max_episode_steps is not None or config.multiagent or env_factory(config.env_id) is not None:
        return config.max_episode_steps
    return gym.spec(config.env_id.rpartition(":")[2]).max_episode_steps


def own_step_limit(config: EnvConfig) -> int | None:
    """The steps after which the env ends an episode by itself: its time limit (:func:`episode_limit`), else an
    Atari game's (ALE's ``max_num_frames_per_episode`` over ppo_td's frame skip); None for an env whose episodes
    may never end."""
    register_packaged(config.env_id)
    limit = episode_limit(config)
    if limit is not None or not config.atari or env_factory(config.env_id) is not None:
        return limit
    kwargs = {**gym.spec(config.env_id.rpartition(":")[2]).kwargs, **env_kwargs_of(config)}
    frames = kwargs.get("max_num_frames_per_episode")
    return -(-int(frames) // FRAME_SKIP) if frames else None
