"""Resume exactly: a run interrupted at iteration k and resumed equals the uninterrupted run, bit for bit."""

import dataclasses
import math

import gymnasium as gym
import pytest

from conftest import small_config
from ppo_td.config import CollectorConfig, EnvConfig
from ppo_td.persist import Checkpointer, load_checkpoint, resume_pipeline
from ppo_td.presets import get_preset
from ppo_td.training import run, train

TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds"}


def stop_after(run_dir, iteration):
    """A callback that checkpoints into ``run_dir`` and stops the run after ``iteration`` (as Ctrl-C would)."""
    stopper = Checkpointer(run_dir, every=0, keep=2)

    def callback(metrics, pipeline):
        if metrics["iteration"] == iteration:
            stopper.request_stop()
        stopper(metrics, pipeline)

    return callback


def _strip(history):
    return [{k: v for k, v in m.items() if k not in TIMING} for m in history]


def _equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            same = x[key] == y[key] or (isinstance(x[key], float) and math.isnan(x[key]) and math.isnan(y[key]))
            assert same, f"iteration {x['iteration']}: {key} {x[key]!r} != {y[key]!r}"


def _interrupt_and_resume(config, run_dir, at):
    """Run ``config`` whole, then interrupted after iteration ``at`` and resumed: (full, first, second, resumed)."""
    full = train(config)
    first = train(config, callbacks=[stop_after(run_dir, at)])
    assert first.stopped and len(first.history) == at and first.eval_returns == []
    assert load_checkpoint(run_dir)["iteration"] == at
    resumed = resume_pipeline(run_dir / "checkpoint.pt")
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in first.history + second.history] == [m["iteration"] for m in full.history]
    return full, first, second, resumed


@pytest.mark.slow  # three short runs through torch.compile
def test_a_run_compile_auto_compiled_resumes_compiled_and_exactly(tmp_path, monkeypatch):
    """compile='auto' resolved on resume as at the start (its loss built from the config, the collector given it):
    a run that compiled goes on compiled, its policy step too, and ends as the uninterrupted one did."""
    from ppo_td.training import pipeline

    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 1)  # (a long run's resolution, on a short one)
    config = small_config(env=EXACT_ENVS["CartPole-v1"], total_frames=64 * 4, eval_episodes=2)
    full, first, second, resumed = _interrupt_and_resume(config, tmp_path, 2)
    assert full.pipeline.compiled and first.pipeline.compiled and resumed.pipeline.compiled and resumed.exact
    assert resumed.pipeline.collector.fast_policy.forward is not resumed.pipeline.collector.fast_policy.net
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns
    # the checkpoint's choice, not a new one: at the default threshold this short run would now be eager
    monkeypatch.setattr(pipeline, "COMPILE_PAYS_STEPS", 50_000)
    again = resume_pipeline(tmp_path / "checkpoint.pt")
    assert again.pipeline.compiled and again.exact
    again.pipeline.collector.shutdown()
    # where torch.compile fails at the resume: eager, and the resume says it is not bit for bit
    from ppo_td.persist import checkpoint

    monkeypatch.setattr(checkpoint, "compile_problem", lambda: "InvalidCxxCompiler: no C++ compiler")
    lost = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not lost.pipeline.compiled and not lost.exact and "InvalidCxxCompiler" in lost.why
    assert lost.pipeline.collector.fast_policy.forward is lost.pipeline.collector.fast_policy.net
    lost.pipeline.collector.shutdown()


def _cartpole_with_a_lambda(**kwargs):
    from gymnasium.envs.classic_control import CartPoleEnv

    env = CartPoleEnv(**kwargs)
    return gym.wrappers.TransformObservation(env, lambda obs: obs * 1.0, env.observation_space)


class CountingWrapper(gym.Wrapper):
    """A user wrapper with state of its own and no state_dict: ppo_td cannot know what it holds."""

    def __init__(self, env):
        super().__init__(env)
        self.count = 0

    def step(self, action):
        self.count += 1
        return self.env.step(action)


