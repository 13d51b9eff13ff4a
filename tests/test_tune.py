"""``ppo-td tune`` and ``ppo_td.tune``: a study shared by worker processes, pruning, a dead worker, Ctrl-C and the
same command continuing, repaired and refused combinations, and the winner's round trip through
``ppo-td train --config``."""

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ppo_td.config import EnvConfig, ModelConfig, from_dict
from ppo_td.presets import get_preset

torch.set_num_threads(1)
optuna = pytest.importorskip("optuna")

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "ppo_td.cli"]


def base_config(**overrides):
    """CartPole on numpy copies, a small network: a run of a few thousand frames takes about a second."""
    preset = get_preset("cartpole")
    config = dataclasses.replace(preset, env=dataclasses.replace(preset.env, num_envs=4),
                                 model=ModelConfig(hidden_sizes=(16, 16)), frames_per_batch=256, total_frames=1024,
                                 eval_episodes=2)
    return dataclasses.replace(config, **overrides)


def env_with_tests():
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def load(folder):
    from ppo_td.tuning.study import Settings, StudySpec

    spec = StudySpec(Path(folder), Settings(), 1, 1, 1)
    return optuna.load_study(study_name="ppo_td", storage=spec.storage())


def test_two_worker_processes_share_one_journal_and_the_winner_is_confirmed_and_written(tmp_path, monkeypatch):
    import ppo_td

    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    monkeypatch.setenv("PYTHONPATH", env_with_tests()["PYTHONPATH"])
    result = ppo_td.tune(base_config(), folder=tmp_path / "study", trials=3, seeds=2, frames=1024, workers=2,
                         space="tune_spaces:small", confirm=1, confirm_seeds=2, say=lambda line: None)
    study = load(tmp_path / "study")
    finished = [t for t in study.trials if t.state.is_finished() and not t.user_attrs.get("over_budget")]
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in finished) == 3  # the budget, not more, not less
    pids = {t.user_attrs["pid"] for t in finished if "pid" in t.user_attrs}
    assert len(pids) == 2 and os.getpid() not in pids  # both workers ran trials; none ran here
    for t in finished:  # each seed a normal run folder
        for seed in (1, 2):
            assert (tmp_path / "study" / "trials" / f"{t.number:04d}" / f"seed{seed}" / "config.json").exists()
    names = [row["name"] for row in result.confirmed]
    assert len(names) == 2 and "base config" in names and len(result.confirmed[0]["seeds"]) == 2
    best = from_dict(json.loads((tmp_path / "study" / "best_config.json").read_text()))
    assert best == result.best_config and best.total_frames == 1024
    for name in ("report.md", "trials.csv", "history.png", "curves.png", "tune.json", "study.log"):
        assert (tmp_path / "study" / name).exists(), name
    assert len((tmp_path / "study" / "confirm.jsonl").read_text().splitlines()) == 4  # 2 rows x 2 seeds


def test_a_diverging_trial_is_pruned_with_its_reason_and_a_refused_combination_is_skipped(tmp_path):
    import ppo_td

    for space, key in (("tune_spaces:diverging", "diverged"), ("tune_spaces:refused", "skipped")):
        sys.path.insert(0, str(ROOT / "tests"))
        try:
            result = ppo_td.tune(base_config(), folder=tmp_path / key, trials=1, seeds=1, frames=1024,
                                 space=space, confirm=1, say=lambda line: None)
        finally:
            sys.path.remove(str(ROOT / "tests"))
        (trial,) = load(tmp_path / key).trials
        assert trial.state.name == "PRUNED" and key in trial.user_attrs, trial.user_attrs
        assert result.best_config is None and result.confirmed == []
        rows = (tmp_path / key / "trials.csv").read_text()
        assert "PRUNED" in rows and key in rows.splitlines()[0]
    assert "non-finite" in load(tmp_path / "diverged").trials[0].user_attrs["diverged"].lower() or \
        "nan" in load(tmp_path / "diverged").trials[0].user_attrs["diverged"].lower()
    assert "loss.gamma=1.5" in load(tmp_path / "skipped").trials[0].user_attrs["skipped"]


