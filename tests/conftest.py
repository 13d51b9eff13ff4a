import dataclasses
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import examples.trading  # noqa: F401 - registers the example env ids (ppo_td/Trading-v0 and variants)
from ppo_td.config import EnvConfig, ModelConfig, TrainConfig
from ppo_td.presets import get_preset

torch.set_num_threads(1)  # the machines' two cores are shared
logging.getLogger("torchrl").setLevel(logging.WARNING)


def small_config(**overrides) -> TrainConfig:
    """A few-iteration CartPole config with a small network, for plumbing tests."""
    base = dataclasses.replace(
        get_preset("cleanrl"),
        env=EnvConfig("CartPole-v1", num_envs=4),
        model=ModelConfig(hidden_sizes=(16, 16)),
        frames_per_batch=64,
        total_frames=192,
        eval_episodes=2,
    )
    return dataclasses.replace(base, **overrides)


def ctrl_c_after(iteration: int):
    """A callback that sends this process SIGINT (Ctrl-C) after ``iteration``: the run checkpoints and stops."""

    def stop(metrics, _):
        if metrics["iteration"] == iteration:
            os.kill(os.getpid(), signal.SIGINT)

    return stop


@pytest.fixture
def tiny_config() -> TrainConfig:
    return small_config()


def run_exported_file(fmt: str, path, inputs: dict, folder) -> np.ndarray:
    """The actions of an exported policy file run in a fresh process that imports only torch, numpy and onnxruntime
    (``tests/scripts/run_exported.py``, which asserts ppo_td, tensordict and TorchRL stay unimported): ``inputs``
    maps ``in{i}``/``state{j}`` to ``[steps, batch, ...]`` arrays."""
    folder = Path(folder)
    np.savez(folder / "in.npz", **inputs)
    script = Path(__file__).parent / "scripts" / "run_exported.py"
    subprocess.run([sys.executable, str(script), fmt, str(path), str(folder / "in.npz"), str(folder / "out.npz")],
                   check=True, timeout=300)
    return np.load(folder / "out.npz")["action"]