def _cartpole_counted(**kwargs):
    from gymnasium.envs.classic_control import CartPoleEnv

    return CountingWrapper(CartPoleEnv(**kwargs))


gym.register("ppo_td_test/LambdaCartPole-v0", entry_point=_cartpole_with_a_lambda, max_episode_steps=200)
gym.register("ppo_td_test/CountedCartPole-v0", entry_point=_cartpole_counted, max_episode_steps=200)
EXACT_ENVS = {
    "CartPole-v1": EnvConfig("CartPole-v1", num_envs=4),  # numpy-vectorized
    "Pendulum-v1": EnvConfig("Pendulum-v1", num_envs=2, normalize_observations=True, normalize_rewards=True),
    "trading": EnvConfig("examples.trading:ppo_td/Trading-v0", num_envs=4),  # the state_dict protocol
    # a wrapper holding a lambda cannot be pickled: it used to crash the run at its first checkpoint
    "lambda wrapper": EnvConfig("ppo_td_test/LambdaCartPole-v0", num_envs=4, vectorization="sync"),
    # env.kwargs and env.wrappers (from the config: the resume rebuilds them)
    "kwargs and wrappers": EnvConfig("Pendulum-v1", num_envs=2, kwargs=("g=5.0",),
                                     wrappers=("gymnasium.wrappers:FlattenObservation",)),
}


@pytest.mark.parametrize("name", list(EXACT_ENVS))
def test_interrupted_and_resumed_run_matches_uninterrupted(tmp_path, name):
    """Numpy CartPole, a classic-control env, a user env with state_dict() and a wrapper holding a lambda: the
    checkpoint records every simulator as plain data and the resumed run equals the uninterrupted one."""
    config = small_config(env=EXACT_ENVS[name], total_frames=64 * 8, eval_episodes=3)
    full, first, second, resumed = _interrupt_and_resume(config, tmp_path, 3)
    assert resumed.exact and resumed.why == "" and "exactly" in resumed.describe()
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns and second.eval_returns_sampled == full.eval_returns_sampled
    assert first.episodes + second.episodes == full.episodes


def test_a_gsde_run_resumes_exactly_with_its_noise_matrices_and_their_schedule(tmp_path):
    """The fast collector carries each copy's gSDE matrix; the checkpoint holds it and the count of steps to the next
    draw (every 5 steps: not a divisor of the 32 steps per rollout, so the count matters)."""
    from ppo_td.config import ModelConfig

    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=40), total_frames=64 * 6,
                          eval_episodes=2, model=ModelConfig(hidden_sizes=(16, 16), exploration="gsde",
                                                             log_std_init=-1.0, sde_sample_every=5))
    full, first, second, resumed = _interrupt_and_resume(config, tmp_path, 3)
    assert resumed.exact and "exactly" in resumed.describe()
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns


def test_a_gsde_checkpoint_from_before_the_noise_schedule_was_saved_still_resumes(tmp_path):
    """Checkpoints written before ExplorationNoise had state lack its extra-state key: the resume takes the fresh
    env's instead of refusing the checkpoint."""
    import torch

    from ppo_td.config import ModelConfig

    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=40), total_frames=64 * 3,
                          eval_episodes=1, model=ModelConfig(hidden_sizes=(16, 16), exploration="gsde"))
    train(config, callbacks=[stop_after(tmp_path, 1)])
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    old = {k: v for k, v in state["env_state"].items() if not k.endswith("_extra_state")}
    assert len(old) < len(state["env_state"])
    torch.save({**state, "env_state": old}, tmp_path / "checkpoint.pt")
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in second.history] == [2, 3]


