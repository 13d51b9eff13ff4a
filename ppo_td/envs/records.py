"""How ppo_td records a part of the user's (an env factory, a wrapper, a transform factory, an encoder) so another
process can make it again: the import path ``module:name`` of a module-level function or class, with its keyword
arguments as ``KEY=VALUE`` literals. A part defined in the running script is recorded by the script's file
(:mod:`ppo_td.envs.scripts`)."""

from __future__ import annotations

import ast
from typing import Any

from ppo_td.config import TrainConfig
from ppo_td.envs.imports import import_attr
from ppo_td.envs.scripts import MAIN, as_another_process, record_of_main


class NotRebuildable(ValueError):
    """A part of the user's that ppo_td cannot record how to rebuild; the message says why and what to pass."""


def import_path(obj: Any, what: str, ask: str) -> str:
    """``module:name`` of a module-level function or class, checked to import back to the same object; ``what``
    names it and ``ask`` says what to do instead in the errors. One of the running script (``__main__``) is
    recorded by the script's file where that file can be imported again (:func:`~ppo_td.envs.scripts.
    record_of_main`), else as ``__main__:name`` (this process only)."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module is None or not name or "<" in name or "." in name:
        raise NotRebuildable(f"the {what} {obj!r} is not a function or class at module level (a lambda, "
                             f"a nested function or a bound method cannot be imported back); {ask}")
    path = record_of_main(name) if module == MAIN else f"{module}:{name}"
    try:
        found = import_attr(path, what)
    except ValueError as err:
        raise NotRebuildable(f"the {what} {path} cannot be imported back ({err}); {ask}") from err
    if found is not obj:
        raise NotRebuildable(f"{path} imports as another object than the {what} given; {ask}")
    return path


def literal_text(key: str, value: Any, path: str) -> str:
    """``value`` as the text of a ``KEY=VALUE`` argument of ``path``: a Python literal without spaces, read back as
    an equal value (:func:`~ppo_td.envs.imports.keyword_arguments`).

    Raises:
        NotRebuildable: naming the argument.
    """
    text = repr(value)
    for candidate in (text, text.replace(" ", "")):  # (84, 84) as (84,84): a tuple of numbers needs no spaces
        try:
            if " " not in candidate and ast.literal_eval(candidate) == value:
                return candidate
        except (ValueError, SyntaxError):
            continue
    raise NotRebuildable(f"{path}'s argument {key}={text} is not a literal without spaces, which a record can hold")


def with_arguments(path: str, arguments: dict[str, Any]) -> str:
    """The record ``module:name KEY=VALUE ...`` of ``path`` called with ``arguments`` (each a literal)."""
    return " ".join([path, *(f"{k}={literal_text(k, v, path)}" for k, v in arguments.items())])


def recorded_paths(config: TrainConfig) -> dict[str, str]:
    """Every import path ``config`` records of the user's code (setting -> ``module:name [KEY=VALUE ...]``): the env
    factory or ``module:EnvId``, wrappers, transforms and encoder."""
    env = config.env
    out = {"env.env_id": env.env_id} if ":" in env.env_id and not env.multiagent else {}
    for setting in ("wrappers", "transforms", "train_transforms"):
        out.update({f"env.{setting}[{i}]": entry for i, entry in enumerate(getattr(env, setting))})
    if ":" in config.model.encoder:
        out["model.encoder"] = config.model.encoder
    return out


def check_script_records(config: TrainConfig) -> None:
    """Make, as another process would (:func:`~ppo_td.envs.scripts.as_another_process`: the script imported afresh,
    without its main block), what ``config`` records from a script besides the env (whose copy
    :mod:`ppo_td.envs.verify` checks): each transform made once, the encoder imported. Refused where one fails.

    Raises:
        NotRebuildable: naming the record, the error and the way out.
    """
    from ppo_td.envs.custom import make_transform

    for setting, entry in recorded_paths(config).items():
        path = entry.split()[0]
        if setting == "env.env_id" or setting.startswith("env.wrappers") or not path.partition(":")[0].endswith(".py"):
            continue
        try:
            with as_another_process():
                if setting.startswith(("env.transforms", "env.train_transforms")):
                    make_transform(entry, setting)
                else:
                    import_attr(path, setting)
        except Exception as err:  # noqa: BLE001 - whatever the user's code raises, said with its record
            raise NotRebuildable(
                f"{setting} {path.rpartition(':')[2]}: made from its record as another process makes it (ppo-td eval, "
                f"a resume, a worker), it fails: {type(err).__name__}: {err}; what a script defines must work when the "
                'script is imported without its `if __name__ == "__main__":` block: give it what it reads there as '
                "keyword arguments (a functools.partial of it), or move it into a module") from err
