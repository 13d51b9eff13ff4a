"""The user's own TorchRL transforms as a recorded part of the env (``env.transforms``, ``env.train_transforms``).

A transform is recorded as how to make it, ``module:factory`` plus keyword arguments written as for envs
(``"my_transforms:RewardBonus scale=0.1"``, a value read as a Python literal, else kept as text), so that the final
evaluation, ``ppo-td eval``, ``--resume``, worker processes and :func:`ppo_td.load_policy` rebuild the very stack
training ran. ``env.transforms`` apply in training and evaluation; ``env.train_transforms`` in training only (a
reward bonus, observation noise). Returns are reported raw either way: the transforms come after ``RewardSum``.

From Python, ``train(config, transforms=[...])`` takes factories (a module-level function or class, or a
``functools.partial`` of one with literal arguments), recorded the same way, and ``Transform`` objects, used as they
are in this process (evaluation gets a ``clone()``) and refused where a run must be rebuilt elsewhere (``run_dir``,
worker processes).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torchrl.envs import Compose, Transform, TransformedEnv

from ppo_td.envs.imports import import_attr, split_entry

Maker = Callable[[], Transform]


def make_transform(entry: str, setting: str) -> Transform:
    """Import and call the factory of ``entry``; ``setting`` (``env.transforms``) names it in errors."""
    path, kwargs = split_entry(entry)
    factory = import_attr(path, setting)
    try:
        made = factory(**kwargs)
    except TypeError as err:
        raise ValueError(f"{setting}: {path}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: {err}. "
                         "Check the factory's keyword arguments, given as KEY=VALUE after its path") from err
    if not isinstance(made, Transform):
        raise TypeError(f"{setting}: {path} returned a {type(made).__name__}; a transform factory must return a "
                        "torchrl.envs.Transform (a Compose of several is one)")
    return made


@dataclasses.dataclass(frozen=True)
class UserTransform:
    """One of the user's transforms: how to make it, whether evaluation applies it, and its record."""

    make: Maker
    """Called once per env built: a fresh transform (a factory's), or the object given (a clone after the first)."""
    evaluation: bool
    """It applies in evaluation too (``env.transforms``), not in training only (``env.train_transforms``)."""
    entry: str | None
    """``module:factory [KEY=VALUE ...]`` recording it, or None for an object that cannot be recorded."""
    name: str
    """What messages call it: the factory's path, or the object's class."""


def from_config(transforms: Sequence[str], train_transforms: Sequence[str]) -> list[UserTransform]:
    """The transforms an :class:`~ppo_td.config.EnvConfig` records, in the order they are applied."""
    return [UserTransform(functools.partial(make_transform, entry, setting), evaluation, entry, split_entry(entry)[0])
            for entries, evaluation, setting in ((transforms, True, "env.transforms"),
                                                 (train_transforms, False, "env.train_transforms"))
            for entry in entries]


def unrecorded(transforms: Sequence[UserTransform]) -> list[str]:
    """Names of the transforms that cannot be rebuilt from the config (objects, lambdas, nested functions)."""
    return [t.name for t in transforms if t.entry is None]


INIT_FRAMES = 1_000
"""Random frames that initialize a user's transform that needs statistics before it runs (TorchRL's
``ObservationNorm`` without ``loc`` and ``scale``), as TorchRL's PPO tutorial does (``init_stats(num_iter=1000)``)."""


def parts_of(transform: Transform) -> list[Transform]:
    """``transform`` and, for a ``Compose``, the transforms in it (depth first)."""
    if isinstance(transform, Compose):
        return [part for inner in transform.transforms for part in parts_of(inner)]
    return [transform]


def needing_statistics(transform: Transform | None) -> list[Transform]:
    """The parts of ``transform`` that need statistics before they run: not ``initialized``, with an ``init_stats``
    method (TorchRL's ``ObservationNorm``; a ``VecNorm``, whose ``initialized`` is False until its first step, has
    none and gathers its own)."""
    if transform is None:
        return []
    return [p for p in parts_of(transform) if not getattr(p, "initialized", True)
            and callable(getattr(p, "init_stats", None))]


