"""Small user-facing fixes: an unknown flag names the flag meant, a typo'd env id is told first, a missing checkpoint
is told before TorchRL's import, and the tuner's report says its units and what its plots can and cannot show."""

import dataclasses
import datetime
import json
import subprocess
import sys

import pytest

from ppo_td.cli import main
from ppo_td.cli.parse import train_command
from ppo_td.presets import get_preset


def test_a_flag_named_as_another_library_names_it_is_told_ppo_td_s_name(capsys):
    assert main(["train", "--optim.learning-rate", "1e-3"]) == 2
    assert "unknown flag --optim.learning-rate: did you mean --optim.lr?" in capsys.readouterr().err
    assert main(["train", "--num_steps", "128"]) == 2  # CleanRL's per-env count: said how it differs
    assert "did you mean --frames-per-batch? (it counts frames across all envs: num_envs x num_steps)" in \
        capsys.readouterr().err
    assert main(["train", "--optim.gamma", "0.9", "--frames-per-bach", "64"]) == 2  # both, each with its fix
    err = capsys.readouterr().err
    assert "--optim.gamma: did you mean --loss.gamma?" in err
    assert "--frames-per-bach: did you mean --frames-per-batch?" in err


def test_a_valid_long_command_still_parses_values_with_dashes_included(capsys):
    cmd, _ = train_command([
        "--preset", "cleanrl", "--env.env_id", "Acrobot-v1", "--env.num-envs", "4", "--frames-per-batch=256",
        "--optim.lr", "1e-3", "--model.log-std-init", "-0.5", "--loss.no-normalize-advantage", "--no_progress",
        "--optim.target-kl", "0.02", "--env.transforms", "user_transforms:ScaleObservation", "factor=0.5",
        "--model.hidden-sizes", "16", "16", "--seed", "3", "--checkpoint-every", "0"], "ppo-td train")
    config = cmd.config
    assert (config.env.env_id, config.env.num_envs, config.frames_per_batch, config.optim.lr) == \
        ("Acrobot-v1", 4, 256, 1e-3)
    assert config.model.log_std_init == -0.5 and not config.loss.normalize_advantage and not cmd.progress
    assert config.env.transforms == ("user_transforms:ScaleObservation factor=0.5",)  # (its form: one entry)
    assert "unknown flag" not in capsys.readouterr().err


def test_tune_s_own_flags_are_not_unknown_and_a_typo_of_one_is_told_its_name(capsys):
    assert main(["tune", "--trails", "3"]) == 2
    assert "unknown flag --trails: did you mean --trials?" in capsys.readouterr().err
    # tune's flags beside train's: read (the bad score range is told by tune, after the base config is read)
    assert main(["tune", "--trials", "1", "--seeds", "1", "--optim.lr", "1e-3", "--score-range", "CartPole-v1=9"]) == 2
    err = capsys.readouterr().err
    assert "--score-range CartPole-v1=9: give ENV=LOW:HIGH" in err and "unknown flag" not in err


def test_a_typo_d_env_id_is_told_first_with_the_build_s_message(capsys):
    assert main(["train", "--env.env-id", "CartPol-v1", "--frames-per-batch", "100"]) == 2
    out, err = capsys.readouterr()
    assert "defaults:" not in out and "frames_per_batch" not in err
    from ppo_td.envs.ids import check_env_id

    with pytest.raises(ValueError) as build:
        check_env_id("CartPol-v1")
    assert str(build.value) in err and "'CartPole-v1'" in err
    # a multi-agent suite's id is no Gymnasium id: not checked here (the config's own complaint comes)
    assert main(["train", "--preset", "vmas-navigation", "--env.env-id", "balance", "--frames-per-batch", "7"]) == 2
    assert "frames_per_batch=7" in capsys.readouterr().err


