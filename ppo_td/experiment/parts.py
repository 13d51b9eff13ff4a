"""What a run folder can record of the parts passed from Python: a run folder is resumed and evaluated from its
config alone, in this process or another, so a part it cannot record is refused when it is given, naming the way
out (exact or refused)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ppo_td.config import TrainConfig
from ppo_td.envs.custom import unrecorded
from ppo_td.envs.rebuild import NotRebuildable, from_python, import_path
from ppo_td.envs.records import check_script_records, recorded_paths
from ppo_td.envs.scripts import elsewhere_problem
from ppo_td.training import Pipeline

OBJECTS = ("actor", "critic", "loss", "optimizer")
"""Parts passed as objects, which no config records."""


def recordable(config: TrainConfig, parts: dict[str, Any]) -> TrainConfig:
    """``config`` with ``parts["encoder"]`` recorded as its import path (popped from ``parts``); the parts a run
    folder cannot record refused (actor, critic, loss or optimizer objects; transforms given as objects).

    Raises:
        ValueError: naming the part and the way out.
    """
    objects = sorted(name for name in OBJECTS if parts.get(name) is not None)
    if objects:
        raise ValueError(f"run_dir: {', '.join(objects)} passed from Python cannot be rebuilt from the run folder "
                         "(resume and ppo-td eval rebuild every part from config.json): give the networks through "
                         "encoder= or model.encoder=module:function and the settings through the config, or "
                         "train without run_dir")
    for setting in ("transforms", "train_transforms"):
        items = parts.get(setting)
        names = unrecorded(from_python(items, setting == "transforms", setting)) if items is not None else []
        if names:
            raise ValueError(f"run_dir: the {setting} {names} cannot be rebuilt from the run folder (resume and "
                             "ppo-td eval rebuild the env from config.json): pass a factory instead, a module-level "
                             "function or class returning the transform (a functools.partial of one for its "
                             "arguments), or train without run_dir")
    encoder = parts.pop("encoder", None)
    if encoder is None:
        return config
    try:
        path = import_path(encoder, "encoder", "define it at module level of an importable module, or train without "
                                               "run_dir")
    except NotRebuildable as err:
        raise ValueError(f"run_dir: the encoder cannot be recorded for resume and ppo-td eval: {err}") from err
    return dataclasses.replace(config, model=dataclasses.replace(config.model, encoder=path))


def check_reopenable(pipeline: Pipeline) -> None:
    """Refuse a built pipeline whose run folder could not be reopened: transforms appended to its env after it was
    built, a TorchRL env object, or a part recorded from a notebook or an unguarded script (``__main__:name``).

    Raises:
        ValueError: naming what and the way out.
    """
    if pipeline.appended:
        names = ", ".join(type(t).__name__ for t in pipeline.appended)
        raise ValueError(f"run_dir: the env has transforms appended after it was built ({names}), which the run "
                         "folder cannot record (resume and ppo-td eval rebuild the env from config.json): pass them "
                         "as factories, train(config, transforms=[factory, ...]) or env.transforms")
    if not pipeline.rebuildable:
        raise ValueError("run_dir: the env is a TorchRL env ppo_td cannot rebuild, so its run folder could "
                         "not be resumed or evaluated; pass a factory (a module-level function returning a "
                         "gymnasium.Env), a Gymnasium env, or a ppo_td BuiltEnv")
    problem = elsewhere_problem(recorded_paths(pipeline.config), "ppo-td eval, a resume and load_policy rebuild "
                                "it in another process")
    if problem:
        raise ValueError(f"run_dir: {problem}; or train without run_dir")
    try:
        check_script_records(pipeline.config)
    except NotRebuildable as err:
        raise ValueError(f"run_dir: {err}") from err
