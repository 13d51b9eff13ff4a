"""Atari through EnvPool (``env.vectorization='envpool'``): the same observations as Gymnasium's preprocessing (up to
the resize's rounding), the settings ppo_td's Atari preprocessing has (episodic life in training only, raw rewards),
resets only of the copies asked for, a run that trains, checkpoints, evaluates, and the refusals."""

import dataclasses

import numpy as np
import pytest
import torch

from ppo_td.config import EnvConfig
from ppo_td.envs import build_env
from ppo_td.presets import get_preset

pytest.importorskip("envpool")
pytest.importorskip("ale_py")


def atari(**env) -> EnvConfig:
    return dataclasses.replace(get_preset("atari").env, **{"vectorization": "envpool", "num_envs": 2, **env})


def test_envpool_observations_match_gymnasiums_preprocessing():
    """The first observation of the same game under both: the same shape, dtype and stacked frames, within the
    resize's rounding (EnvPool's and OpenCV's area interpolation differ by at most a grey level or two)."""
    theirs = build_env(atari(vectorization="sync"), seed=3)
    ours = build_env(atari(), seed=3)
    try:
        a, b = theirs.env.reset()["observation"], ours.env.reset()["observation"]
        assert a.shape == b.shape == torch.Size([2, 4, 84, 84]) and a.dtype == b.dtype == torch.uint8
        assert ours.env.observation_spec["observation"] == theirs.env.observation_spec["observation"]
        assert ours.env.action_spec == theirs.env.action_spec
        assert (a[0].int() - b[0].int()).abs().float().mean() < 1.0  # Pong's first screen, both resized
    finally:
        theirs.close()
        ours.close()


def test_envpool_takes_ppo_tds_atari_settings_and_evaluation_plays_whole_games():
    from ppo_td.envs.envpool import EnvPoolAtari

    train = build_env(atari(kwargs=("frameskip=1", "repeat_action_probability=0.25")), seed=1)
    evaluation = build_env(dataclasses.replace(atari(), episodic_life=False), seed=1, training=False)
    try:
        assert isinstance(train.vector, EnvPoolAtari)
        settings = train.vector.kwargs
        assert settings["episodic_life"] and not settings["reward_clip"]  # raw rewards: ppo_td clips after RewardSum
        assert (settings["frame_skip"], settings["noop_max"], settings["stack_num"], settings["max_episode_steps"]) \
            == (4, 30, 4, 27_000)
        assert settings["repeat_action_probability"] == 0.25
        assert not evaluation.vector.kwargs["episodic_life"]
    finally:
        train.close()
        evaluation.close()


def test_envpool_resets_only_the_copies_asked_for():
    from ppo_td.envs.envpool import EnvPoolAtari, pool_kwargs, task_id

    config = atari(num_envs=3)
    vec = EnvPoolAtari(task_id(config.env_id), pool_kwargs(config, {"frameskip": 1,
                                                                     "repeat_action_probability": 0.0}))
    try:
        first, _ = vec.reset(seed=5)
        for _ in range(10):
            vec.step(np.ones(3, dtype=np.int64))
        np.testing.assert_array_equal(vec.reset(seed=5)[0], first)  # a seeded reset starts the same games
        for _ in range(60):  # Pong's screen changes as the ball moves
            obs, reward, terminated, truncated, _ = vec.step(np.zeros(3, dtype=np.int64))
        assert not (obs[1] == first[1]).all()
        again, _ = vec.reset(options={"reset_mask": np.array([False, True, False])})
        np.testing.assert_array_equal(again[0], obs[0])  # the others are left where they were
        np.testing.assert_array_equal(again[2], obs[2])
        assert (again[1, :3] == again[1, 3]).all()  # a fresh game: the reset frame stacked four times
        assert reward.dtype == np.float64 and terminated.dtype == truncated.dtype == np.bool_
    finally:
        vec.close()


def test_a_run_collects_with_envpool_checkpoints_and_evaluates(tmp_path, capsys):
    from ppo_td.cli import main

    assert main(["train", "--preset", "atari", "--env.vectorization", "envpool", "--env.num-envs", "2",
                 "--frames-per-batch", "64", "--total-frames", "128", "--eval-episodes", "1", "--eval-max-steps", "50",
                 "--no-progress", "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "deterministic evaluation" in out and (tmp_path / "checkpoint.pt").exists()


def test_envpool_refuses_what_it_cannot_step():
    from ppo_td.envs.envpool import pool_kwargs

    with pytest.raises(ValueError, match="'envpool' with env.atari=True only"):
        EnvConfig("CartPole-v1", vectorization="envpool")
    with pytest.raises(ValueError, match="ALE v5 Atari id EnvPool has"):
        build_env(atari(env_id="ALE/TicTacToe3D-v5"))  # an ALE game EnvPool lacks
    with pytest.raises(ValueError, match=r"env.kwargs \['obs_type'\] have no EnvPool counterpart"):
        pool_kwargs(atari(), {"frameskip": 1, "obs_type": "rgb"})
    with pytest.raises(ValueError, match="frameskip=1"):
        pool_kwargs(atari(), {"frameskip": 4})


def test_the_envpool_floor_benchmark_measures_both_ways(tmp_path, capsys):
    """benchmarks/speed/envpool_floor.py: each env and copy count timed both ways, rounds alternating, a JSON line
    each with EnvPool's speed over Gymnasium's."""
    import json

    from benchmarks.speed import envpool_floor

    out = tmp_path / "floor.jsonl"
    assert envpool_floor.main(["--envs", "CartPole-v1", "--copies", "1", "2", "--rounds", "2", "--steps", "20",
                               "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["copies"] for r in rows] == [1, 2]
    for row in rows:
        assert {k: len(v) for k, v in row["micros_per_frame"].items()} == {"gymnasium": 2, "envpool": 2}
        medians = {k: float(np.median(v)) for k, v in row["micros_per_frame"].items()}
        assert row["envpool_speedup"] == pytest.approx(medians["gymnasium"] / medians["envpool"])
    assert "CartPole-v1 x 2: gymnasium" in capsys.readouterr().out
