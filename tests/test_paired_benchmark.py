"""The paired benchmark (benchmarks/returns/paired.py): both libraries run one config and seed at the same time, each
pair is stored as it ends and skipped when run again, the table takes the medians and ranges over seeds, bad input is
refused before anything runs."""

import json

import pytest

from benchmarks.returns import paired


def test_the_table_takes_the_medians_and_the_range_of_the_ratios():
    def run(seed, ours, theirs):
        return {"env": "CartPole-v1", "settings": "cartpole-zoo", "compile": False, "seed": seed, "frames": 2560,
                "steps": 200, "ppo_td": {"frames_per_second": ours, "train_seconds": 2560 / ours},
                "sb3": {"frames_per_second": theirs, "train_seconds": 2560 / theirs}}
    rows = paired.table([run(1, 200.0, 100.0), run(2, 300.0, 200.0), run(3, 1000.0, 400.0)])
    assert rows[2] == ("| CartPole-v1 (cartpole-zoo) | no | 3 | 2,560 (200) | 300 | 200 | 2.00x (1.50-2.50) | "
                       "12.8 and 25.6; 8.5 and 12.8; 2.6 and 6.4 | - | - |")
    eager = [{**run(1, 1.0, 1.0), "compiled": {"frames_per_second": 240.0, "train_seconds": 10.0},
              "eager": {"frames_per_second": 200.0, "train_seconds": 12.0}}]
    assert paired.table(eager, "eager")[2] == ("| CartPole-v1 (cartpole-zoo) | compiled side | 1 | 2,560 (200) | 240 | "
                                               "200 | 1.20x (1.20-1.20) | 10.0 and 12.0 | - | - |")


@pytest.mark.parametrize(("argv", "message"), [
    (["nosuch"], "no such suite"), (["minatar"], "no such suite"),  # MinAtar has no SB3 runs beside it
    (["classic", "--envs", "Hopper-v5"], "--envs"), (["classic", "--frames", "0"], "--frames 0"),
    (["classic", "--against", "eager", "--compile"], "drop --compile"), (["classic", "--against", "x"], "--against"),
    (["classic", "--against", "skrl"], "MountainCarContinuous-v0'] train with gSDE")])
def test_bad_input_is_refused_before_anything_runs(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit):
        paired.main([*argv, "--store", str(tmp_path)])
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_pairs_are_kept_and_skipped_but_never_those_of_edited_code(tmp_path, monkeypatch, capsys):
    """A pair stored at a commit is read again at that commit; one measured on edited code (its commit marked -dirty)
    is stored but never reused; a seed given twice runs once."""
    calls = []

    def fake_pair(task, frames, seed, compile, timeout, against):
        calls.append(seed)
        return {side: {"frames": frames, "train_seconds": 2.0, "collect_seconds": 1.0, "update_seconds": 1.0,
                       "frames_per_second": frames / 2.0} for side in paired.SIDES[against]}

    monkeypatch.setattr(paired, "run_pair", fake_pair)
    argv = ["classic", "--envs", "Pendulum-v1", "--frames", "4096", "--seeds", "1", "1", "--store", str(tmp_path)]
    monkeypatch.setattr(paired, "measured_commit", lambda root: "abc123")
    assert paired.main(argv) == 0 and paired.main(argv) == 0
    assert calls == [1]  # once: the seed given twice, and the rerun read from the store
    monkeypatch.setattr(paired, "measured_commit", lambda root: "abc123-dirty")
    assert paired.main(argv) == 0 and paired.main(argv) == 0
    assert calls == [1, 1, 1]
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 3
    shown = capsys.readouterr().out
    assert "| Pendulum-v1 (pendulum) | no | 1 | 4,096 (320) | 2,048 | 2,048 | 1.00x (1.00-1.00) |" in shown
    assert paired.main([*argv, "--against", "eager"]) == 0  # another pair: compiled against eager, kept apart
    assert calls == [1, 1, 1, 1] and "| compiled / eager |" in capsys.readouterr().out


