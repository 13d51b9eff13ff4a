"""``python -m benchmarks returns``: runs go to the result store once, a rerun continues, a cut line or a failed run
is run again, the report reads the store (tables, rliable's intervals, plots)."""

import json
import subprocess

import gymnasium as gym
import numpy as np
import pytest
import torch

from benchmarks.returns import run, suites
from benchmarks.returns.suites import SUITES, Task

torch.set_num_threads(1)

TINY = [Task("CartPole-v1", "cartpole", 2048)]


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(SUITES, "tiny", TINY)
    return "tiny"


@pytest.mark.slow
def test_runs_are_stored_once_a_rerun_continues_and_the_report_reads_them(tiny, tmp_path, capsys):
    store = tmp_path / "store"
    assert run.main([tiny, "--seeds", "1", "2", "--store", str(store)]) == 0
    runs = [json.loads(line) for line in (store / "runs.jsonl").read_text().splitlines()]
    assert sorted((r["library"], r["seed"]) for r in runs) == [("ppo_td", 1), ("ppo_td", 2), ("sb3", 1), ("sb3", 2)]
    for r in runs:  # what a run's line holds: how to redo it, where it came from, its curve and its numbers
        assert r["command"].startswith("python -m benchmarks worker ") and r["commit"] and r["frames"] == 2048
        assert r["episodes"] and r["last100"] == pytest.approx(
            sum(e[2] for e in r["episodes"][-100:]) / len(r["episodes"][-100:]), rel=1e-3)
        assert len(r["eval_returns"]) == 10
    out = capsys.readouterr().out
    assert "4 to run" in out and "[4/4]" in out and "left, about" in out

    lines = (store / "runs.jsonl").read_text().splitlines()
    (store / "runs.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])  # a crash cut the last line
    assert run.main([tiny, "--seeds", "1", "2", "--store", str(store)]) == 0
    assert "3 in the store" in capsys.readouterr().out  # the cut run is run again, the others are not
    assert run.main([tiny, "--seeds", "1", "2", "--store", str(store)]) == 0
    assert "0 to run" in capsys.readouterr().out

    report = run.main([tiny, "--report", "--store", str(store)])
    text = (store / "report.md").read_text()
    assert report == 0 and "| CartPole-v1 | ppo_td | 2 |" in text and "| CartPole-v1 | Stable-Baselines3 | 2 |" in text
    assert "P(ppo_td run > SB3 run)" in text and "IQM [95% CI]" in text and "RL Zoo" in text
    assert (store / "tiny_curves.png").stat().st_size > 0 and (store / "tiny_profile.png").stat().st_size > 0
    assert "CartPole-v1|" in (store / "random.json").read_text()  # the random policy's score, measured once

    # an ablation: the same env on another preset, stored under it and reported beside, not in the aggregates
    assert run.main([tiny, "--seeds", "1", "--libraries", "ppo_td", "--settings", "generic",
                         "--store", str(store)]) == 0
    ablation = suites.read_store(store)[-1]
    assert ablation["settings"] == "generic" and "on the generic preset (the suite's: cartpole)" in ablation["notes"]
    assert run.main([tiny, "--report", "--store", str(store)]) == 0
    text = (store / "report.md").read_text()
    assert "| | ppo_td on `generic` | 1 |" in text and "| CartPole-v1 | ppo_td | 2 |" in text


def test_a_failed_or_timed_out_run_is_not_stored_and_the_exit_code_says_so(tiny, tmp_path, monkeypatch, capsys):
    class Worker:  # a worker process that hangs (communicate times out), then one that dies, then one that prints
        behaviour = iter(["hang", "die", "garbage"])  # no result line

        def __init__(self, command, **kwargs):
            self.args, self.how, self.returncode, self.killed = command, next(Worker.behaviour), None, False

        def communicate(self, timeout=None):
            if self.how == "hang" and not self.killed:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = {"hang": -9, "die": 3, "garbage": 0}[self.how]
            return ("Traceback...\n" if self.how == "garbage" else ""), "worker stderr"

        def kill(self):
            self.killed = True

    monkeypatch.setattr(run.subprocess, "Popen", Worker)
    assert run.main([tiny, "--seeds", "1", "2", "3", "--libraries", "ppo_td", "--timeout", "5",
                         "--store", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "seed 1: over --timeout 5 s" in err and "seed 2 failed (exit 3)" in err and "worker stderr" in err
    assert "seed 3: the worker printed no result line" in err and "3 runs failed" in err
    assert suites.read_store(tmp_path) == []


def test_a_suite_whose_budget_demands_it_runs_three_seeds_unless_told(tiny, tmp_path, monkeypatch, capsys):
    started = []

    class Worker:  # records what it was asked to run, then dies (nothing is stored)
        def __init__(self, command, **kwargs):
            started.append(json.loads(command[-1])["seed"])
            self.returncode = 1

        def communicate(self, timeout=None):
            return "", "stopped by the test"

    monkeypatch.setattr(run.subprocess, "Popen", Worker)
    monkeypatch.setitem(suites.SEEDS, tiny, [1, 2, 3])
    assert run.main([tiny, "--libraries", "ppo_td", "--store", str(tmp_path)]) == 1
    assert started == [1, 2, 3] and "3 to run" in capsys.readouterr().out
    started.clear()
    assert run.main([tiny, "--libraries", "ppo_td", "--seeds", "4", "--store", str(tmp_path)]) == 1
    assert started == [4]
    assert suites.SEEDS["mujoco"] == [1, 2, 3] and "minatar" not in suites.SEEDS and "minatar" in SUITES


def test_a_run_of_many_episodes_keeps_its_curve_and_the_report_plots_the_same_means():
    import numpy as np

    from benchmarks.returns.report import _curve

    rng = np.random.default_rng(0)
    episodes = [[10 * (i + 1), 0.01 * (i + 1), float(r)] for i, r in enumerate(rng.normal(size=9_000).round(4))]
    raw = {"episodes": episodes, "last100": run.last_mean([e[2] for e in episodes])}
    kept = suites.compact(dict(raw))
    assert "episodes" not in kept and kept["episodes_total"] == 9_000 and len(kept["curve"]) == suites.CURVE_POINTS
    assert kept["curve"][-1][:2] == episodes[-1][:2] and kept["curve"][-1][2] == pytest.approx(raw["last100"], abs=1e-4)
    grid = np.array([point[0] for point in kept["curve"][::97]], dtype=float)  # where a kept point ends
    assert np.allclose(_curve(kept, grid, 0), _curve(raw, grid, 0), atol=1e-4)
    few = {"episodes": episodes[:50]}
    assert suites.compact(few) is few  # 2,000 or fewer: every episode kept


def test_bad_flags_are_refused_naming_the_fix(tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run.main([tiny, "--jobs", "64"])
    assert "--jobs 64: between 1 and this machine's" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["classic", "--envs", "Pong"])
    assert "--envs ['Pong']: not in classic" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main([tiny, "--settings", "cartpol"])
    assert "--settings: unknown preset 'cartpol'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["multiagent", "--settings", "generic"])
    assert "cannot be swapped (multiagent)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main([tiny, "--report", "--store", str(tmp_path / "nowhere")])
    assert "holds no run of tiny; run them first" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_every_suite_task_makes_a_valid_config_that_travels_to_the_worker_whole():
    from ppo_td.config import from_dict, to_dict
    from ppo_td.presets import get_preset

    for tasks in (t for name, t in SUITES.items() if name != "tiny"):
        for task in tasks:
            config = suites.config_of(task)
            assert config.total_frames == task.frames and from_dict(json.loads(json.dumps(to_dict(config)))) == config
            assert config.optim == get_preset(task.settings).optim and config.loss == get_preset(task.settings).loss
            assert config.env.multiagent or config.env.env_id == task.env_id


@pytest.mark.slow
def test_sigterm_ends_the_workers_and_stores_nothing_unfinished(tmp_path):
    import signal
    import sys
    import time

    import psutil

    proc = subprocess.Popen([sys.executable, "-m", "benchmarks", "returns", "classic", "--envs", "CartPole-v1",
                             "--libraries", "ppo_td", "--seeds", "1", "--store", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = psutil.Process(proc.pid).children()
    assert workers, "no worker process started"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "the same command continues" in err
    _, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive and suites.read_store(tmp_path) == []


def test_the_committed_runs_are_still_found_after_config_fields_were_added():
    """A run's key digests its whole config, so a field added to the config (with a default that changes nothing)
    would orphan every stored run; ppo_td.config.ADDED_FIELDS leaves such fields out at their defaults. The committed
    runs of presets unchanged since they ran (model.scale_images and model.orthogonal_init came after them) are
    found under the suites as they are now."""

    store = suites.STORE
    tasks = {(t.env_id, t.settings): t for suite in SUITES.values() for t in suite}
    unchanged = {"cartpole-zoo", "acrobot", "mountaincar", "pendulum", "lunarlander", "hopper", "walker2d"}
    runs = [r for r in suites.read_store(store) if r["settings"] in unchanged]
    assert len(runs) >= 60
    for r in runs:
        assert r["key"] == suites.key_of(tasks[r["env"], r["settings"]], r["library"], r["seed"]), r["key"]
    minigrid = tasks["minigrid:MiniGrid-Empty-Random-5x5-v0", "minigrid"]  # its preset sets a later field: the
    before = [r for r in suites.read_store(store)  # runs from before it (images scaled by 1/255) are not its runs
              if r["env"] == minigrid.env_id and "scale_images" not in r["command"]]
    assert len(before) == 5 and all(r["key"] != suites.key_of(minigrid, "ppo_td", r["seed"]) for r in before)


def test_sb3_trains_on_the_env_ppo_td_trains_on_kwargs_and_wrappers_included():
    """Each task SB3 runs beside gets the env ppo_td's side makes: the same observation and action spaces (the ant
    preset's ``include_cfrc_ext_in_observation=False`` gives 27 numbers, Ant-v5's default 105)."""
    from benchmarks.common.worker import _sb3_env_id
    from ppo_td.envs import gym_env

    checked = 0
    for task in (t for name, tasks in SUITES.items() if name != "tiny" for t in tasks if t.sb3):
        config = suites.config_of(task)
        if config.env.atari or task in SUITES["games"]:  # (games: the next test)
            continue
        try:
            ours = gym_env(config.env)
        except (ImportError, gym.error.DependencyNotInstalled):
            continue  # box2d or mujoco not installed here
        made = _sb3_env_id(config)
        theirs = made() if callable(made) else gym.make(made)
        try:
            assert theirs.observation_space == ours.observation_space, task.env_id
            assert theirs.action_space == ours.action_space, task.env_id
        finally:
            ours.close()
            theirs.close()
        checked += 1
    assert checked >= 5


def test_sb3_steps_its_envs_without_a_render_mode_as_ppo_td_does():
    """SB3's make_vec_env gives an env id render_mode='rgb_array' unless told, and LunarLander then adds a Box2D body
    for each engine puff, which its world steps: the worker's SB3 envs have no render mode, as ppo_td's have none,
    and step through as many bodies."""
    import dataclasses

    import numpy as np

    from benchmarks.common.worker import sb3_vec_env, turn_based
    from ppo_td.envs import gym_env

    task = next(t for t in SUITES["box2d"] if t.env_id == "LunarLander-v3")
    config = suites.config_of(task)
    vec = sb3_vec_env(config, 2, seed=3)
    assert vec.get_attr("render_mode") == [None, None]
    ours, theirs = gym_env(config.env), vec.envs[0]
    ours.reset(seed=3), theirs.reset(seed=3)
    for _ in range(50):  # the main engine, every step
        mine, theirs_step = ours.step(2), theirs.step(2)
        np.testing.assert_array_equal(mine[0], theirs_step[0])
    bodies = [len(env.unwrapped.world.bodies) for env in (ours, theirs)]
    assert bodies[0] == bodies[1], bodies
    ours.close()
    vec.close()
    for suite, tasks in SUITES.items():  # every env SB3 runs, and one whose constructor takes no render_mode
        for task in tasks:
            if task.sb3 and not turn_based(suites.config_of(task)):
                vec = sb3_vec_env(suites.config_of(task), 1, seed=3)
                assert vec.get_attr("render_mode") == [None], (suite, task.env_id)
                vec.close()
    trading = dataclasses.replace(config, env=dataclasses.replace(config.env, env_id="ppo_td/TradingPenalty-v0"))
    sb3_vec_env(trading, 1, seed=3).close()


def test_sb3_plays_the_games_ppo_td_plays_with_the_same_board_and_legal_moves():
    """The games suite's SB3 side is sb3-contrib's MaskablePPO on ppo_td's TurnBased game: the same seed gives the
    same seat, board and legal moves step for step (the board flattened to floats, the mask from action_masks()),
    and the same rewards."""
    import numpy as np

    from benchmarks.common.worker import sb3_vec_env, turn_based
    from ppo_td.envs import gym_env

    for task in SUITES["games"]:
        config = suites.config_of(task)
        assert turn_based(config) and task.sb3
        ours, theirs = gym_env(config.env), sb3_vec_env(config, 1, seed=7).envs[0]
        rng = np.random.default_rng(0)
        for episode in range(3):
            (mine, info), (board, their_info) = ours.reset(seed=episode), theirs.reset(seed=episode)
            assert info["seat"] == their_info["seat"]
            done = False
            while not done:
                np.testing.assert_array_equal(board, mine["observation"].reshape(-1).astype(np.float32))
                np.testing.assert_array_equal(theirs.action_masks(), mine["action_mask"].astype(bool))
                action = rng.choice(np.flatnonzero(mine["action_mask"]))
                mine, reward, terminated, truncated, _ = ours.step(action)
                board, theirs_reward, *_ = theirs.step(action)
                assert reward == theirs_reward
                done = terminated or truncated
        ours.close()
        theirs.close()


def test_sb3_stores_the_normalized_observations_it_acts_on_when_the_env_observes_integers():
    """SB3 2.9's rollout buffer takes the observation space's dtype, and VecNormalize keeps MiniGrid's uint8 space:
    the worker gives SB3 integer observations as float32 (the same values), so the buffer holds what the policy saw
    (it held -1.56 as 255 before, and SB3 stalled at 0 on MiniGrid)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from benchmarks.common.worker import _float_observations

    class Counter(gym.Env):  # a uint8 vector, as MiniGrid's flattened grid
        observation_space = gym.spaces.Box(0, 255, (3,), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.array([self.t, 7, 200], np.uint8), {}

        def step(self, action):
            self.t += 1
            return np.array([self.t, 7 + action, 200], np.uint8), float(action), self.t >= 5, False, {}

    env = VecNormalize(make_vec_env(Counter, n_envs=2, seed=1, wrapper_class=_float_observations), gamma=0.99)
    assert env.observation_space.dtype == np.float32
    model = PPO("MlpPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=1, device="cpu")
    model.learn(32)
    stored = model.rollout_buffer.observations
    assert stored.dtype == np.float32 and stored.min() < 0  # normalized values, not their uint8 wraps
    raw = _float_observations(Counter())
    obs, _ = raw.reset(seed=0)
    assert obs.dtype == np.float32 and obs.tolist() == [0.0, 7.0, 200.0]
    cartpole = gym.make("CartPole-v1")
    assert _float_observations(cartpole) is cartpole  # a float observation is left as it is


def test_settings_change_fields_together_in_any_order():
    """optim.desired_kl is refused beside optim.anneal_lr=True: both given, in either order, are one change."""
    one = suites.settings_config("walker2d+optim.desired_kl=0.01+optim.anneal_lr=False+seed=3")
    other = suites.settings_config("walker2d+seed=3+optim.anneal_lr=False+optim.desired_kl=0.01")
    assert one == other and (one.optim.desired_kl, one.optim.anneal_lr, one.seed) == (0.01, False, 3)
    with pytest.raises(ValueError, match="one schedule at a time"):
        suites.settings_config("walker2d+optim.desired_kl=0.01")


def test_again_before_runs_again_what_started_before_it_and_a_restart_skips_what_it_ran(tiny, tmp_path, monkeypatch,
                                                                                         capsys):
    from ppo_td.config import to_dict

    task = TINY[0]
    stored = {"key": suites.key_of(task, "ppo_td", 1), "suite": tiny, "env": task.env_id, "library": "ppo_td",
              "settings": task.settings, "seed": 1, "eval_returns": [500.0] * 10,
              "finished": "2026-12-01T10:00:00+00:00"}
    (tmp_path / "runs.jsonl").write_text(json.dumps(stored) + "\n")
    started = []

    class Worker:  # records what it was asked to run, then dies (nothing is stored)
        def __init__(self, command, **kwargs):
            spec = json.loads(command[-1])
            started.append(spec["seed"])
            assert spec["config"] == json.loads(json.dumps(to_dict(suites.config_of(task))))  # the suite's own
            self.returncode = 1

        def communicate(self, timeout=None):
            return "", "stopped by the test"

    monkeypatch.setattr(run.subprocess, "Popen", Worker)
    common = [tiny, "--seeds", "1", "--libraries", "ppo_td", "--store", str(tmp_path)]
    assert run.main(common) == 0 and started == []  # in the store: skipped
    assert run.main([*common, "--again-before", "2026-12-01T09:59Z"]) == 0 and started == []  # started after it
    assert run.main([*common, "--again-before", "2026-12-02"]) == 1 and started == [1]  # before it: run again
    assert "0 in the store since 2026-12-02T00:00+00:00" in capsys.readouterr().out

    # a run of today's code, stored after the time: the same command, restarted, skips it
    again = dict(stored, finished="2026-12-03T08:00:00+00:00", eval_returns=[499.0] * 10)
    with (tmp_path / "runs.jsonl").open("a") as f:
        f.write(json.dumps(again) + "\n")
    started.clear()
    assert run.main([*common, "--again-before", "2026-12-02"]) == 0 and started == []
    assert "1 in the store since" in capsys.readouterr().out
    # one that started before the time on the old code and finished after it is run again
    with (tmp_path / "runs.jsonl").open("a") as f:
        f.write(json.dumps(dict(again, finished="2026-12-04T08:00:00+00:00", wall_seconds=2 * 86400.0)) + "\n")
    assert run.main([*common, "--again-before", "2026-12-02T12:00"]) == 1 and started == [1]

    for bad, says in (("yesterday", "not an ISO date"), ("2999-01-01", "is after now")):
        with pytest.raises(SystemExit) as exit_:
            run.main([*common, "--again-before", bad])
        assert exit_.value.code == 2 and says in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main([tiny, "--report", "--again-before", "2026-12-02", "--store", str(tmp_path)])
    assert "give one of them" in capsys.readouterr().err
    assert started == [1] and len(suites.read_store(tmp_path)) == 3  # nothing refused wrote anything
