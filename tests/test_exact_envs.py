"""Exact or refused: every env given from Python (a Gymnasium env with or without wrappers and arguments, a vector
env, a factory in a module, in the running script, a partial, a lambda, a TorchRL env) comes back equal wherever a
run is reopened (same spaces, same first observations and rewards from the same seed), or is refused at train,
naming why and what to do. Never rebuilt differently (issue 60: a wrapper's arguments dropped on rebuild)."""

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import exact_envs
import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppo_td
from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import EnvConfig
from ppo_td.envs import gym_env
from ppo_td.envs.rebuild import NotRebuildable, env_config_for
from ppo_td.envs.verify import difference, trace

BASES = {"CartPole-v1": {}, "Pendulum-v1": {"g": 9.0}, "MountainCarContinuous-v0": {}, "Acrobot-v1": {}}


KINDS = ("clip", "plain", "recorded", "bonus", "lambda", "time", "rescale")


def _wrap(env: gym.Env, kind: str, scale: float, flag: bool) -> tuple[gym.Env, bool]:
    """``env`` in the wrapper ``kind`` names, and whether a record can hold it (its class and arguments); a kind that
    does not apply to the env's spaces leaves it as it is."""
    if kind == "clip":
        return gym.wrappers.ClipReward(env, min_reward=-scale, max_reward=scale / 2), True
    if kind == "plain":  # its argument is not in the spec (kwargs=None): a record would rebuild its default
        return exact_envs.ScaledPlain(env, scale=scale), False
    if kind == "recorded":
        return exact_envs.ScaledRecorded(env, scale=scale), True
    if kind == "bonus":  # no argument at all: Bonus(env) is the wrapper as given
        return exact_envs.Bonus(env), True
    if kind == "lambda":  # a function argument: no literal holds it
        return gym.wrappers.TransformReward(env, lambda r: r * scale), False
    if kind == "time" and isinstance(env.observation_space, gym.spaces.Box):
        return gym.wrappers.TimeAwareObservation(env, normalize_time=flag), True
    if kind == "rescale" and isinstance(env.action_space, gym.spaces.Box):
        return gym.wrappers.RescaleAction(env, min_action=-scale, max_action=scale), True
    return env, True


recipes = st.tuples(st.sampled_from(sorted(BASES)),
                    st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from([0.5, 2.0, 100.0]), st.booleans()),
                             max_size=3),
                    st.booleans())
"""An env id, up to 3 wrappers (kind, scale, a flag) and whether the env is changed after it was made."""


def build(recipe) -> tuple[gym.Env, bool]:
    """The env a recipe makes (the same each call: the test's own oracle) and whether a record can rebuild it."""
    env_id, wrappers, mutated = recipe
    env, ok = gym.make(env_id, **BASES[env_id]), True
    for kind, scale, flag in wrappers:
        env, recordable = _wrap(env, kind, scale, flag)
        ok = ok and recordable
    if mutated and env_id == "CartPole-v1":
        env.unwrapped.force_mag = 3.0  # set after gym.make: in no record
        ok = False
    return env, ok


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipes)
def test_every_gymnasium_env_object_comes_back_equal_or_is_refused(recipe):
    env, recordable = build(recipe)
    try:
        config = env_config_for(env, EnvConfig())
    except NotRebuildable as err:
        assert not recordable, f"refused an env a record can hold: {err}"
        assert "pass a factory" in str(err)  # the way out is named
        return
    finally:
        env.close()
    assert recordable, f"accepted an env no record holds: {config}"
    fresh, rebuilt = build(recipe)[0], gym_env(config)
    try:
        assert rebuilt.observation_space == fresh.observation_space and rebuilt.action_space == fresh.action_space
        assert difference(trace(fresh), trace(rebuilt)) is None
    finally:
        rebuilt.close()
        fresh.close()


