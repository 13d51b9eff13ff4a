"""Torch threads: ``ppo-td train`` and the Python API (``ppo_td.train``, ``build_pipeline`` + ``run``, ``run_dir``)
choose them alike, take a count given, keep a count the user set, and give torch's back after a Python call."""

import dataclasses
import json
import logging

import gymnasium as gym
import numpy as np
import pytest
import torch

import ppo_td
from conftest import small_config
from ppo_td.cli import main
from ppo_td.training import build_pipeline, run
from ppo_td.training.threads import chosen_by_user, torch_default_threads

TINY = ["--preset", "cleanrl", "--env.num-envs", "4", "--frames-per-batch", "64", "--total-frames", "128",
        "--model.hidden-sizes", "16", "16", "--eval-episodes", "2", "--no-progress"]


@pytest.fixture
def torch_default(monkeypatch):
    """This process on torch's start-up default threads (the tests run on 1), no thread variable set; 1 after."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    default = max(torch_default_threads())
    if default < 2:
        pytest.skip("a one-core machine: torch's default is already one thread")
    torch.set_num_threads(default)
    yield default
    torch.set_num_threads(1)


def _counting(seen: list):
    def callback(metrics, pipeline):
        seen.append(torch.get_num_threads())
    return callback


def test_every_entry_point_trains_on_one_thread_for_vector_observations(tmp_path, torch_default, caplog):
    """The CLI and the three Python ways run on the same count, said once; Python gives torch's count back."""
    from ppo_td.training import threads as threads_module

    assert chosen_by_user() is None
    threads_module._SAID.clear()  # as in a fresh process (the choice is said once per process)
    seen: list[int] = []
    config = small_config(total_frames=128)
    with caplog.at_level(logging.WARNING, logger="ppo_td"):
        assert main(["train", *TINY, "--run-dir", str(tmp_path / "cli")]) == 0
        cli = json.loads((tmp_path / "cli" / "run.json").read_text())["threads"]
        assert cli == 1
        torch.set_num_threads(torch_default)  # the CLI keeps its choice for its process; a Python call gives it back
        ppo_td.train(config, callbacks=[_counting(seen)])
        ppo_td.train(config, callbacks=[_counting(seen)], run_dir=str(tmp_path / "py"))
        run(build_pipeline(config), callbacks=[_counting(seen)])
    assert seen == [cli] * 6
    assert torch.get_num_threads() == torch_default
    assert json.loads((tmp_path / "py" / "run.json").read_text())["threads"] == cli
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("torch threads:")]
    assert len(said) == 1 and said[0].startswith("torch threads: 1 for this run")  # once, for all four runs


def test_a_count_given_is_used_and_a_bad_one_refused_before_anything_is_built(tmp_path, torch_default):
    seen: list[int] = []
    ppo_td.train(small_config(total_frames=64, eval_episodes=0), callbacks=[_counting(seen)], threads=2)
    assert seen == [2] and torch.get_num_threads() == torch_default
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"threads=.*give the number of torch threads"):
            ppo_td.train(small_config(), threads=bad, run_dir=str(tmp_path / "bad"))
        assert not (tmp_path / "bad").exists()


def test_a_count_the_user_set_is_kept(torch_default, monkeypatch):
    seen: list[int] = []
    config = small_config(total_frames=64, eval_episodes=0)
    torch.set_num_threads(torch_default + 1)  # not torch's default: the user's own
    assert chosen_by_user() == f"torch.set_num_threads({torch_default + 1})"
    ppo_td.train(config, callbacks=[_counting(seen)])
    assert seen == [torch_default + 1]
    torch.set_num_threads(torch_default)
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch_default))  # a variable is a choice, even of the default count
    assert chosen_by_user() == f"OMP_NUM_THREADS={torch_default}"
    ppo_td.train(config, callbacks=[_counting(seen)])
    assert seen[-1] == torch_default


class Pictures(gym.Env):
    """A ``size`` x ``size`` x 3 uint8 image observation; the episode ends after 8 steps."""

    action_space = gym.spaces.Discrete(2)
    size = 16

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (self.size, self.size, 3), np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), self.t >= 8, False, {}


class BigPictures(Pictures):
    size = 36  # the Nature CNN's smallest


@pytest.mark.parametrize("env", [Pictures, BigPictures])
def test_images_for_the_nature_cnn_keep_torch_default_small_ones_take_one_thread(torch_default, env):
    pipeline = build_pipeline(small_config(), env=env)
    try:
        assert pipeline.description.observation_space.images()
        assert pipeline.threads == (torch_default if env.size >= 36 else 1)
    finally:
        pipeline.collector.shutdown()


def test_the_networks_are_built_on_the_run_s_threads(torch_default):
    """A 64x64 orthogonal init rounds differently on 2 threads than on 1: built on torch's default and trained on
    the count ppo_td chooses, a run differed from the same run with that count set first (a VMAS balance seed ended
    at 24.3 against 8.5, docs/learning.md)."""
    config = small_config(model=dataclasses.replace(small_config().model, hidden_sizes=(64, 64)))
    chosen = build_pipeline(config)  # torch's default in force: ppo_td chooses one thread for vector observations
    chosen.collector.shutdown()
    torch.set_num_threads(1)
    set_first = build_pipeline(config)
    set_first.collector.shutdown()
    torch.set_num_threads(torch_default)
    for net in ("actor", "critic"):
        pairs = zip(getattr(chosen, net).parameters(), getattr(set_first, net).parameters(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs), net
