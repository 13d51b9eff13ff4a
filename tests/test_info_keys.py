"""``env.info_keys`` (``--log-info``): an env's info values recorded per episode, the value at its last step, and
their mean per iteration, in episodes.csv, metrics.csv, the progress line, every logger and ``TrainResult``."""

import csv
import dataclasses
import math

import pytest
import torch
from tensordict import TensorDict

import ppo_td
from ppo_td.cli import main
from ppo_td.config import EnvConfig
from ppo_td.envs.info import InfoReader

torch.set_num_threads(1)


def _config(**env):
    base = ppo_td.get_preset("cleanrl")
    return dataclasses.replace(base, env=EnvConfig("info_envs:reach", num_envs=2, **env), frames_per_batch=32,
                               total_frames=64, eval_episodes=1,
                               model=dataclasses.replace(base.model, hidden_sizes=(8,)))


def test_each_episodes_last_info_value_is_recorded_and_its_mean_per_iteration():
    result = ppo_td.train(_config(), info_keys=["is_success"])
    assert type(result.pipeline.collector).__name__ == "EnvLoopCollector"  # infos are read in the env's own step
    episodes = result.episodes
    assert len(episodes) == 16 and {e["is_success"] for e in episodes} <= {0.0, 1.0}  # 4-step episodes, 64 frames
    for row in result.history:
        ended = [e["is_success"] for e in episodes if e["iteration"] == row["iteration"]]
        assert row["is_success"] == pytest.approx(sum(ended) / len(ended))
    batch = next(iter(ppo_td.training.build_pipeline(_config(info_keys=("is_success",))).collector))
    value, done = batch["next", "info", "is_success"], batch["next", "done"].squeeze(-1)
    assert value.dtype == torch.float32 and torch.isnan(value[~done]).all()  # NaN where the env did not report
    # the episode's value is the action at its last step (the env's own rule): read back from the batch
    assert torch.equal(value[done], (batch["action"][done] == 1).float())


def test_the_cli_writes_the_columns_the_progress_line_and_a_key_never_reported_stays_empty(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--preset", "cleanrl", "--env.env-id", "info_envs:reach", "--env.num-envs", "2",
                 "--frames-per-batch", "32", "--total-frames", "64", "--model.hidden-sizes", "8", "--eval-episodes",
                 "1", "--no-progress", "--log-every", "1", "--log-info", "is_success", "never", "--run-dir",
                 str(run)]) == 0
    out = capsys.readouterr().out
    assert "is_success " in out and "never -" in out
    with (run / "episodes.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["is_success"] in ("0.0", "1.0") and r["never"] == "nan" for r in rows)
    with (run / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    assert all(0.0 <= float(m["is_success"]) <= 1.0 and math.isnan(float(m["never"])) for m in metrics)
    assert main(["eval", str(run), "--episodes", "2"]) == 0  # the recorded config rebuilds with its reader


def test_bad_info_keys_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"env.info_keys='a b' is invalid: it must be names of info entries"):
        EnvConfig(info_keys=("a b",))
    with pytest.raises(ValueError, match=r"env.info_keys=.*with env.suite='vmas'"):
        EnvConfig("navigation", suite="vmas", max_episode_steps=10, info_keys=("is_success",))
    with pytest.raises(ValueError, match=r"info\['note'\] is 'end', not a number"):
        InfoReader(["note"], 1)({"note": "end"}, TensorDict({}, [1]))


def test_info_keys_take_no_metrics_name_and_an_env_passed_in_that_cannot_read_them_is_refused():
    from torchrl.envs.libs.gym import GymEnv

    from ppo_td.config import RESERVED_INFO_KEYS
    from ppo_td.envs import build_env
    from ppo_td.persist.runlog import EPISODE_COLUMNS, METRIC_COLUMNS

    assert set(METRIC_COLUMNS) | set(EPISODE_COLUMNS) <= RESERVED_INFO_KEYS  # kept in step with the columns
    with pytest.raises(ValueError, match=r"env.info_keys='frames' is invalid: it must be a name no metric"):
        EnvConfig(info_keys=("frames",))
    with pytest.raises(ValueError, match=r"a TorchRL env passed in has its values in its TensorDict"):
        ppo_td.train(_config(), env=GymEnv("Pendulum-v1", batch_size=[]), info_keys=["is_success"])
    built = build_env(_config().env, seed=0)
    with pytest.raises(ValueError, match=r"the BuiltEnv passed in was built with \[\]"):
        ppo_td.train(_config(), env=built, info_keys=["is_success"])
    built.close()