def test_the_issue_s_wrapper_is_refused_at_train_and_its_recorded_twin_trains_on_its_arguments():
    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2), total_frames=64, eval_episodes=1)
    scaled = exact_envs.ScaledPlain(gym.make("Pendulum-v1"), scale=100.0)
    with pytest.raises(ValueError, match=r"wrapped in ScaledPlain, whose arguments \(scale\) Gymnasium's spec does "
                                         "not record.*its defaults, not the values given; pass a factory"):
        ppo_td.train(config, env=scaled, progress=False)
    result = ppo_td.train(config, env=exact_envs.ScaledRecorded(gym.make("Pendulum-v1"), scale=100.0), progress=False)
    assert result.pipeline.config.env.wrappers == ("exact_envs:ScaledRecorded scale=100.0",)
    assert result.eval_returns[0] < -5_000  # a Pendulum episode scaled by 100, not by 1


def test_an_env_changed_after_it_was_made_is_refused_naming_where_it_differs():
    env = gym.make("CartPole-v1")
    env.unwrapped.force_mag = 3.0
    with pytest.raises(NotRebuildable, match="rebuilt from its record, it differs from the env given in the "
                                             "observation of step 1"):
        env_config_for(env, EnvConfig())


def test_wrappers_whose_record_would_drop_an_argument_or_move_a_limit_are_refused():
    with pytest.raises(NotRebuildable, match="wrapped in NoisyRescale, whose arguments noise Gymnasium's spec does "
                                             "not record"):
        env_config_for(exact_envs.NoisyRescale(gym.make("Pendulum-v1"), noise=50.0), EnvConfig())
    with pytest.raises(NotRebuildable, match="has a TimeLimit over its wrapper ClipReward"):
        env_config_for(gym.wrappers.TimeLimit(gym.wrappers.ClipReward(gym.make("Pendulum-v1"), -1, 0), 50),
                       EnvConfig())
    with pytest.raises(NotRebuildable, match="has 2 TimeLimit wrappers"):
        env_config_for(gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 1000), EnvConfig())  # it ends at 500
    shaped = env_config_for(gym.wrappers.ReshapeObservation(gym.make("Pendulum-v1"), shape=(1, 3)), EnvConfig())
    assert shaped.wrappers == ("gymnasium.wrappers.transform_observation:ReshapeObservation shape=(1,3)",)


def test_a_recorded_wrapper_s_argument_reaches_the_rebuilt_env():
    """An oracle of its own: the rebuilt env's first rewards are 100 times a plain Pendulum's from the same seed."""
    config = env_config_for(exact_envs.ScaledRecorded(gym.make("Pendulum-v1"), scale=100.0), EnvConfig())
    rebuilt, plain = gym_env(config), gym.make("Pendulum-v1")
    rebuilt.reset(seed=3)
    plain.reset(seed=3)
    for torque in (-2.0, 0.5, 1.5):
        action = [torque]
        assert rebuilt.step(action)[1] == pytest.approx(100.0 * plain.step(action)[1], rel=1e-12)


def test_a_record_written_before_the_limit_moved_rebuilds_its_layers_as_they_were():
    from ppo_td.config import TrainConfig, from_dict, to_dict

    config = small_config(env=EnvConfig("Pendulum-v1", wrappers=("exact_envs:Bonus",), max_episode_steps=50))
    old = to_dict(config)
    del old["env"]["limit_under_wrappers"]  # a config.json written before the field
    layers = {}
    for name, env_config in (("now", config.env), ("before", from_dict(old).env)):
        env, names = gym_env(env_config), []
        while isinstance(env, gym.Wrapper):
            names.append(type(env).__name__)
            env = env.env
        layers[name] = names
    assert layers == {"now": ["Bonus", "StepLimit", "OrderEnforcing"],  # outermost first
                      "before": ["StepLimit", "Bonus", "OrderEnforcing"]}
    assert TrainConfig().env.limit_under_wrappers and not from_dict(old).env.limit_under_wrappers


