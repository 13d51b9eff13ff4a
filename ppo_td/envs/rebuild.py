"""A user's env object from Python -> the :class:`~ppo_td.config.EnvConfig` that rebuilds it, checked to rebuild it.

ppo_td never trains on the object it is given: it makes ``env.num_envs`` copies (and more for
evaluation, and again on resume, in ``ppo-td eval`` and in worker processes). So what it keeps
is how to make one, in the config, where checkpoints and the run folder record it:

- a **factory** (a function or ``gymnasium.Env`` class at module level): its import path
  ``module:function``; each copy is ``function(**env.kwargs)``; a ``functools.partial`` of one adds its keyword
  arguments to ``env.kwargs``; one defined in the running script is recorded by the script's file
  (:mod:`ppo_td.envs.scripts`);
- a **Gymnasium env** or **vector env** made by ``gym.make``/``gym.make_vec``: its registered id,
  keyword arguments and wrappers, read from Gymnasium's public ``env.spec``; each wrapper with the arguments the
  spec holds (a wrapper that records them: ``gymnasium.utils.RecordConstructorArgs``), or with none where its
  constructor takes none;
- anything that cannot be rebuilt that way (an env made by hand, a wrapper whose arguments the spec does not hold,
  a lambda or a factory defined inside a function) is refused with the reason, asking for a factory.

Then the record is checked: a copy made from it as another process would make it must equal the object given, or
a copy the factory makes (:mod:`ppo_td.envs.verify`): the same spaces, and from the same seed the same
observations, rewards and endings. Exact or refused, never rebuilt differently.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from torchrl.envs import Transform

from ppo_td.config import EnvConfig, transform_problem
from ppo_td.envs.custom import Maker, UserTransform, from_config
from ppo_td.envs.ids import env_factory
from ppo_td.envs.imports import keyword_arguments
from ppo_td.envs.records import NotRebuildable, import_path, literal_text, with_arguments
from ppo_td.envs.scripts import MAIN, record_of_main
from ppo_td.envs.torchrl_envs import say
from ppo_td.envs.verify import Mismatch, check_rebuilds

_ASK = ("pass a factory instead: a function at module level returning one env copy "
        "(train(config, env=make_my_env)); ppo_td records its import path to rebuild the env")


__all__ = ["NotRebuildable", "env_config_for", "factory_path", "from_python", "import_path"]


def env_config_for(env: Any, base: EnvConfig) -> EnvConfig:
    """``base`` with the env identity of ``env`` (a factory, a Gymnasium env or vector env), checked to rebuild it
    (:mod:`ppo_td.envs.verify`); the other settings (normalization, masks, num_envs, ...) stay ``base``'s. A vector
    env also sets ``num_envs``.

    Raises:
        NotRebuildable: ``env`` cannot be rebuilt from a record, or its record rebuilds another env (the message
            names why and asks for a factory).
    """
    if isinstance(env, gym.vector.VectorEnv):
        config = _from_vector(env, base)
        _checked(None, config, f"the vector env {env.spec.id}",
                 spaces=(env.single_observation_space, env.single_action_space))
        return config
    if isinstance(env, gym.Env):
        if env.spec is None:
            raise NotRebuildable(f"the env {type(env.unwrapped).__name__} was not made by gym.make, so it has no "
                                 f"spec ppo_td can rebuild copies from; {_ASK}")
        config = _from_spec(env.spec, base, type(env.unwrapped).__name__, env)
        copies = _copies_of(env)
        _checked(copies, config, f"the env {env.spec.id}", spaces=(env.observation_space, env.action_space))
        if copies is None:
            say(f"the env {env.spec.id} cannot be deep-copied (the object given is never stepped), so only its spaces "
                "were checked against its record")
        return config
    if callable(env):
        config = _from_factory(env, base)
        if _in_script(config.env_id) or any(_in_script(w) for w in config.wrappers):
            _checked(functools.partial(env, **keyword_arguments(base.kwargs)), config,
                     f"the env factory {config.env_id.rpartition(':')[2]}")
        return config
    raise TypeError(f"env={type(env).__name__}: pass a factory, a gymnasium.Env, a gymnasium vector env, a "
                    "ppo_td.envs.BuiltEnv or a TorchRL env")


def factory_path(factory: Any) -> str:
    """``module:name`` of an env factory, checked to import back to the same object and not to name an env id."""
    path = import_path(factory, "env factory", _ASK)
    if path.rpartition(":")[2] in gym.registry or env_factory(path) is not factory:
        raise NotRebuildable(f"the env factory {path} has the name of a registered Gymnasium env id; rename it")
    return path


def _from_factory(env: Callable[..., Any], base: EnvConfig) -> EnvConfig:
    """A factory's record: its path; a ``functools.partial``'s keyword arguments joined to ``env.kwargs`` (those
    win, as a call's keywords win over a partial's: ppo_td calls the factory with ``env.kwargs``)."""
    func, keywords = unpartial(env, "env.kwargs")
    path = factory_path(func)
    if func is env:
        return dataclasses.replace(base, env_id=path)
    given = {item.partition("=")[0] for item in base.kwargs}
    kwargs = [f"{k}={literal_text(k, v, path)}" for k, v in keywords.items() if k not in given]
    return dataclasses.replace(base, env_id=path, kwargs=(*kwargs, *base.kwargs))


def unpartial(item: Any, recorded_as: str) -> tuple[Any, dict[str, Any]]:
    """A callable and the keyword arguments it is called with: a ``functools.partial``'s function and keywords, else
    ``item`` and none.

    Raises:
        ValueError: a partial with positional arguments (``recorded_as`` says where keywords go).
    """
    if not isinstance(item, functools.partial):
        return item, {}
    if item.args:
        raise NotRebuildable(f"functools.partial({getattr(item.func, '__name__', item.func)}, ...) has positional "
                             f"arguments; give them as keywords, so they can be recorded ({recorded_as})")
    return item.func, dict(item.keywords)


def _from_vector(env: gym.vector.VectorEnv, base: EnvConfig) -> EnvConfig:
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


def _from_spec(spec: gym.envs.registration.EnvSpec, base: EnvConfig, what: str,
               env: gym.Env | None = None) -> EnvConfig:
    if spec.id not in gym.registry:
        raise NotRebuildable(f"the env {what} has spec id {spec.id!r}, which is not registered here; {_ASK}")
    registered = gym.spec(spec.id)
    kwargs = []
    for key, value in spec.kwargs.items():
        if key in registered.kwargs and registered.kwargs[key] == value:
            continue
        try:
            kwargs.append(f"{key}={literal_text(key, value, spec.id)}")
        except NotRebuildable:
            raise NotRebuildable(f"the env {spec.id} was made with {key}={value!r}, which ppo_td cannot record as "
                                 f"a literal; {_ASK}") from None
    wrappers = _wrapper_records(spec, env) if env is not None else _no_wrappers(spec)
    limit = spec.max_episode_steps if spec.max_episode_steps != registered.max_episode_steps else None
    module = _registering_module(spec)
    return dataclasses.replace(base, env_id=f"{module}:{spec.id}" if module else spec.id, kwargs=tuple(kwargs),
                               wrappers=tuple(wrappers), max_episode_steps=limit or base.max_episode_steps)


def _no_wrappers(spec: gym.envs.registration.EnvSpec) -> list[str]:
    if spec.additional_wrappers:
        names = ", ".join(w.name for w in spec.additional_wrappers)
        raise NotRebuildable(f"the vector env {spec.id} has wrappers ({names}) in its spec; {_ASK}")
    return []


def _wrapper_records(spec: gym.envs.registration.EnvSpec, env: gym.Env) -> list[str]:
    """Each of the user's wrappers around ``env`` (innermost first) as ``module:Name KEY=VALUE ...``: its class's
    import path and the arguments the spec holds; refused where the spec does not hold them (a wrapper that does not
    record its constructor's arguments) and its constructor takes any."""
    layers, kinds, layer = [], [], env  # walked from the outside in, down to gym.make's own checkers: the env its
    while isinstance(layer, gym.Wrapper):  # entry point made (a wrapper of its own, maybe) is not the user's
        if isinstance(layer, (gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker)):
            break
        kinds.append("limit" if isinstance(layer, gym.wrappers.TimeLimit) else "wrapper")
        if kinds[-1] == "wrapper":
            layers.insert(0, layer)
        layer = layer.env
    if "limit" in kinds and "wrapper" in kinds[kinds.index("limit"):]:  # a user wrapper under a limit
        raise NotRebuildable(f"the env {spec.id} has a TimeLimit over its wrapper {type(layers[0]).__name__}; a record "
                             f"puts the time limit under the wrappers, as gym.make does: make it with gym.make("
                             f"{spec.id!r}, max_episode_steps=N) and wrap that, or {_ASK}")
    if kinds.count("limit") > 1:
        raise NotRebuildable(f"the env {spec.id} has {kinds.count('limit')} TimeLimit wrappers, of which a record "
                             f"holds one; give the limit once, gym.make({spec.id!r}, max_episode_steps=N), or {_ASK}")
    # the spec lists the wrappers of the env its entry point made too (those come back with the entry point): the
    # user's are its last ones
    recorded = spec.additional_wrappers[len(spec.additional_wrappers) - len(layers):]
    if len(layers) != len(recorded) or any(type(w).__name__ != r.name for w, r in zip(layers, recorded, strict=False)):
        raise NotRebuildable(f"the env {spec.id} has the wrappers {[type(w).__name__ for w in layers]} but its spec "
                             f"records {[r.name for r in recorded]} (a wrapper that hides itself from the spec); pass "
                             f"env.wrappers=('module:Name KEY=VALUE', ...) in the config, or {_ASK}")
    return [_wrapper_record(type(w), r.kwargs, spec.id) for w, r in zip(layers, recorded, strict=True)]


def _wrapper_record(cls: type, kwargs: dict[str, Any] | None, env_id: str) -> str:
    ask = (f"pass a factory instead, a function at module level returning the wrapped env (def make_env(): return "
           f"{cls.__name__}(gym.make({env_id!r}), ...); train(config, env=make_env)), or give {cls.__name__} "
           "gymnasium.utils.RecordConstructorArgs so the spec records its arguments")
    path = import_path(cls, "wrapper", ask)
    defaults = _parameters_after_env(cls)
    if kwargs is None:
        if defaults is None or defaults:
            taken = ", ".join(defaults) if defaults else "unreadable"
            raise NotRebuildable(f"the env {env_id} is wrapped in {cls.__name__}, whose arguments ({taken}) "
                                 f"Gymnasium's spec does not record (its record holds kwargs=None), so a copy would "
                                 f"be made with its defaults, not the values given; {ask}")
        return path
    missing = [name for name in defaults or {} if name not in ("*", "**") and name not in kwargs]
    if missing:  # a subclass's own arguments, which its parent's RecordConstructorArgs did not record
        raise NotRebuildable(f"the env {env_id} is wrapped in {cls.__name__}, whose arguments {', '.join(missing)} "
                             f"Gymnasium's spec does not record (it holds {sorted(kwargs)}), so a copy would be made "
                             f"with their defaults; {ask}")
    given = {k: v for k, v in kwargs.items() if k not in (defaults or {}) or not _equal(defaults[k], v)}
    try:
        return with_arguments(path, given)
    except NotRebuildable as err:
        raise NotRebuildable(f"the env {env_id} is wrapped in {cls.__name__}: {err}; {ask}") from None


def _parameters_after_env(cls: type) -> dict[str, Any] | None:
    """The parameters of ``cls(env, ...)`` after ``env`` -> their defaults (``inspect.Parameter.empty`` where none;
    ``**kwargs`` as ``"**"``); None where the signature cannot be read."""
    try:
        params = list(inspect.signature(cls).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    return {("**" if p.kind is p.VAR_KEYWORD else "*" if p.kind is p.VAR_POSITIONAL else p.name): p.default
            for p in params}


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and odd objects: not equal as far as a record goes
        return False


def _copies_of(env: gym.Env) -> Callable[[], gym.Env] | None:
    """Deep copies of the user's env object (the object itself is never stepped), or None where it cannot be
    copied (an emulator, a socket): then only its spaces are compared with its record."""
    try:
        copy.deepcopy(env).close()
    except Exception:  # noqa: BLE001 - any object: deepcopy fails in many ways
        return None
    return lambda: copy.deepcopy(env)


def _checked(given: Callable[[], gym.Env] | None, config: EnvConfig, what: str,
             spaces: tuple[gym.Space, gym.Space] | None = None) -> None:
    """:func:`~ppo_td.envs.verify.check_rebuilds`, its mismatch as :class:`NotRebuildable` naming the way out, and
    what it could not compare said in one line."""
    try:
        say(check_rebuilds(given, config, what, spaces))
    except Mismatch as err:
        scripts = [path for path in (config.env_id, *config.wrappers) if _in_script(path)]
        ask = _ASK if not scripts else (
            "what a script defines must work when the script is imported without running its `if __name__ == "
            "\"__main__\":` block, as another process imports it: give the factory what it reads there as keyword "
            "arguments (functools.partial(make_env, env_id=...), recorded as env.kwargs), or move it into a module")
        raise NotRebuildable(f"{err}; {ask}") from None


def _in_script(path: str) -> bool:
    """Whether a record names a module-level object of the running script by its file (or as ``__main__``)."""
    module = path.split()[0].rpartition(":")[0]
    return module == MAIN or module.endswith(".py")


def _registering_module(spec: gym.envs.registration.EnvSpec) -> str | None:
    """The module that registers ``spec``'s env when imported (so workers and ``ppo-td eval`` find it): None for
    Gymnasium's own envs, else the top package of its entry point (the running script: its file, where it can be
    imported again)."""
    entry = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__module__", "")
    top = entry.partition(":")[0].split(".")[0]
    if top == MAIN:
        return record_of_main("").rpartition(":")[0]
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
            try:
                base, kwargs = unpartial(item, f"{setting}: KEY=VALUE after the factory's path")
            except NotRebuildable as err:
                raise ValueError(f"{setting}: {err}") from None
            try:
                path = import_path(base, "transform factory", "pass a module-level function or class")
                entry = with_arguments(path, kwargs)
            except NotRebuildable:
                entry = None
            name = entry.split()[0] if entry else getattr(base, "__qualname__", type(base).__name__)
            out.append(UserTransform(_made_checked(item, name, setting), evaluation, entry, name))
        else:
            raise TypeError(f"{setting}: {type(item).__name__} is neither a torchrl.envs.Transform nor a factory "
                            "returning one")
    return out


def _made_checked(factory: Callable[[], Any], name: str, setting: str) -> Maker:
    def make() -> Transform:
        made = factory()
        if not isinstance(made, Transform):
            raise TypeError(f"{setting}: {name} returned a {type(made).__name__}; a transform factory must return a "
                            "torchrl.envs.Transform")
        return made
    return make
