"""The user's own TorchRL transforms as a recorded part (``env.transforms``, ``env.train_transforms``): applied in
training, the final evaluation, ``ppo-td eval``, resume and ``load_policy``; their state checkpointed; objects that
cannot be rebuilt refused where a run must be rebuilt."""

import dataclasses
import functools
import json

import pytest
import torch
from user_transforms import RewardBonus, ScaleObservation, scale_observation

import ppo_td
from ppo_td import EnvConfig, get_preset
from ppo_td.cli.main import main
from ppo_td.deploy import load_policy
from ppo_td.deploy.export import ExportError, export_policy
from ppo_td.envs import build_env
from ppo_td.persist import load_checkpoint, load_for_evaluation, resume_pipeline
from ppo_td.training import build_pipeline, make_eval_env, make_train_env

torch.set_num_threads(1)

SCALE, COUNT, BONUS = ("user_transforms:ScaleObservation factor=0.5", "user_transforms:CountingShift shift=1.0",
                       "user_transforms:RewardBonus bonus=2.0")


def _config(frames: int = 1024, **env):
    config = get_preset("cartpole")
    return dataclasses.replace(config, total_frames=frames, eval_episodes=2,
                               env=dataclasses.replace(config.env, num_envs=4, **env))


def _names(env) -> list[str]:
    return [type(t).__name__ for t in env.transform]


def test_command_line_tokens_are_joined_into_entries_and_bad_entries_are_refused():
    config = EnvConfig(transforms=("user_transforms:ScaleObservation", "factor=0.5", "user_transforms:RewardBonus"))
    assert config.transforms == ("user_transforms:ScaleObservation factor=0.5", "user_transforms:RewardBonus")
    with pytest.raises(ValueError, match="module:name import path"):
        EnvConfig(transforms=("ScaleObservation",))
    with pytest.raises(ValueError, match="'3' is not KEY=VALUE"):
        EnvConfig(train_transforms=("user_transforms:RewardBonus 3",))
    with pytest.raises(ValueError, match="multi-agent envs do not support"):
        EnvConfig("navigation", suite="vmas", max_episode_steps=10, transforms=(SCALE,))


def test_user_transforms_come_after_the_return_sum_and_before_normalization_and_evaluation_drops_training_ones():
    config = EnvConfig("CartPole-v1", num_envs=2, transforms=(SCALE,), train_transforms=(BONUS,),
                       normalize_observations=True)
    train = build_env(config, seed=0)
    evaluation = build_env(config, seed=0, training=False)
    try:
        assert _names(train.env) == ["FiniteCheck", "StepCounter", "RewardSum", "ScaleObservation", "RewardBonus",
                                     "RunningObsNorm"]
        assert _names(evaluation.env) == ["FiniteCheck", "StepCounter", "RewardSum", "ScaleObservation",
                                          "RunningObsNorm"]
        td = train.env.rollout(5)
        assert torch.equal(td["next", "reward"], torch.full_like(td["next", "reward"], 3.0))  # 1 + bonus
        assert torch.equal(td["next", "episode_reward"][:, -1], torch.full((2, 1), 5.0))  # raw: 5 steps of 1
    finally:
        train.close()
        evaluation.close()


def test_a_factory_that_returns_no_transform_or_takes_other_arguments_is_named():
    with pytest.raises(TypeError, match="not_a_transform returned a int"):
        build_env(EnvConfig(num_envs=1, transforms=("user_transforms:not_a_transform",)))
    with pytest.raises(ValueError, match=r"ScaleObservation\(size=3\) failed.*KEY=VALUE"):
        build_env(EnvConfig(num_envs=1, transforms=("user_transforms:ScaleObservation size=3",)))
    with pytest.raises(ValueError, match="cannot import 'no_such_module:F'"):
        build_env(EnvConfig(num_envs=1, transforms=("no_such_module:F",)))