def test_factories_partials_vector_envs_and_what_cannot_be_imported():
    config = env_config_for(functools.partial(exact_envs.make_pendulum, g=9.0, scale=2.0), EnvConfig())
    assert (config.env_id, config.kwargs) == ("exact_envs:make_pendulum", ("g=9.0", "scale=2.0"))
    given = exact_envs.make_pendulum(g=9.0, scale=2.0)
    assert difference(trace(given), trace(gym_env(config))) is None
    both = env_config_for(functools.partial(exact_envs.make_pendulum, scale=2.0), EnvConfig(kwargs=("scale=3.0",)))
    assert both.kwargs == ("scale=3.0",)  # the config's keywords win, as a call's win over a partial's
    with pytest.raises(NotRebuildable, match="positional arguments; give them as keywords"):
        env_config_for(functools.partial(exact_envs.make_pendulum, 9.0), EnvConfig())
    with pytest.raises(NotRebuildable, match="not a function or class at module level"):
        env_config_for(lambda: gym.make("CartPole-v1"), EnvConfig())

    def nested():
        return gym.make("CartPole-v1")
    with pytest.raises(NotRebuildable, match="not a function or class at module level"):
        env_config_for(nested, EnvConfig())
    vec = env_config_for(gym.make_vec("Pendulum-v1", num_envs=3, vectorization_mode="sync", g=9.0), EnvConfig())
    assert (vec.env_id, vec.kwargs, vec.num_envs) == ("Pendulum-v1", ("g=9.0",), 3)
    wrapped = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                           wrappers=[gym.wrappers.FlattenObservation])
    with pytest.raises(NotRebuildable, match="vector_kwargs or wrappers"):
        env_config_for(wrapped, EnvConfig())


def test_a_torchrl_env_object_trains_in_this_process_and_is_refused_a_run_folder(tmp_path):
    from torchrl.envs import GymEnv

    config = small_config(env=EnvConfig("CartPole-v1", num_envs=1), total_frames=64, eval_episodes=1)
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert ppo_td.train(config, env=env, progress=False).eval_returns  # evaluated on itself
    with pytest.raises(ValueError, match="run_dir: the env is a TorchRL env ppo_td cannot rebuild"):
        ppo_td.train(config, env=GymEnv("CartPole-v1", categorical_action_encoding=True), run_dir=tmp_path / "run",
                     progress=False)
    assert not (tmp_path / "run" / "run.json").exists()  # refused: nothing left behind


SCRIPT = """\
import dataclasses, functools, json, sys
import gymnasium as gym
import ppo_td
from ppo_td.envs import gym_env
from ppo_td.envs.verify import trace


class Scaled(gym.Wrapper, gym.utils.RecordConstructorArgs):
    def __init__(self, env, scale=1.0):
        gym.utils.RecordConstructorArgs.__init__(self, scale=scale)
        gym.Wrapper.__init__(self, env)
        self.scale = scale

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info


def make_env(env_id="Pendulum-v1", scale=1.0):
    return Scaled(gym.make(env_id), scale=scale)


{body}
"""

GUARDED = """\
if __name__ == "__main__":
    config = dataclasses.replace(ppo_td.get_preset("pendulum"), total_frames=64, frames_per_batch=32,
                                 eval_episodes=1, env=dataclasses.replace(ppo_td.get_preset("pendulum").env,
                                                                          num_envs=2))
    config = dataclasses.replace(config, optim=dataclasses.replace(config.optim, num_minibatches=2))
    env = {env}
    result = ppo_td.train(config, env=env, run_dir=sys.argv[1], progress=False)
    recorded = result.pipeline.config.env
    steps = trace(gym_env(recorded))
    json.dump({{"env_id": recorded.env_id, "kwargs": recorded.kwargs, "wrappers": recorded.wrappers,
               "rewards": [v for name, v in steps if "reward" in name]}}, open(sys.argv[2], "w"))
"""


def _script(tmp_path, body, *args, name="train_me.py", stdin=False):
    """Run a user's script (``body`` after its definitions) in a fresh process; returns the finished process."""
    path = tmp_path / name
    path.write_text(SCRIPT.format(body=textwrap.dedent(body)))
    command = [sys.executable, "-" if stdin else str(path), *map(str, args)]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          input=path.read_text() if stdin else None)


@pytest.mark.slow
@pytest.mark.parametrize("env", ["functools.partial(make_env, scale=100.0)", "Scaled(gym.make('Pendulum-v1'), "
                                 "scale=100.0)"], ids=["partial", "object"])
