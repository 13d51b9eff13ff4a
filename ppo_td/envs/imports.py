"""Importing the user's code by path (``module:Name``, the module looked for in the current folder too), and the
``KEY=VALUE`` arguments given with it."""

from __future__ import annotations

import ast
import importlib
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ppo_td.envs.scripts import import_script, module_for

if TYPE_CHECKING:
    from ppo_td.config import EnvConfig


def import_from_cwd(module: str) -> ModuleType:
    """Import ``module`` and return it, looking in the current folder too (as ``python -m`` would): Gymnasium's
    ``module:EnvId`` convention for envs defined next to the user's script. A path ending in ``.py`` is a script
    ppo_td recorded (:mod:`ppo_td.envs.scripts`), imported from its file; the running script is ``__main__`` by any
    of its names."""
    running = module_for(module)
    if running is not None:
        return running
    if module.endswith(".py"):
        return import_script(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        if err.name != module.split(".")[0] or cwd in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module)


def import_attr(path: str, what: str) -> Any:
    """The callable at ``module:Name`` (the module is looked for in the current folder too; a recorded script by its
    file); ``what`` names the setting in the error when it cannot be imported or is not callable."""
    module, _, name = path.rpartition(":")
    try:
        found = getattr(import_from_cwd(module), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{what}: cannot import {path!r} ({err}); give module:Name, importable from the current "
                         "folder or PYTHONPATH") from err
    if not callable(found):
        raise ValueError(f"{what}: {path} is a {type(found).__name__}, not a wrapper class or function")
    return found


def register_minatar(env_id: str) -> None:
    """Register MinAtar's Gymnasium ids (``MinAtar/Breakout-v1``...) for such an id not registered yet: the
    ``minatar`` package registers them only when ``minatar.gym.register_envs()`` is called, never on import, so
    Gymnasium's ``module:EnvId`` form cannot reach them. A clear error without the package."""
    import gymnasium as gym

    bare = env_id.rpartition(":")[2]
    if bare in gym.registry or not bare.startswith("MinAtar/"):
        return
    try:
        minatar_gym = importlib.import_module("minatar.gym")
    except ImportError as err:
        raise ValueError(f"env {env_id!r} is a MinAtar game: install it with pip install minatar") from err
    minatar_gym.register_envs()


def register_minigrid(env_id: str) -> None:
    """Import ``minigrid`` (which registers its ids on import) for a ``MiniGrid-...`` or ``BabyAI-...`` id not
    registered yet, so the bare id works as ``minigrid:MiniGrid-...`` does; a clear error without the package."""
    import gymnasium as gym

    module, _, bare = env_id.rpartition(":")
    if bare in gym.registry or not bare.startswith(("MiniGrid-", "BabyAI-")) or module not in ("", "minigrid"):
        return  # (a user's module registering such an id imports what it needs)
    try:
        importlib.import_module("minigrid")
    except ImportError as err:
        raise ValueError(f"env {env_id!r} is a MiniGrid env: install it with pip install minigrid") from err


def keyword_arguments(items: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as keyword arguments: Python literals where they parse, else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, text = item.partition("=")
        try:
            out[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[key] = text
    return out


def split_entry(entry: str) -> tuple[str, dict[str, Any]]:
    """``"module:Name key=value ..."`` (a transform's or a wrapper's record) -> (``"module:Name"``, its keyword
    arguments)."""
    path, *items = entry.split()
    return path, keyword_arguments(items)


def env_kwargs_of(config: EnvConfig) -> dict[str, Any]:
    """``config.kwargs`` (KEY=VALUE strings) as the env's keyword arguments."""
    return keyword_arguments(config.kwargs)
