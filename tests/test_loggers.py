"""Experiment loggers through TorchRL's ``torchrl.record.loggers``, offline: TensorBoard events, a W&B offline run
(its id the run folder's, continued by --resume), an MLflow local store; the config as hyper-parameters, every
iteration's metrics; Logger objects from Python; bad names and missing libraries refused before anything runs."""

import json

import pytest
import torch

import ppo_td
from conftest import small_config
from ppo_td.cli import main

torch.set_num_threads(1)
pytestmark = pytest.mark.slow

TINY = ["--preset", "cleanrl", "--env.num-envs", "4", "--frames-per-batch", "64", "--total-frames", "128",
        "--model.hidden-sizes", "8", "--eval-episodes", "1", "--no-progress", "--checkpoint-every", "1"]


@pytest.fixture
def offline(monkeypatch):
    for name in ("WANDB_MODE", "WANDB_PROJECT", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")


def _mlflow_run(run):
    runs = [p for p in (run / "mlruns").glob("*/*") if (p / "metrics").is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_the_cli_logs_to_tensorboard_wandb_and_mlflow_offline_and_a_resume_continues_the_wandb_run(tmp_path,
                                                                                                     offline):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--logger", "tensorboard", "wandb", "mlflow", "--run-dir", str(run)]) == 0
    recorded = json.loads((run / "run.json").read_text())
    assert recorded["loggers"] == ["tensorboard", "wandb", "mlflow"]
    assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
    offline_runs = sorted((run / "wandb").glob(f"offline-run-*-{recorded['run_id']}"))
    assert len(offline_runs) == 1 and list(offline_runs[0].glob("*.wandb"))  # the W&B run's id is the folder's
    mlrun = _mlflow_run(run)
    assert (mlrun / "params" / "optim.lr").read_text() == "0.00025"  # the config, as hyper-parameters
    rows = (mlrun / "metrics" / "loss_policy").read_text().split("\n")
    assert [int(r.split()[2]) for r in rows if r] == [64, 128]  # each iteration's, at its frame count

    (run / "summary.json").unlink()  # back to the first iteration's checkpoint, then --resume without --logger
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.pt").hardlink_to(sorted((run / "checkpoints").glob("iter_*.pt"))[0])
    assert main(["train", "--resume", str(run)]) == 0
    assert len(sorted((run / "wandb").glob(f"offline-run-*-{recorded['run_id']}"))) == 2  # the same W&B run id


def test_loggers_from_python_by_name_with_a_run_folder_and_as_objects_without(tmp_path, offline):
    from torchrl.record.loggers import CSVLogger

    result = ppo_td.train(small_config(), run_dir=str(tmp_path / "named"), loggers=["mlflow"], project="mine")
    mlrun = _mlflow_run(tmp_path / "named")
    assert result.history and (mlrun / "params" / "env.env_id").read_text() == "CartPole-v1"
    assert "name: mine" in (mlrun.parent / "meta.yaml").read_text()  # project=, as the CLI's --project
    mine = CSVLogger(exp_name="mine", log_dir=str(tmp_path / "csv"))
    ppo_td.train(small_config(), loggers=[mine])
    written = {p.stem for p in (tmp_path / "csv").rglob("*.csv")}
    assert {"loss_policy", "episode_return", "sps"} <= written
    with pytest.raises(ValueError, match=r"loggers by name write into the run folder: pass run_dir"):
        ppo_td.train(small_config(), loggers=["wandb"])
    with pytest.raises(TypeError, match="not torchrl.record.loggers Logger objects"):
        ppo_td.train(small_config(), loggers=[object()])


def test_an_unknown_logger_or_a_missing_library_is_refused_before_anything_is_built(tmp_path, capsys, monkeypatch,
                                                                                     offline):
    import importlib.util

    assert main(["train", *TINY, "--logger", "neptune", "--run-dir", str(tmp_path / "a")]) == 2
    assert "logger 'neptune': choose from csv, tensorboard, wandb, mlflow" in capsys.readouterr().err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    assert main(["train", *TINY, "--logger", "wandb", "--run-dir", str(tmp_path / "b")]) == 2
    assert "the wandb logger needs wandb: pip install wandb" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_videos_go_to_the_loggers_that_take_them(tmp_path, offline, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--video-every", "2", "--logger", "wandb", "mlflow", "--run-dir", str(run)]) == 0
    assert (run / "videos" / "iter_000002-episode-0.mp4").is_file()
    assert list((run / "wandb").rglob("media/videos/video_*.mp4"))  # W&B's copy, at the video's frame count
    err = capsys.readouterr().err
    assert err.count("MLFlowLogger takes no videos this run") == 1  # said once, the run goes on (torchcodec)
