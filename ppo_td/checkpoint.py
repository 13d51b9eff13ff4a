"""Atomic checkpoints that hold everything needed to evaluate or resume a run."""

from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch
from tensordict.nn import TensorDictModule
from torchrl.envs import EnvBase

from ppo_td.config import TrainConfig, from_dict, to_dict
from ppo_td.envs import env_signature, make_env
from ppo_td.models import make_actor_critic
from ppo_td.pipeline import Pipeline

FORMAT = "ppo_td.checkpoint"
VERSION = 1


def save_checkpoint(path: str | os.PathLike, pipeline: Pipeline, *, frames: int, iteration: int) -> Path:
    """Write a checkpoint of ``pipeline`` to ``path`` atomically (temp file, fsync, rename).

    A crash mid-write leaves any previous file at ``path`` untouched. Holds the
    config, the env signature, actor/critic/optimizer/scheduler state, the env's
    transform state (normalization statistics) and the frame/iteration counters.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "version": VERSION,
        "config": to_dict(pipeline.config),
        "env_signature": env_signature(pipeline.env),
        "actor": pipeline.actor.state_dict(),
        "critic": pipeline.critic.state_dict(),
        "optimizer": pipeline.optimizer.state_dict(),
        "scheduler": pipeline.scheduler.state_dict(),
        "env_state": pipeline.env.state_dict(),
        "frames": frames,
        "iteration": iteration,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a checkpoint file; clear errors for missing, corrupt or foreign files."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: pass a checkpoint file or a run folder with checkpoint.pt")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, OSError) as err:
        raise ValueError(
            f"checkpoint {path} is unreadable (truncated or corrupt: {type(err).__name__}: {err}). "
            "Use an earlier checkpoint of the run, or train again."
        ) from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a ppo_td checkpoint (no '{FORMAT}' marker).")
    if state.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has format version {state.get('version')}; this ppo_td reads {VERSION}.")
    return state


def checkpoint_config(state: dict[str, Any]) -> TrainConfig:
    """The :class:`TrainConfig` a checkpoint was trained with."""
    return from_dict(state["config"])


def check_compatible(state: dict[str, Any], env: EnvBase) -> None:
    """Refuse a checkpoint whose observation shape or action space differ from ``env``'s."""
    saved, current = state["env_signature"], env_signature(env)
    if saved != current:
        raise ValueError(
            f"checkpoint does not fit this environment: it was trained with {saved} "
            f"(env {state['config']['env']['env_id']}), the environment has {current}. "
            "Evaluate it on the env it was trained on."
        )


def restore(pipeline: Pipeline, state: dict[str, Any]) -> None:
    """Load a checkpoint's weights, optimizer, schedule and env state into a built pipeline."""
    check_compatible(state, pipeline.env)
    pipeline.actor.load_state_dict(state["actor"])
    pipeline.critic.load_state_dict(state["critic"])
    pipeline.optimizer.load_state_dict(state["optimizer"])
    pipeline.scheduler.load_state_dict(state["scheduler"])
    pipeline.env.load_state_dict(state["env_state"])


def load_actor(path: str | os.PathLike) -> tuple[TrainConfig, TensorDictModule]:
    """Config and trained actor of a checkpoint, checked against a freshly built env."""
    state = load_checkpoint(path)
    config = checkpoint_config(state)
    env = make_env(dataclasses.replace(config.env, num_envs=1))
    try:
        check_compatible(state, env)
        actor, _ = make_actor_critic(env, config.model)
    finally:
        env.close()
    actor.load_state_dict(state["actor"])
    return config, actor