def test_a_script_s_own_factory_and_wrapper_are_rebuilt_in_another_process(tmp_path, env, capsys):
    run, out = tmp_path / "run", tmp_path / "made.json"
    done = _script(tmp_path, GUARDED.format(env=env), run, out)
    assert done.returncode == 0, done.stderr
    made = json.loads(out.read_text())
    script = str((tmp_path / "train_me.py").resolve())
    assert made["env_id"].startswith(script) or made["wrappers"][0].startswith(f"{script}:Scaled scale=100.0")
    config = ppo_td.persist.checkpoint_config(ppo_td.persist.load_checkpoint(run))  # here: another process
    rebuilt = [v for name, v in trace(gym_env(config.env)) if "reward" in name]
    assert rebuilt == made["rewards"] and min(rebuilt) < -50  # scaled by 100, as in the script
    assert main(["eval", str(run), "--episodes", "1"]) == 0  # ppo-td eval, load_policy, --resume: the same record
    assert "Box([-1. -1. -8.], [1. 1. 8.], (3,), float32)" in repr(ppo_td.load_policy(str(run)))


@pytest.mark.slow
def test_a_script_that_trains_when_imported_is_refused_at_train_naming_the_guard(tmp_path):
    done = _script(tmp_path, GUARDED.format(env="make_env").replace('if __name__ == "__main__":\n', "if True:\n"),
                   tmp_path / "run", tmp_path / "made.json")
    assert done.returncode != 0
    assert ('make_env is defined in the script train_me.py' in done.stderr
            and 'outside `if __name__ == "__main__":` (line' in done.stderr)
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.slow
def test_a_factory_reading_what_only_the_main_block_sets_is_refused_with_the_fix(tmp_path):
    body = GUARDED.format(env="reads_args").replace('if __name__ == "__main__":\n',
                                                      'def reads_args():\n    return make_env(ARGS)\n\n\n'
                                                      'if __name__ == "__main__":\n    ARGS = "Pendulum-v1"\n')
    done = _script(tmp_path, body, tmp_path / "run", tmp_path / "made.json")
    assert done.returncode != 0
    assert "NameError: name 'ARGS' is not defined" in done.stderr and "keyword arguments" in done.stderr


@pytest.mark.slow
def test_a_factory_of_an_interactive_session_trains_there_and_is_refused_a_run_folder(tmp_path):
    body = GUARDED.format(env="make_env").replace('if __name__ == "__main__":\n', "if True:\n")
    done = _script(tmp_path, body.replace("run_dir=sys.argv[1], ", ""), stdin=True)
    assert "IndexError" in done.stderr and "Error: run_dir" not in done.stderr  # trained; then sys.argv[2] is missing
    done = _script(tmp_path, body, tmp_path / "run", tmp_path / "made.json", stdin=True)
    assert done.returncode != 0 and "defined in a notebook or an interactive session" in done.stderr


@pytest.mark.slow
def test_a_recorded_script_that_is_gone_is_named(tmp_path, capsys):
    run = tmp_path / "run"
    assert _script(tmp_path, GUARDED.format(env="make_env"), run, tmp_path / "made.json").returncode == 0
    (tmp_path / "train_me.py").rename(tmp_path / "moved.py")
    assert main(["eval", str(run), "--episodes", "1"]) == 2
    assert "train_me.py is not there" in capsys.readouterr().err


@pytest.mark.slow
def test_what_only_the_command_line_or_the_main_block_gives_is_refused_at_train(tmp_path):
    """A top-level parse_args() needing words, and a transform reading the main block's names: both fail where the
    script is imported elsewhere (ppo-td eval), so both are refused at train."""
    argv = GUARDED.format(env="make_env").replace(
        'if __name__ == "__main__":\n', 'import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('
        '"run")\nparser.add_argument("out")\nARGS = parser.parse_args()\n\nif __name__ == "__main__":\n')
    done = _script(tmp_path, argv, tmp_path / "run", tmp_path / "made.json")
    assert done.returncode != 0 and "SystemExit" in done.stderr and "keep what needs them in that block" in done.stderr
    transform = GUARDED.format(env="make_env").replace(
        'if __name__ == "__main__":\n', 'def scaled():\n    from torchrl.envs import RewardScaling\n    return '
        'RewardScaling(0.0, SCALE)\n\n\nif __name__ == "__main__":\n    SCALE = 2.0\n').replace(
        "progress=False)", "progress=False, transforms=[scaled])")
    done = _script(tmp_path, transform, tmp_path / "run2", tmp_path / "made.json")
    assert done.returncode != 0 and "env.transforms[0] scaled" in done.stderr and "NameError" in done.stderr