@pytest.mark.slow  # two worker processes, each starting torch or SB3
def test_a_pair_runs_both_libraries_at_once_and_is_kept_and_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(paired, "measured_commit", lambda root: "abc123")  # as a clean checkout's
    argv = ["classic", "--envs", "CartPole-v1", "--frames", "300", "--seeds", "1", "--store", str(tmp_path)]
    assert paired.main(argv) == 0
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len(lines) == 1
    run = json.loads(lines[0])
    assert run["frames"] == 256  # whole batches of the config (8 copies x 32 steps)
    for library in ("ppo_td", "sb3"):
        assert run[library]["frames"] == 256 and run[library]["frames_per_second"] > 0
    assert paired.main(argv) == 0  # the stored pair is read, not run again
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1
    assert "| CartPole-v1 (cartpole-zoo) | no | 1 |" in capsys.readouterr().out
    assert paired.main([*argv, "--against", "eager"]) == 0  # ppo_td compiled (its cache empty) beside ppo_td eager
    run = json.loads((tmp_path / "runs.jsonl").read_text().splitlines()[-1])
    assert run["against"] == "eager" and run["compiled"]["frames"] == run["eager"]["frames"] == 256
    assert "| CartPole-v1 (cartpole-zoo) | compiled side | 1 | 256 (20) |" in capsys.readouterr().out


def test_the_seconds_to_the_threshold_are_each_runs_and_a_run_that_never_got_there_says_so():
    """Each side's seconds until the mean of its last 100 episodes first reached the threshold (the returns report's
    running mean), per seed, ``never`` for a run that did not; the ratio over the seeds where both got there."""
    task = paired.SUITES["classic"][0]
    episodes = [[i * 100, float(i), 10.0 if i < 150 else 500.0] for i in range(300)]  # the mean crosses 450 late
    line = json.dumps({"frames": 30000, "train_seconds": 300.0, "collect_seconds": 200.0, "update_seconds": 100.0,
                       "episodes": episodes})
    out = paired._result("ppo_td", task, 1, 0, line, "", threshold=450.0)
    assert out["threshold"] == 450.0 and out["seconds_to_threshold"] == 239.0  # 90 of the last 100 at 500: 451
    assert paired._result("sb3", task, 1, 0, line, "", threshold=600.0)["seconds_to_threshold"] is None

    def run(seed, ours, theirs):
        return {"env": "CartPole-v1", "settings": "cartpole-zoo", "compile": "auto", "seed": seed, "frames": 2560,
                "ppo_td": {"frames_per_second": 2.0, "train_seconds": 1.0, "threshold": 452.4,
                           "seconds_to_threshold": ours},
                "sb3": {"frames_per_second": 1.0, "train_seconds": 2.0, "threshold": 452.4,
                        "seconds_to_threshold": theirs}}
    row = paired.table([run(1, 10.0, 30.0), run(2, 20.0, None), run(3, 10.0, 20.0)])[2]
    assert row.startswith("| CartPole-v1 (cartpole-zoo) | auto | 3 | 2,560 |")
    assert row.endswith("| 10.0 and 30.0; 20.0 and never; 10.0 and 20.0 (threshold 452.4) | 2.50x (2.00-3.00; 2 of 3 "
                        "seeds both reached it) |")


def test_compile_is_eager_true_or_auto_and_anything_else_is_refused(tmp_path, monkeypatch, capsys):
    seen = []

    def fake_pair(task, frames, seed, compile, timeout, against):
        seen.append(compile)
        return {side: {"frames": frames, "train_seconds": 1.0, "collect_seconds": 0.5, "update_seconds": 0.5,
                       "frames_per_second": float(frames)} for side in paired.SIDES[against]}

    monkeypatch.setattr(paired, "run_pair", fake_pair)
    argv = ["classic", "--envs", "Pendulum-v1", "--frames", "2048", "--seeds", "1", "--store", str(tmp_path)]
    for given in ([], ["--compile"], ["--compile", "auto"], ["--compile=False"]):
        assert paired.main([*argv, *given]) == 0
    assert seen == [False, True, "auto", False] or seen == [False, True, "auto"]  # (False again: read from the store)
    assert "| Pendulum-v1 (pendulum) | auto | 1 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        paired.main([*argv, "--compile", "maybe"])
    assert "'maybe': give auto, True or False" in capsys.readouterr().err


def test_a_worker_that_fails_or_prints_no_result_is_named():
    task = paired.SUITES["classic"][0]
    with pytest.raises(RuntimeError, match="sb3 CartPole-v1 seed 2 failed \\(exit 1\\):\nTraceback"):
        paired._result("sb3", task, 2, 1, "", "Traceback ...")
    with pytest.raises(RuntimeError, match="ppo_td CartPole-v1 seed 2: no result line"):
        paired._result("ppo_td", task, 2, 0, "some log\n", "")
    with pytest.raises(RuntimeError, match="no result line"):
        paired._result("ppo_td", task, 2, 0, '{"frames": 256, "train_seconds": 0.0}', "")


