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


def game_runs_both_ways(tmp_path: Path, env_flags: list[str], env: EnvConfig) -> tuple[dict, dict]:
    """A 512-frame tic-tac-toe run on the generic preset (4 games at once, 4 evaluation games) trained from the
    command line with ``env_flags`` into ``tmp_path/cli`` and from Python with ``env`` into ``tmp_path/api``;
    their config.json files."""
    import json

    import ppo_td
    from ppo_td.cli import main

    args = ["train", "--env.env-id", env.env_id, "--env.num-envs", "4", *env_flags, "--frames-per-batch", "256",
            "--total-frames", "512", "--eval-episodes", "4", "--run-dir", str(tmp_path / "cli")]
    assert main(args) == 0
    config = dataclasses.replace(get_preset("generic"), total_frames=512, eval_episodes=4, frames_per_batch=256,
                                 env=dataclasses.replace(env, num_envs=4))
    ppo_td.train(config, run_dir=str(tmp_path / "api"), progress=False)
    cli, api = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("cli", "api"))
    return cli, api


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