def test_python_factories_are_recorded_and_training_returns_stay_raw():
    result = ppo_td.train(_config(), transforms=[scale_observation],
                          train_transforms=[functools.partial(RewardBonus, bonus=2.0)])
    env = result.pipeline.config.env
    assert env.transforms == ("user_transforms:scale_observation",)
    assert env.train_transforms == ("user_transforms:RewardBonus bonus=2.0",)
    assert _names(result.pipeline.env)[-2:] == ["ScaleObservation", "RewardBonus"]
    assert all(e["return"] == e["length"] for e in result.episodes)  # CartPole's raw reward: 1 a step
    assert result.evaluation.returns and all(r <= 500 for r in result.evaluation.returns)


def test_transform_objects_train_in_process_evaluate_on_a_clone_and_are_refused_with_run_dir(tmp_path):
    scale = ScaleObservation(0.5)
    result = ppo_td.train(_config(), transforms=[scale])
    assert scale.calls > 0 and result.pipeline.env.transform[-1] is scale
    assert result.pipeline.config.env.transforms == ()  # nothing recordable: the object lives in this process
    assert len(result.evaluation.returns) == 2
    with pytest.raises(ValueError, match=r"run_dir: the transforms \['ScaleObservation'\].*pass a factory"):
        ppo_td.train(_config(), transforms=[ScaleObservation(0.5)], run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="worker processes"):
        ppo_td.train(dataclasses.replace(_config(), collector=dataclasses.replace(
            _config().collector, backend="process", num_workers=2)), transforms=[ScaleObservation(0.5)])
    with pytest.raises(TypeError, match="must be a list"):
        ppo_td.train(_config(), transforms=scale)


def test_a_stateful_transform_is_checkpointed_and_used_by_eval_resume_and_load_policy(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--preset", "cartpole", "--total-frames", "2048", "--env.num-envs", "4", "--eval-episodes", "2",
            "--checkpoint-every", "1", "--env.transforms", "user_transforms:ScaleObservation", "factor=0.5",
            "user_transforms:CountingShift", "shift=1.0", "--env.train-transforms", BONUS, "--run-dir", str(run)]
    assert main(args) == 0
    config = json.loads((run / "config.json").read_text())["env"]
    assert config["transforms"] == [SCALE, COUNT] and config["train_transforms"] == [BONUS]
    state = load_checkpoint(run / "checkpoint.pt")
    assert len(state["transform_states"]) == 2 and int(state["transform_states"][1]["seen"]) > 0
    # ppo-td eval and the evaluation env: the checkpointed state, no training-only transform
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    assert "deterministic evaluation" in capsys.readouterr().out
    loaded = load_for_evaluation(run / "checkpoint.pt")
    env = make_eval_env(loaded.config.env, 1, 0, loaded.obs_stats, loaded.transform_states)
    try:
        assert _names(env)[-2:] == ["ScaleObservation", "CountingShift"]
        assert int(env.transform[-1].seen) >= int(state["transform_states"][1]["seen"])
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"\['user_transforms:CountingShift'\] hold state"):
        make_eval_env(loaded.config.env, 1, 0, loaded.obs_stats)
    # load_policy runs the observation transforms (the reward bonus is not one), in the env's order
    policy = load_policy(run, inference="torch")
    assert [type(t).__name__ for t in policy.transforms] == ["ScaleObservation", "CountingShift"]
    assert "transforms=[ScaleObservation, CountingShift]" in repr(policy)
    raw = torch.tensor([0.2, -0.4, 0.1, 0.8])
    values, _ = policy.observation_values(raw)
    assert torch.allclose(values["observation"][0], raw * 0.5 + 1.0)
    assert isinstance(policy(raw.numpy()), int)
    with pytest.raises(ExportError, match=r"transforms \['ScaleObservation', 'CountingShift'\].*load_policy"):
        export_policy(policy, "torchscript", tmp_path / "policy.pt")
    # resume: the same stack, its state restored from the checkpoint
    first = sorted((run / "checkpoints").glob("iter_*.pt"))[0]
    resumed = resume_pipeline(first)
    try:
        assert _names(resumed.pipeline.env)[-3:] == ["ScaleObservation", "CountingShift", "RewardBonus"]
        assert int(resumed.pipeline.env.transform[-2].seen) == int(
            load_checkpoint(first)["transform_states"][1]["seen"])
    finally:
        resumed.pipeline.env.close()