def test_ctrl_c_keeps_the_finished_pairs_and_shows_them(tmp_path, monkeypatch, capsys):
    def pair_then_interrupt(task, frames, seed, compile, timeout, against):
        if seed == 2:
            raise KeyboardInterrupt
        return {library: {"frames": frames, "train_seconds": 1.0, "collect_seconds": 0.5, "update_seconds": 0.5,
                          "frames_per_second": float(frames)} for library in ("ppo_td", "sb3")}

    monkeypatch.setattr(paired, "run_pair", pair_then_interrupt)
    monkeypatch.setattr(paired, "measured_commit", lambda root: "abc123")
    argv = ["classic", "--envs", "Pendulum-v1", "--frames", "2048", "--seeds", "1", "2", "--store", str(tmp_path)]
    assert paired.main(argv) == 130
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 1
    out = capsys.readouterr()
    assert "interrupted: 1 pairs stored or read" in out.err and "| Pendulum-v1 (pendulum) | no | 1 |" in out.out


def test_a_stored_result_does_not_make_the_next_run_dirty_but_edited_code_does(tmp_path):
    """measured_commit: a benchmark's own store under benchmarks/results/ written (by the run before) leaves the
    commit clean; an edited source file marks it -dirty."""
    import subprocess

    from benchmarks.common.store import measured_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "runs.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    clean = measured_commit(tmp_path)
    assert len(clean) == 40
    (tmp_path / "benchmarks" / "results" / "runs.jsonl").write_text("{}\n{}\n")
    assert measured_commit(tmp_path) == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert measured_commit(tmp_path) == clean + "-dirty"


def test_the_skrl_side_records_each_copys_episodes_with_the_frames_and_seconds_so_far():
    """skrl keeps no episode list: a wrapper on each env copy writes (frames stepped by every copy, seconds since the
    training start, return) at each episode's end, what the SB3 side's callback records."""
    import gymnasium as gym

    from benchmarks.common.worker import EpisodeRecord, skrl_vector_env
    from ppo_td.presets import get_preset

    config = get_preset("cartpole")
    n = config.env.num_envs
    log = EpisodeRecord()
    vec = skrl_vector_env(config, log)
    assert vec.num_envs == n
    vec.reset(seed=0)
    returns, steps = [0.0] * n, 0
    expected = []
    for _ in range(60):  # random CartPole episodes end within 60 steps mostly; NEXT_STEP autoreset
        _, reward, terminated, truncated, _ = vec.step(vec.action_space.sample())
        steps += n
        for i in range(n):
            returns[i] += reward[i]
            if terminated[i] or truncated[i]:
                expected.append(returns[i])
                returns[i] = 0.0
    vec.close()
    assert sorted(e[2] for e in log.episodes) == sorted(expected) and len(expected) > n
    assert log.frames < steps  # a copy's autoreset step is a reset, not a step of the env
    frames = [e[0] for e in log.episodes]
    seconds = [e[1] for e in log.episodes]
    assert frames == sorted(frames) and seconds == sorted(seconds) and seconds[0] >= 0
    assert isinstance(vec, gym.vector.SyncVectorEnv)


@pytest.mark.slow  # two worker processes; skrl is a benchmark dependency only (the 'bench' extra)
def test_a_pair_against_skrl_keeps_both_runs_seconds_to_the_threshold(tmp_path, monkeypatch, capsys):
    pytest.importorskip("skrl")
    monkeypatch.setattr(paired, "measured_commit", lambda root: "abc123")
    argv = ["classic", "--envs", "CartPole-v1", "--frames", "2048", "--seeds", "1", "--store", str(tmp_path),
            "--against", "skrl", "--compile", "False"]
    assert paired.main(argv) == 0
    run = json.loads((tmp_path / "runs.jsonl").read_text().splitlines()[-1])
    assert run["against"] == "skrl" and run["ppo_td"]["frames"] == run["skrl"]["frames"] == 2048
    assert "threshold" in run["skrl"] and run["skrl"]["frames_per_second"] > 0
    assert "| CartPole-v1 (cartpole-zoo) | no | 1 | 2,048 (160) |" in capsys.readouterr().out
