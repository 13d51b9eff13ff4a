"""A user's env object from Python -> the :class:`~ppo_td.config.EnvConfig` that rebuilds it.

ppo_td never trains on the object it is given: it makes ``env.num_envs`` copies (and more for
evaluation, and again on resume, in ``ppo-td eval`` and in worker processes). So what it keeps
is how to make one, in the config, where checkpoints and the run folder record it:

- a **factory** (a function or ``gymnasium.Env`` class at module level): its import path
  ``module:function``; each copy is ``function(**env.kwargs)``;
- a **Gymnasium env** or **vector env** made by ``gym.make``/``gym.make_vec``: its registered id,
  keyword arguments and wrappers, read from Gymnasium's public ``env.spec``;
- anything that cannot be rebuilt that way (an env made by hand, a wrapper taking arguments,
  a factory defined inside a function) is refused with the reason, asking for a factory.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from torchrl.envs import Transform

from ppo_td.config import EnvConfig, transform_problem
from ppo_td.envs.custom import Maker, UserTransform, from_config
from ppo_td.envs.ids import env_factory
from ppo_td.envs.imports import import_attr

_ASK = ("pass a factory instead: a function at module level returning one env copy "
        "(train(config, env=make_my_env)); ppo_td records its import path to rebuild the env")


class NotRebuildable(ValueError):
    """An env object ppo_td cannot record how to rebuild; the message says why and what to pass."""


def env_config_for(env: Any, base: EnvConfig) -> EnvConfig:
    """``base`` with the env identity of ``env`` (a factory, a Gymnasium env or vector env); the other settings
    (normalization, masks, num_envs, ...) stay ``base``'s. A vector env also sets ``num_envs``.

    Raises:
        NotRebuildable: ``env`` cannot be rebuilt from a record (the message names why and asks for a factory).
    """
    if isinstance(env, gym.vector.VectorEnv):
        if env.spec is None:
            raise NotRebuildable(f"the vector env {type(env).__name__} was not made by gym.make_vec, so ppo_td "
                                 f"cannot make copies of it; {_ASK}")
        kwargs = dict(env.spec.kwargs)
        for key in ("num_envs", "vectorization_mode"):
            kwargs.pop(key, None)
        if kwargs.pop("vector_kwargs", None) or kwargs.pop("wrappers", None):
            raise NotRebuildable(f"the vector env {env.spec.id} was made with vector_kwargs or wrappers, which "
                                 f"ppo_td's own vector env does not take; {_ASK}")
        limit = kwargs.pop("max_episode_steps", env.spec.max_episode_steps)  # make_vec passes the time limit here
        spec = dataclasses.replace(env.spec, kwargs=kwargs, max_episode_steps=limit)
        return dataclasses.replace(_from_spec(spec, base, type(env).__name__), num_envs=env.num_envs)
    if isinstance(env, gym.Env):
        if env.spec is None:
            raise NotRebuildable(f"the env {type(env.unwrapped).__name__} was not made by gym.make, so it has no "
                                 f"spec ppo_td can rebuild copies from; {_ASK}")
        return _from_spec(env.spec, base, type(env.unwrapped).__name__, env)
    if callable(env):
        return dataclasses.replace(base, env_id=factory_path(env))
    raise TypeError(f"env={type(env).__name__}: pass a factory, a gymnasium.Env, a gymnasium vector env, a "
                    "ppo_td.envs.BuiltEnv or a TorchRL env")


def import_path(obj: Any, what: str, ask: str) -> str:
    """``module:name`` of a module-level function or class, checked to import back to the same object; ``what``
    names it and ``ask`` says what to do instead in the errors."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module is None or not name or "<" in name or "." in name:
        raise NotRebuildable(f"the {what} {obj!r} is not a function or class at module level (a lambda, "
                             f"a nested function or a bound method cannot be imported back); {ask}")
    path = f"{module}:{name}"
    try:
        found = import_attr(path, what)
    except ValueError as err:
        raise NotRebuildable(f"the {what} {path} cannot be imported back ({err}); {ask}") from err
    if found is not obj:
        raise NotRebuildable(f"{path} imports as another object than the {what} given; {ask}")
    return path


def factory_path(factory: Any) -> str:
    """``module:name`` of an env factory, checked to import back to the same object and not to name an env id."""
    path = import_path(factory, "env factory", _ASK)
    if path.rpartition(":")[2] in gym.registry or env_factory(path) is not factory:
        raise NotRebuildable(f"the env factory {path} has the name of a registered Gymnasium env id; rename it")
    return path