def test_the_sampled_batch_and_minibatches_are_repaired_to_what_the_config_takes():
    from ppo_td.tuning.space import repaired

    base = base_config()
    config, notes = repaired(base, {"frames_per_batch": 4 * 4096, "optim.num_minibatches": 512}, frames=8192)
    assert config.frames_per_batch == 2048 and config.total_frames == 8192  # at least 4 updates
    assert config.optim.num_minibatches == 64  # the sampled minibatch size (32 frames) kept
    assert any("frames_per_batch 16384 -> 2048" in n for n in notes)
    config, notes = repaired(base, {"frames_per_batch": 96, "optim.num_minibatches": 64}, frames=8192)
    assert 96 % config.optim.num_minibatches == 0 and 96 // config.optim.num_minibatches >= 2
    assert any("optim.num_minibatches 64 -> 48" in n for n in notes)
    with pytest.raises(ValueError, match="not a config field.*optim has"):
        repaired(base, {"optim.learning_rate": 1e-3}, frames=8192)


def test_a_space_file_is_read_checked_and_sampled(tmp_path):
    from ppo_td.tuning.space import from_file

    good = tmp_path / "space.json"
    good.write_text(json.dumps({"optim.lr": {"low": 1e-4, "high": 1e-2, "log": True},
                                "model.hidden_sizes": {"choices": [[32], [64, 64]]},
                                "optim.update_epochs": {"low": 2, "high": 8, "int": True}, "loss.gamma": 0.98}))
    values = from_file(good)(optuna.trial.FixedTrial({"optim.lr": 1e-3, "model.hidden_sizes": "[64, 64]",
                                                      "optim.update_epochs": 4}), base_config())
    assert values == {"optim.lr": 1e-3, "model.hidden_sizes": [64, 64], "optim.update_epochs": 4, "loss.gamma": 0.98}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"optim.lr": {"low": 1e-2, "high": 1e-4}}))
    with pytest.raises(ValueError, match="optim.lr: needs low < high"):
        from_file(bad)
    bad.write_text(json.dumps({"optim.lrate": {"low": 1e-4, "high": 1e-2}}))
    with pytest.raises(ValueError, match="'optim.lrate', which is not a config field"):
        from_file(bad)
    bad.write_text(json.dumps({"frames_per_batch": {"low": 1000, "high": 8000}}))
    with pytest.raises(ValueError, match="frames_per_batch is a whole number: add int: true"):
        from_file(bad)
    bad.write_text(json.dumps({"optim.lr": {"low": 1e-4, "high": 1e-2, "log": True, "step": 1e-4}}))
    with pytest.raises(ValueError, match="a log scale takes no step"):
        from_file(bad)
    text = tmp_path / "space.yaml"
    text.write_text("optim.lr: {low: 1e-5, high: 1.0e-2, log: true}\n")  # YAML reads 1e-5 as a string
    with pytest.raises(ValueError, match="must be numbers.*write 1.0e-5"):
        from_file(text)


def test_bad_flags_are_refused_naming_the_fix(tmp_path):
    import ppo_td
    from ppo_td.cli.main import main

    with pytest.raises(ValueError, match="SELECT ... FOR UPDATE"):
        ppo_td.tune(base_config(), folder=tmp_path / "a", storage=f"sqlite:///{tmp_path}/s.db", workers=2)
    with pytest.raises(ValueError, match="--score-range for Acrobot-v1"):
        ppo_td.tune(base_config(), folder=tmp_path / "b", envs=("CartPole-v1", "Acrobot-v1"),
                    ranges={"CartPole-v1": (9, 500)})
    with pytest.raises(ValueError, match="--pruner wilcoxon --seeds 3: .*4 pairs before the last seed"):
        ppo_td.tune(base_config(), folder=tmp_path / "c", seeds=3, pruner="wilcoxon", trials=1)
    assert not (tmp_path / "c").exists()  # refused before the study folder records anything
    with pytest.raises(ValueError, match="--score eval .*eval_episodes=0"):
        ppo_td.tune(base_config(eval_episodes=0), folder=tmp_path / "e", trials=1)
    with pytest.raises(ValueError, match="--space my_space.py: give module:function"):
        ppo_td.tune(base_config(), folder=tmp_path / "f", space="my_space.py", trials=1)
    from ppo_td.cli.tune import parser

    assert parser().parse_known_args(["--seed", "5"])[1] == ["--seed", "5"]  # the config's seed, not --seeds
    assert main(["tune", "--resume", "runs/x"]) == 2
    assert main(["tune", "--score-range", "CartPole-v1=9", "--trials", "1"]) == 2
    ppo_td.tune(base_config(), folder=tmp_path / "d", trials=1, seeds=1, frames=1024, confirm=0, say=lambda s: None)
    with pytest.raises(ValueError, match="another plan \\(seeds differ"):
        ppo_td.tune(base_config(), folder=tmp_path / "d", trials=2, seeds=2, frames=1024, confirm=0)