def test_a_wrapper_with_unknown_state_resumes_with_fresh_episodes_and_names_it(tmp_path):
    config = small_config(env=EnvConfig("ppo_td_test/CountedCartPole-v0", num_envs=4, vectorization="sync"),
                          total_frames=64 * 3, eval_episodes=1)
    _, _, second, resumed = _interrupt_and_resume(config, tmp_path, 1)
    assert load_checkpoint(tmp_path)["snapshot"]["exact"] is False
    assert not resumed.exact and "CountingWrapper" in resumed.describe() and "state_dict()" in resumed.why
    assert len(second.eval_returns) == 1


def test_periodic_checkpoints_keep_the_last_k(tmp_path):
    train(small_config(total_frames=64 * 7, eval_episodes=0), callbacks=[Checkpointer(tmp_path, every=2, keep=2)])
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["iter_000004.pt", "iter_000006.pt"]
    assert load_checkpoint(tmp_path / "checkpoint.pt")["iteration"] == 6


def test_a_resume_that_cannot_be_exact_says_so_and_finishes(tmp_path):
    """TorchRL's Collector keeps its current step where no public API reaches: the resume continues from the
    last completed iteration with fresh episodes, says so, and completes the run's budget."""
    config = small_config(total_frames=64 * 5, eval_episodes=2, collector=CollectorConfig(step_loop="torchrl"))
    stop_at_2 = stop_after(tmp_path, 2)
    train(config, callbacks=[stop_at_2])
    resumed = resume_pipeline(tmp_path / "checkpoint.pt")
    assert not resumed.exact and "fresh episodes" in resumed.describe()
    second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    assert [m["iteration"] for m in second.history] == [3, 4, 5] and second.history[-1]["frames"] == 64 * 5
    assert len(second.eval_returns) == 2


def test_rotation_keeps_the_newest_by_iteration_number_past_six_digits(tmp_path):
    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(small_config())
    checkpointer = Checkpointer(tmp_path, every=1, keep=2)
    for iteration in (999_998, 999_999, 1_000_000, 1_000_001):
        checkpointer.save(pipeline, frames=iteration * 64, iteration=iteration)
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["iter_1000000.pt", "iter_1000001.pt"]
    assert load_checkpoint(tmp_path)["iteration"] == 1_000_001
    pipeline.collector.shutdown()


def test_checkpoints_follow_the_umask_and_stale_temporaries_are_removed(tmp_path):
    import os

    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(small_config())
    (tmp_path / "checkpoints").mkdir(parents=True)
    dead = tmp_path / "checkpoints" / ".iter_000003.pt.999999999.x1y2.tmp"  # a writer that no longer runs
    live = tmp_path / "checkpoints" / f".iter_000004.pt.{os.getppid()}.x1y2.tmp"  # a writer that still runs
    dead.write_bytes(b"partial")
    live.write_bytes(b"partial")
    old = os.umask(0o027)
    try:
        checkpointer = Checkpointer(tmp_path, every=1, keep=2)
        path = checkpointer.save(pipeline, frames=64, iteration=1)
    finally:
        os.umask(old)
    assert not dead.exists() and live.exists()
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    pipeline.collector.shutdown()


@pytest.mark.slow
def test_mujoco_resume_is_exact(tmp_path):
    """HalfCheetah: MuJoCo's integration state and the kinematics the env reads before a step are recorded, and
    the resumed run equals the uninterrupted one."""
    pytest.importorskip("mujoco")
    base = get_preset("halfcheetah")
    config = dataclasses.replace(base, frames_per_batch=256, total_frames=256 * 3, eval_episodes=1,
                                 optim=dataclasses.replace(base.optim, num_minibatches=4, update_epochs=1))
    full, first, second, resumed = _interrupt_and_resume(config, tmp_path, 1)
    assert resumed.exact, resumed.why
    _equal(_strip(first.history + second.history), _strip(full.history))
    assert second.eval_returns == full.eval_returns