def _from_spec(spec: gym.envs.registration.EnvSpec, base: EnvConfig, what: str,
               env: gym.Env | None = None) -> EnvConfig:
    if spec.id not in gym.registry:
        raise NotRebuildable(f"the env {what} has spec id {spec.id!r}, which is not registered here; {_ASK}")
    registered = gym.spec(spec.id)
    kwargs = []
    for key, value in spec.kwargs.items():
        if key in registered.kwargs and registered.kwargs[key] == value:
            continue
        text = repr(value)
        try:
            same = ast.literal_eval(text) == value
        except (ValueError, SyntaxError):
            same = False
        if not same:
            raise NotRebuildable(f"the env {spec.id} was made with {key}={text}, which ppo_td cannot record as a "
                                 f"literal; {_ASK}")
        kwargs.append(f"{key}={text}")
    wrappers = []
    for wrapper in spec.additional_wrappers:
        entry = wrapper.entry_point if isinstance(wrapper.entry_point, str) else None
        if entry is None or wrapper.kwargs:
            raise NotRebuildable(f"the env {spec.id} is wrapped in {wrapper.name} with arguments {wrapper.kwargs}; "
                                 f"env.wrappers records wrappers called as Name(env) only; {_ASK}")
        wrappers.append(entry)
    if env is not None:
        _check_all_wrappers_recorded(env, spec, len(wrappers))
    limit = spec.max_episode_steps if spec.max_episode_steps != registered.max_episode_steps else None
    module = _registering_module(spec)
    return dataclasses.replace(base, env_id=f"{module}:{spec.id}" if module else spec.id, kwargs=tuple(kwargs),
                               wrappers=tuple(wrappers), max_episode_steps=limit or base.max_episode_steps)


def _check_all_wrappers_recorded(env: gym.Env, spec: gym.envs.registration.EnvSpec, recorded: int) -> None:
    """Refuse an env wrapped in a wrapper its spec does not list (one that does not record its arguments)."""
    ours = (gym.wrappers.TimeLimit, gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker)
    layers, layer = 0, env
    while isinstance(layer, gym.Wrapper):
        if not isinstance(layer, ours):
            layers += 1
        layer = layer.env
    if layers != recorded:
        raise NotRebuildable(f"the env {spec.id} has {layers} wrappers but its spec records {recorded} (a wrapper "
                             "that does not record its constructor arguments); pass env.wrappers=(module:Name, ...) "
                             f"in the config, or {_ASK}")


def _registering_module(spec: gym.envs.registration.EnvSpec) -> str | None:
    """The module that registers ``spec``'s env when imported (so workers and ``ppo-td eval`` find it): None for
    Gymnasium's own envs, else the top package of its entry point."""
    entry = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__module__", "")
    top = entry.partition(":")[0].split(".")[0]
    return None if top in ("gymnasium", "") else top


class _Reused:
    """A transform object given from Python: itself for the first env, then a clone of its state at that time."""

    def __init__(self, transform: Transform) -> None:
        self.transform, self.used = transform, False

    def __call__(self) -> Transform:
        if self.used:  # clone(): without its parent env; deepcopy: buffers of its own (clone() shares them)
            return copy.deepcopy(self.transform.clone())
        self.used = True
        return self.transform


def from_python(items: Sequence[Any], evaluation: bool, setting: str) -> list[UserTransform]:
    """``train(config, transforms=[...])``'s items as :class:`UserTransform`: a string entry, a factory (recorded as
    its import path, with a ``functools.partial``'s keyword arguments), or a ``Transform`` object (not recordable)."""
    if isinstance(items, (str, Transform)) or not isinstance(items, Sequence):
        raise TypeError(f"{setting} must be a list of transforms or factories, got {type(items).__name__}")
    out = []
    for item in items:
        if isinstance(item, str):
            problem = transform_problem(item)
            if problem:
                raise ValueError(f"{setting}: {item!r}: {problem}; write module:factory [KEY=VALUE ...]")
            out.append(from_config([item] if evaluation else [], [] if evaluation else [item])[0])
        elif isinstance(item, Transform):
            out.append(UserTransform(_Reused(item), evaluation, None, type(item).__name__))
        elif callable(item):
            base = item.func if isinstance(item, functools.partial) else item
            if isinstance(item, functools.partial) and item.args:
                raise ValueError(f"{setting}: functools.partial({getattr(base, '__name__', base)}, ...) has "
                                 "positional arguments; give them as keywords so they can be recorded")
            kwargs = item.keywords if isinstance(item, functools.partial) else {}
            try:
                path = import_path(base, "transform factory", "pass a module-level function or class")
                entry = " ".join([path, *(f"{k}={_literal(k, v, path)}" for k, v in kwargs.items())])
            except NotRebuildable:
                entry = None
            name = entry.split()[0] if entry else getattr(base, "__qualname__", type(base).__name__)
            out.append(UserTransform(_checked(item, name, setting), evaluation, entry, name))
        else:
            raise TypeError(f"{setting}: {type(item).__name__} is neither a torchrl.envs.Transform nor a factory "
                            "returning one")
    return out


def _literal(key: str, value: Any, path: str) -> str:
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value and " " not in text
    except (ValueError, SyntaxError):
        same = False
    if not same:
        raise NotRebuildable(f"{path}'s argument {key}={text} is not a literal without spaces")
    return text


def _checked(factory: Callable[[], Any], name: str, setting: str) -> Maker:
    def make() -> Transform:
        made = factory()
        if not isinstance(made, Transform):
            raise TypeError(f"{setting}: {name} returned a {type(made).__name__}; a transform factory must return a "
                            "torchrl.envs.Transform")
        return made
    return make