def test_eval_of_a_missing_checkpoint_is_told_without_importing_torchrl(tmp_path):
    missing = tmp_path / "no" / "such"
    code = (f"import sys; from ppo_td.cli import main; rc = main(['eval', {str(missing)!r}]); "
            "print('torchrl' in sys.modules); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"no checkpoint at {missing}: pass a checkpoint file or a run folder with checkpoint.pt" in done.stderr
    assert done.stdout.strip() == "False"


def test_a_run_folder_without_a_checkpoint_says_what_it_holds(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "metrics.csv").write_text("")
    assert main(["export", str(tmp_path), "--format", "onnx"]) == 2
    err = capsys.readouterr().err
    assert f"no checkpoint at {tmp_path / 'checkpoint.pt'}" in err and "holding config.json, metrics.csv" in err
    (tmp_path / "checkpoints").mkdir()
    for n in (9, 10):
        (tmp_path / "checkpoints" / f"iter_{n:06d}.pt").write_bytes(b"")
    assert main(["eval", str(tmp_path)]) == 2
    assert f"pass its latest checkpoint, {tmp_path / 'checkpoints' / 'iter_000010.pt'}" in capsys.readouterr().err


def _report(folder, trial_seconds, confirm_seconds=0.0, trials=4):
    """``report.md`` of a fake study: ``trials`` complete trials of 3 parameters, each ``trial_seconds`` long, and
    one confirmed row (two seeds, with their episodes) after ``confirm_seconds`` of confirmation."""
    optuna = pytest.importorskip("optuna")
    from optuna.distributions import FloatDistribution

    from ppo_td.tuning.report import write_report
    from ppo_td.tuning.study import Settings
    from ppo_td.tuning.trial import Plan

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder.mkdir()
    study = optuna.create_study(direction="maximize")
    start = datetime.datetime(2026, 1, 1)
    for i in range(trials):
        params = {"a": 0.1 * i, "b": 0.9 - 0.2 * i, "c": 0.3 + 0.1 * (i % 2)}
        trial = optuna.trial.create_trial(params=params, value=float(i),
                                          distributions={k: FloatDistribution(0, 1) for k in params})
        trial.datetime_start, trial.datetime_complete = start, start + datetime.timedelta(seconds=trial_seconds)
        study.add_trial(trial)
    (folder / "confirm.jsonl").write_text(json.dumps({"seconds": confirm_seconds}) + "\n")
    for seed in (1, 2):
        run = folder / "confirm" / "trial-3" / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "episodes.csv").write_text("frames,return\n100,10\n500,20\n1000,30\n")
    confirmed = [{"name": "trial 3", "search_value": 3.0, "mean": 1.5, "std": 0.5, "seeds": [1.0, 2.0]}]
    base = get_preset("cartpole")
    plan = Plan(base=base, folder=folder, seeds=2, frames=1000)
    write_report(study, plan, Settings(), confirmed, "trial 3", dataclasses.replace(base, total_frames=1000),
                 lambda line: None)
    return (folder / "report.md").read_text()


def test_the_report_s_cost_is_in_core_minutes_for_a_short_study_and_core_hours_for_a_long_one(tmp_path):
    short = _report(tmp_path / "short", trial_seconds=18, confirm_seconds=30)  # 72 s of trials
    assert "Cost: 1.2 core-minutes of trials and 0.5 core-minutes of confirmation" in short
    assert "core-hours" not in short
    long = _report(tmp_path / "long", trial_seconds=2250, confirm_seconds=1800)  # 9,000 s of trials
    assert "Cost: 2.50 core-hours of trials and 0.50 core-hours of confirmation" in long


def test_the_report_says_importances_from_few_trials_are_unreliable(tmp_path):
    report = _report(tmp_path / "study", trial_seconds=18)
    assert (tmp_path / "study" / "importances.png").exists()
    assert "`importances.png` ranks 3 parameters from 4 complete trials: not reliable with so few" in report


def test_the_report_says_what_its_curves_show_and_what_its_table_scores(tmp_path):
    report = _report(tmp_path / "study", trial_seconds=18)
    assert (tmp_path / "study" / "curves.png").exists()
    assert "`curves.png` plots each confirmed row's mean return of its last 100 training episodes" in report
    assert "the table scores the mean return of the final deterministic evaluation" in report


def test_an_id_a_package_registers_on_demand_passes_the_early_check():
    """``BreakoutNoFrameskip-v4`` (RL Zoo's Atari ids) is registered by ale_py only when the build imports it: the
    early check asks the build's own lookup on a miss, and lets it through."""
    pytest.importorskip("ale_py")
    from ppo_td.cli.parse import _check_env_id

    _check_env_id("BreakoutNoFrameskip-v4", "gymnasium")
    with pytest.raises(ValueError, match="unknown Gymnasium env id 'BreakoutNoFrameskp-v4'"):
        _check_env_id("BreakoutNoFrameskp-v4", "gymnasium")