def test_ctrl_c_stops_the_study_and_the_same_command_continues_it_rerunning_the_interrupted_trial(tmp_path):
    command = [*CLI, "tune", "--preset", "cartpole", "--env.num-envs", "4", "--model.hidden-sizes", "16", "16",
               "--frames-per-batch", "256", "--eval-episodes", "2", "--trials", "3", "--seeds", "2",
               "--frames", "8192", "--space", "tune_spaces:small", "--confirm", "0",
               "--study-dir", str(tmp_path / "study")]
    process = subprocess.Popen(command, cwd=tmp_path, env=env_with_tests(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (tmp_path / "study" / "trials" / "0001").exists():  # the second trial has started
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, (out, err)
    assert "the same command continues the study" in err
    first = load(tmp_path / "study").trials
    assert first[1].state.name == "FAIL" and first[1].user_attrs.get("interrupted")
    again = subprocess.run(command, cwd=tmp_path, env=env_with_tests(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "trials 1 were interrupted" in again.stdout
    trials = load(tmp_path / "study").trials
    retry = [t for t in trials if t.user_attrs.get("retry_of") == 1]
    assert len(retry) == 1 and retry[0].params == first[1].params and retry[0].state.is_finished()
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials) == 3


def test_a_worker_that_dies_leaves_its_trial_failed_and_the_study_goes_on(tmp_path, monkeypatch):
    import ppo_td

    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    monkeypatch.setenv("PYTHONPATH", env_with_tests()["PYTHONPATH"])
    monkeypatch.setenv("TUNE_MARKER", str(tmp_path / "marker"))
    ppo_td.tune(base_config(), folder=tmp_path / "study", trials=3, seeds=1, frames=1024, workers=2,
                space="tune_spaces:dies_once", confirm=0, say=lambda line: None)
    from ppo_td.tuning.study import failures, recover

    died = int((tmp_path / "marker").read_text())
    trials = {t.number: t for t in load(tmp_path / "study").trials}
    assert trials[died].state.name == "FAIL" and "exit code -9" in failures(tmp_path / "study")[died]["why"]
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials.values()) == 3
    assert "exit code -9" in (tmp_path / "study" / "trials.csv").read_text()
    assert recover(tmp_path / "study", load(tmp_path / "study")) == []  # killed, not interrupted: not run again


def test_the_best_config_round_trips_through_ppo_td_train_config(tmp_path):
    best = base_config(seed=7, total_frames=512)
    (tmp_path / "best_config.json").write_text(json.dumps(dataclasses.asdict(best)))
    done = subprocess.run([*CLI, "train", "--config", str(tmp_path / "best_config.json"), "--run-dir",
                           str(tmp_path / "run"), "--no-progress"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert from_dict(json.loads((tmp_path / "run" / "config.json").read_text())) == best
    done = subprocess.run([*CLI, "train", "--config", str(tmp_path / "best_config.json"), "--preset", "generic"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "--config" in done.stderr and "drop --preset" in done.stderr
    done = subprocess.run([*CLI, "eval", str(tmp_path / "run"), "--episodes", "2"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "deterministic" in done.stdout


def test_env_config_is_kept_where_the_space_does_not_set_it():
    from ppo_td.tuning.space import apply

    base = base_config(env=EnvConfig("Pendulum-v1", num_envs=4, normalize_observations=True))
    tuned = apply(base, {"optim.lr": 1e-3, "model.hidden_sizes": [32]})
    assert tuned.optim.lr == 1e-3 and tuned.model.hidden_sizes == (32,)
    assert tuned.env == base.env and tuned.loss == base.loss


def test_the_command_and_the_python_call_run_the_same_study(tmp_path):
    """What ppo-td tune chooses (the base config, the sampler's seed, the trials' seeds, threads) ppo_td.tune
    chooses too: the same trial, the same value, the same default study folder name."""
    import ppo_td
    from ppo_td.tuning.run import _checked, _plan_record, default_folder

    flags = ["--preset", "cartpole", "--env.num-envs", "4", "--model.hidden-sizes", "16", "16",
             "--frames-per-batch", "256", "--eval-episodes", "2", "--total-frames", "1024"]
    done = subprocess.run([*CLI, "tune", *flags, "--trials", "1", "--seeds", "1", "--frames", "1024", "--confirm", "0",
                           "--study-dir", str(tmp_path / "cli")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ppo_td.tune(base_config(), folder=tmp_path / "python", trials=1, seeds=1, frames=1024, confirm=0,
                say=lambda line: None)
    (cli,), (python,) = load(tmp_path / "cli").trials, load(tmp_path / "python").trials
    assert cli.params == python.params and cli.value == python.value
    cli_plan = json.loads((tmp_path / "cli" / "tune.json").read_text())
    assert cli_plan == json.loads((tmp_path / "python" / "tune.json").read_text())
    plan, settings = _checked(base_config(), tmp_path, 1, 1, 1024, "eval", (), {}, "tpe", "median", 1, None, None, 0,
                              0, 5, None, None)
    assert default_folder(plan, _plan_record(plan, settings, None)).name.startswith("CartPole-v1-")


def test_an_rdb_url_with_one_worker_is_a_storage_too(tmp_path):
    import ppo_td

    ppo_td.tune(base_config(), folder=tmp_path / "study", storage=f"sqlite:///{tmp_path}/study.db", trials=1,
                seeds=1, frames=1024, confirm=0, say=lambda line: None)
    study = optuna.load_study(study_name="ppo_td", storage=f"sqlite:///{tmp_path}/study.db")
    assert [t.state.name for t in study.trials] == ["COMPLETE"]


def test_a_continued_study_samples_new_parameters(tmp_path):
    import ppo_td

    kwargs = dict(folder=tmp_path / "study", seeds=1, frames=1024, sampler="random", space="tune_spaces:small",
                  confirm=0, say=lambda line: None)
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        ppo_td.tune(base_config(), trials=2, **kwargs)
        ppo_td.tune(base_config(), trials=4, **kwargs)
    finally:
        sys.path.remove(str(ROOT / "tests"))
    params = [t.params["lr"] for t in load(tmp_path / "study").trials]
    assert len(params) == 4 and len(set(params)) == 4  # the second call did not draw the first call's again


def test_a_confirmation_run_that_diverges_ranks_its_row_last_with_the_reason(tmp_path):
    from types import SimpleNamespace

    from ppo_td.config import to_dict
    from ppo_td.training import NonFiniteError
    from ppo_td.tuning.confirm import confirm_top
    from ppo_td.tuning.study import Settings
    from ppo_td.tuning.trial import Plan

    plan = Plan(base=base_config(), folder=tmp_path, seeds=1, frames=1024)
    tuned = dataclasses.replace(plan.base, optim=dataclasses.replace(plan.base.optim, lr=0.5))
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=9.0, params={}, distributions={},
                                              user_attrs={"config": to_dict(tuned)}))

    def train(config, run_dir, threads, overwrite):
        if config.optim.lr == 0.5 and config.seed == plan.base.seed + 1001:
            raise NonFiniteError("loss is nan")
        return SimpleNamespace(evaluation=SimpleNamespace(returns=[5.0], cut=[]))

    table, best, config = confirm_top(study, plan, Settings(), train, top=1, seeds=2, say=lambda line: None)
    assert [row["name"] for row in table] == ["base config", "trial 0"] and best == "base config"
    assert math.isnan(table[1]["mean"]) and "diverged: loss is nan" in table[1]["why"][0]
    again, _, _ = confirm_top(study, plan, Settings(), lambda *a, **k: pytest.fail("ran again"), top=1, seeds=2,
                              say=lambda line: None)
    assert [row["name"] for row in again] == ["base config", "trial 0"]  # the store: nothing runs twice


def test_a_study_an_earlier_version_recorded_is_still_the_same_plan():
    """The committed FrozenLake study's tune.json was written before model.scale_images and model.orthogonal_init
    existed: its base config reads back to the same record, so the same command continues the study instead of
    refusing it as another plan (config.ADDED_FIELDS)."""
    from pathlib import Path

    from ppo_td.config import from_dict, identity_dict

    path = Path(__file__).parents[1] / "benchmarks" / "results" / "tune" / "frozenlake8x8" / "tune.json"
    base = json.loads(path.read_text())["base"]
    assert "scale_images" not in base["model"] and "orthogonal_init" not in base["model"]
    assert json.loads(json.dumps(identity_dict(from_dict(base)))) == base  # as the check compares: JSON