def initialize_statistics(transform: Transform, name: str, copies: int, seed: int | None,
                          batch_dims: int = 1) -> str | None:
    """Initialize the parts of ``transform`` (appended to its env) that need statistics first: those with
    ``initialized`` False and an ``init_stats`` method (``ObservationNorm``), from :data:`INIT_FRAMES` frames of
    random actions over the env's ``copies``, drawn from torch's RNG seeded with ``seed`` in a fork (the caller's
    RNG is left as it was; the env is seeded by the caller), reduced over the env's ``batch_dims`` (0: an unbatched
    env) and time. Returns a line saying so (None where nothing needed it).

    Raises:
        ValueError: one that cannot be initialized so (the message names it and ppo_td's own normalizer).
    """
    done = []
    for part in needing_statistics(transform):
        try:
            with torch.random.fork_rng():
                if seed is not None:
                    torch.manual_seed(seed)
                # over copies and time: [copies..., steps, ...] rollouts concatenated along time
                part.init_stats(num_iter=INIT_FRAMES, reduce_dim=tuple(range(batch_dims + 1)), cat_dim=batch_dims)
        except (RuntimeError, ValueError, TypeError) as err:
            raise ValueError(
                f"{name}: {type(part).__name__} needs its statistics before it runs and ppo_td could not initialize "
                f"them from random steps ({str(err).splitlines()[0]}). Give it loc= and scale=, or use ppo_td's own "
                "normalizer instead: env.normalize_observations=True (--env.normalize-observations), running "
                "statistics kept in checkpoints") from err
        done.append(type(part).__name__)
    if not done:
        return None
    return (f"{name}: {', '.join(done)} initialized from {INIT_FRAMES:,} frames of random actions (init_stats, as "
            "TorchRL's PPO tutorial does); env.normalize_observations=True keeps running statistics instead")


INIT_SEED = 0
"""The seed of the random steps that initialize a TorchRL env's own transforms (:func:`with_statistics`): one seed
for every copy and every rebuild, so training, evaluation and a resume see the same statistics."""


def with_statistics(factory: Callable[[], Any], name: str, said: list[str]) -> Callable[[], Any]:
    """``factory`` whose TorchRL envs get the statistics their own transforms need before they run (TorchRL's PPO
    tutorial's ``ObservationNorm``, which it initializes by hand), from random steps seeded with
    :data:`INIT_SEED` in the first copy made, the other copies loading its values; what was done is appended to
    ``said``."""
    first: list[dict[str, Any]] = []  # the first copy's states of the parts that needed statistics

    def make() -> Any:
        env = factory()
        transform = env.transform if isinstance(env, TransformedEnv) else None
        parts = needing_statistics(transform)
        if not parts:
            return env
        if first:
            for part, state in zip(parts, first, strict=True):
                load_into_uninitialized(part, state)
            return env
        env.set_seed(INIT_SEED)
        note = initialize_statistics(transform, name, max(env.batch_size.numel(), 1), INIT_SEED,
                                     batch_dims=len(env.batch_size))
        first.extend(part.state_dict() for part in parts)
        if note and note not in said:
            said.append(note)
        return env

    return make


def load_into_uninitialized(module: torch.nn.Module, state: dict[str, Any]) -> None:
    """``module.load_state_dict(state)`` where its buffers are still uninitialized (``nn.UninitializedBuffer``,
    which a state cannot load into): each is materialized with the shape and dtype of its value first."""
    for key, buffer in module.named_buffers():
        if isinstance(buffer, torch.nn.UninitializedBuffer) and key in state:
            buffer.materialize(state[key].shape, dtype=state[key].dtype)
    module.load_state_dict(state)