@pytest.mark.slow
def test_an_id_the_script_registers_is_recorded_and_the_registry_left_to_the_running_script(tmp_path):
    body = GUARDED.format(env="gym.make('Scripted-v0')").replace(
        'if __name__ == "__main__":\n', 'gym.register("Scripted-v0", entry_point=lambda: make_env(scale=3.0), '
        'max_episode_steps=200)\n\n\nif __name__ == "__main__":\n')
    body += ('    assert gym.spec("Scripted-v0").entry_point.__module__ == "__main__"  # not the fresh copy\'s\n')
    done = _script(tmp_path, body, tmp_path / "run", tmp_path / "made.json")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "made.json").read_text())["env_id"].endswith("train_me.py:Scripted-v0")


def test_a_wrapper_recorded_with_arguments_is_a_config_value_the_command_line_takes(tmp_path, capsys):
    assert main(["train", "--preset", "cleanrl", "--env.env-id", "Pendulum-v1", "--env.num-envs", "2",
                 "--frames-per-batch", "32", "--optim.num-minibatches", "2", "--total-frames", "32",
                 "--eval-episodes", "1", "--no-progress", "--run-dir", str(tmp_path),
                 "--env.wrappers", "exact_envs:ScaledRecorded", "scale=100.0"]) == 0
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["env"]["wrappers"] == ["exact_envs:ScaledRecorded scale=100.0"]
    returns = json.loads((tmp_path / "summary.json").read_text())["eval_returns"]
    assert returns and returns[0] < -5_000


def test_a_factory_recorded_by_its_module_needs_no_check_and_makes_the_same_env(monkeypatch):
    """A module's factory is imported the same everywhere: recorded as it is (no check runs), each copy made by
    calling it."""
    from ppo_td.envs import rebuild

    def never(*args, **kwargs):
        raise AssertionError("a module's factory needs no check")

    monkeypatch.setattr(rebuild, "check_rebuilds", never)
    config = env_config_for(exact_envs.make_pendulum, EnvConfig(kwargs=("scale=2.0",)))
    assert config.env_id == "exact_envs:make_pendulum"
    assert difference(trace(exact_envs.make_pendulum(scale=2.0)), trace(gym_env(config))) is None


def test_the_record_check_says_what_it_could_not_compare(caplog):
    class Noisy(gym.Wrapper):  # draws from numpy's global RNG, not from its seed: copies differ
        def step(self, action):
            import numpy as np

            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, reward + np.random.random(), terminated, truncated, info

    Noisy.__module__, Noisy.__qualname__ = "exact_envs", "Noisy"  # as if defined in the module
    exact_envs.Noisy = Noisy
    try:
        with caplog.at_level("WARNING", logger="ppo_td"):
            env_config_for(Noisy(gym.make("CartPole-v1")), EnvConfig())
        assert "two copies of it differ from the same seed" in caplog.text
    finally:
        del exact_envs.Noisy


def test_what_a_path_to_a_script_imports_is_the_script_not_its_main_block(tmp_path):
    from ppo_td.envs.imports import import_from_cwd

    script = tmp_path / "mine.py"
    script.write_text("VALUE = 1\nif __name__ == '__main__':\n    raise SystemExit('the main block ran')\n")
    module = import_from_cwd(str(script))
    assert module.VALUE == 1 and module.__name__ != "__main__"
    assert import_from_cwd(str(script)) is module  # once per process
    assert Path(module.__file__).resolve() == script.resolve()
