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
    assert type(result.pipeline.collector).__name__ == "FastCollector"  # infos read as TorchRL's reader reads them
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


def test_is_success_is_recorded_unasked_from_the_first_iteration_that_has_it_and_nothing_for_an_env_without(
        tmp_path, capsys):
    from ppo_td.persist.runlog import EPISODE_COLUMNS, _CsvTable, read_episodes

    def train(run, env_id, *flags):
        assert main(["train", "--preset", "cleanrl", "--env.env-id", env_id, "--env.num-envs", "2",
                     "--frames-per-batch", "4", "--total-frames", "48", "--optim.num-minibatches", "1",
                     "--model.hidden-sizes", "8", "--eval-episodes", "1", "--no-progress", "--log-every", "1",
                     "--run-dir", str(run), *flags]) == 0
        with (run / "metrics.csv").open() as f:
            return list(csv.DictReader(f))

    metrics = train(tmp_path / "reach", "info_envs:reach")  # 4-step episodes: the first end in iteration 2
    out = capsys.readouterr().out
    # episodes end every other iteration: the column joins at the first that has them, the rows before read nan
    assert all(math.isnan(float(m["is_success"])) for m in metrics[0::2])
    assert all(float(m["is_success"]) in (0.0, 0.5, 1.0) for m in metrics[1::2])
    lines = [line for line in out.splitlines() if line.startswith("iteration")]
    assert "is_success" not in lines[0] and all("  is_success " in line for line in lines[1:])
    episodes = read_episodes(tmp_path / "reach")  # every value reads as a number
    assert len(episodes) == 12 and {e["is_success"] for e in episodes} <= {0.0, 1.0}
    table = _CsvTable(tmp_path / "reach" / "episodes.csv", EPISODE_COLUMNS, 4)  # a resume
    table.write([{"iteration": 5, "frames": 20, "return": 1.0, "length": 4}])  # keeps the joined column
    table.close()
    rows = read_episodes(tmp_path / "reach")
    assert rows[:4] == [e for e in episodes if e["iteration"] <= 4] and math.isnan(rows[4]["is_success"])
    metrics = train(tmp_path / "cartpole", "CartPole-v1")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iteration")]
    assert "is_success" not in metrics[0] and lines and not any("is_success" in line for line in lines)
    result = ppo_td.train(_config())  # from Python too
    assert {e["is_success"] for e in result.episodes} <= {0.0, 1.0} and "is_success" in result.history[-1]


@pytest.mark.parametrize("step_loop", ["auto", "torchrl"])
def test_an_is_success_of_another_kind_is_left_unrecorded_unless_asked_for(step_loop):
    config = _config()
    config = dataclasses.replace(config, env=dataclasses.replace(config.env, env_id="info_envs:odd_success"),
                                 collector=dataclasses.replace(config.collector, step_loop=step_loop))
    result = ppo_td.train(config)  # the fast collector, or TorchRL's Collector through the info reader
    assert len(result.episodes) == 16 and all("is_success" not in e for e in result.episodes)
    with pytest.raises(ValueError, match=r"info\['is_success'\] is .*not a number ppo_td can record"):
        ppo_td.train(config, info_keys=["is_success"])