def test_a_transform_appended_to_a_built_env_is_kept_in_the_final_evaluation_and_refused_by_run_dir(tmp_path):
    config = _config()
    built = make_train_env(config)
    bonus = RewardBonus(100.0)
    built.env.append_transform(bonus)
    clones = []
    real = bonus.clone

    def clone():
        clones.append(real())
        return clones[-1]
    bonus.clone = clone  # our own object: keep the clones evaluation makes
    result = ppo_td.train(config, env=built)
    assert result.pipeline.appended == [bonus]
    assert len(clones) == 2 and all(c.calls > 0 for c in clones)  # deterministic and sampled evaluations stepped it
    assert all(e["return"] == e["length"] for e in result.episodes)  # after RewardSum: returns stay raw
    built = make_train_env(config)
    built.env.append_transform(RewardBonus(1.0))
    with pytest.raises(ValueError, match=r"run_dir: the env has transforms appended after it was built \(RewardBonus"):
        ppo_td.train(config, env=built, run_dir=tmp_path / "run")


def test_worker_processes_build_their_envs_with_the_recorded_transforms():
    base = _config()
    config = dataclasses.replace(base, env=dataclasses.replace(base.env, train_transforms=(BONUS,)),
                                 collector=dataclasses.replace(base.collector, backend="process", num_workers=2))
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
    assert torch.equal(batch["next", "reward"], torch.full_like(batch["next", "reward"], 3.0))  # 1 + the bonus


OBS_NORM = "torchrl.envs:ObservationNorm in_keys=['observation'] standard_normal=True"


def _obs_norm(env):
    from torchrl.envs import ObservationNorm

    return next(t for t in env.transform if isinstance(t, ObservationNorm))


def test_a_transform_needing_statistics_gets_them_from_random_steps_and_evaluation_gets_training_s(tmp_path,
                                                                                                   caplog):
    """TorchRL's ObservationNorm without loc/scale (its tutorial's init_stats step): initialized from random steps
    of the seeded env, the same for the same seed, said once; evaluation and ppo-td eval use training's values."""
    config = _config(frames=512, transforms=(OBS_NORM,))
    with caplog.at_level("WARNING", logger="ppo_td"):
        pipeline = build_pipeline(config)
    pipeline.collector.shutdown()
    said = [m for m in (r.getMessage() for r in caplog.records) if "initialized from 1,000 frames of random" in m]
    assert len(said) == 1 and "ObservationNorm" in said[0]
    loc = _obs_norm(pipeline.env).loc.clone()
    assert loc.shape == (4,) and loc.abs().sum() > 0
    again = build_env(config.env, seed=config.seed)
    assert torch.equal(_obs_norm(again.env).loc, loc)  # the seed's random steps: a rebuild gets the same values
    again.close()
    other = build_env(config.env, seed=config.seed + 1)
    assert not torch.equal(_obs_norm(other.env).loc, loc)
    other.close()
    result = ppo_td.train(config, run_dir=str(tmp_path / "run"))
    assert len(result.eval_returns) == 2
    _, _, obs_stats, states = load_for_evaluation(tmp_path / "run" / "checkpoint.pt")
    trained = states[0]["loc"]
    evaluation = make_eval_env(config.env, 2, seed=99, transform_states=states)
    assert torch.equal(_obs_norm(evaluation).loc, trained)  # training's statistics, not the eval env's steps
    evaluation.close()
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2"]) == 0


def test_a_transform_whose_statistics_cannot_be_initialized_is_refused_in_one_line(tmp_path, capsys):
    two_keys = "torchrl.envs:ObservationNorm in_keys=['observation','other']"
    assert main(["train", "--preset", "cartpole", "--env.transforms", two_keys, "--total-frames", "512",
                 "--run-dir", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "ObservationNorm needs its statistics" in err
    assert "--env.normalize-observations" in err
    assert not (tmp_path / "run").exists()