@pytest.mark.slow
def test_box2d_resume_says_it_is_not_exact_and_it_is_not(tmp_path):
    """LunarLander: a Box2D world has no readable state. The resume says so, names the env, runs to the end,
    and its batches indeed differ from the uninterrupted run's (fresh episodes)."""
    pytest.importorskip("Box2D")
    config = small_config(env=EnvConfig("LunarLander-v3", num_envs=2), total_frames=64 * 3, eval_episodes=1)
    full, first, second, resumed = _interrupt_and_resume(config, tmp_path, 1)
    assert not resumed.exact and "LunarLander" in resumed.why and "fresh episodes" in resumed.describe()
    assert _strip(second.history) != _strip(full.history[1:])
    assert len(second.eval_returns) == 1


class StateWithAHook(gym.Wrapper):
    """A user wrapper whose state_dict() returns something a checkpoint cannot store (a function)."""

    def state_dict(self):
        return {"hook": lambda: 0}

    def load_state_dict(self, state):
        pass


SWITCH = {"wrap": False}  # what the next env of ppo_td_test/Switch-v0 is wrapped in


def _switchable(**kwargs):
    from gymnasium.envs.classic_control import CartPoleEnv

    env = CartPoleEnv(**kwargs)
    return gym.wrappers.TransformReward(env, lambda r: r) if SWITCH["wrap"] else env


gym.register("ppo_td_test/HookState-v0", entry_point=lambda: StateWithAHook(
    __import__("gymnasium").envs.classic_control.CartPoleEnv()), max_episode_steps=200)
gym.register("ppo_td_test/Switch-v0", entry_point=_switchable, max_episode_steps=200)


def test_an_unstorable_user_state_is_said_at_the_start_and_the_run_goes_on(tmp_path, capsys, caplog):
    import json

    from ppo_td.cli import main

    args = ["train", "--preset", "cleanrl", "--env.env-id", "ppo_td_test/HookState-v0", "--env.num-envs", "2",
            "--env.vectorization", "sync", "--frames-per-batch", "64", "--total-frames", "256",
            "--model.hidden-sizes", "8", "--eval-episodes", "1", "--no-progress", "--checkpoint-every", "1",
            "--run-dir", str(tmp_path)]
    assert main(args) == 0
    assert "fresh episodes" not in capsys.readouterr().out  # said in run.json and on resume, not on every run
    resume = json.loads((tmp_path / "run.json").read_text())["resume"]
    assert resume["exact"] is False and "holds a function" in resume["why"]
    assert sum("checkpoints without env state" in r.message for r in caplog.records) == 1  # said once, not 4x


def test_a_resume_after_the_wrappers_changed_continues_with_fresh_episodes_and_says_why(tmp_path):
    config = small_config(env=EnvConfig("ppo_td_test/Switch-v0", num_envs=2, vectorization="sync"),
                          total_frames=64 * 3, eval_episodes=1)
    train(config, callbacks=[stop_after(tmp_path, 1)])
    SWITCH["wrap"] = True
    try:
        resumed = resume_pipeline(tmp_path / "checkpoint.pt")
        second = run(resumed.pipeline, frames=resumed.frames, iteration=resumed.iteration)
    finally:
        SWITCH["wrap"] = False
    assert not resumed.exact and "wrappers changed since the checkpoint" in resumed.why
    assert [m["iteration"] for m in second.history] == [2, 3]


def test_a_resume_that_samples_the_policy_elsewhere_says_so(tmp_path):
    """The numpy policy and torch's round differently: a run resumed with the other collector.inference is not
    exact, and says why; with the same setting it is."""
    train(small_config(total_frames=64 * 4, eval_episodes=0), callbacks=[stop_after(tmp_path, 2)])
    same = resume_pipeline(tmp_path / "checkpoint.pt")
    assert same.exact
    same.pipeline.collector.shutdown()
    other = resume_pipeline(tmp_path / "checkpoint.pt", collector={"inference": "torch"})
    assert not other.exact and "sampled its policy in numpy, this one samples it in torch" in other.why
    other.pipeline.collector.shutdown()
