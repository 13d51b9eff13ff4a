"""Evaluation episodes cut at the step cap are counted and said everywhere (issue 64): the tuner scores them with the
reward they reached (never higher for leaving them out), the returns benchmark stores them and its report says how
many ended, and a stored run that left them nowhere is run again."""

import dataclasses
import json
from pathlib import Path

import pytest

import ppo_td
from benchmarks.returns import run as returns_run
from benchmarks.returns import suites
from benchmarks.returns.report import _row, evaluation_score
from benchmarks.returns.suites import SUITES, Task
from conftest import small_config
from ppo_td.config import EnvConfig
from ppo_td.tuning.trial import seed_score

TESTS = Path(__file__).parent


def _half_stuck(**changes):
    return dataclasses.replace(small_config(env=EnvConfig("endless_envs:half_stuck", num_envs=4)), eval_episodes=6,
                               eval_max_steps=50, **changes)


def test_the_tuner_scores_an_episode_stuck_forever_with_what_it_reached():
    result = ppo_td.train(_half_stuck(), progress=False)
    ev = result.evaluation
    assert ev.cut and ev.returns and set(ev.returns) == {1.0} and set(ev.cut) == {0.0}  # half the starts never end
    score = seed_score(result, "eval")
    assert score == pytest.approx(len(ev.returns) / ev.episodes)  # the stuck ones count as what they reached: 0
    assert score < sum(ev.returns) / len(ev.returns)  # leaving them out would have scored the trial 1.0


def _run(returns_, cut=None, library="ppo_td"):
    run = {"key": "k", "library": library, "seed": 1, "last100": 1.0, "eval_returns": returns_,
           "eval_mean": sum(returns_) / len(returns_), "train_seconds": 60.0, "frames": 1000}
    if cut is not None:
        run["eval_cut"] = cut
    return run


def test_the_report_counts_cut_episodes_and_says_how_many_ended():
    whole = _run([2.0] * 10, cut=[])
    cut = _run([2.0] * 8, cut=[0.0, 0.0])
    assert evaluation_score(cut) == pytest.approx(1.6)  # 8 x 2 and 2 x 0 over 10
    row = _row("Env", "ppo_td", [whole, cut])
    assert "1.8 +- 0.2 (18 of 20 episodes ended)" in row
    old = _run([2.0] * 9)  # stored before cut episodes were: the ended ones, and the count
    assert "(19 of 20 episodes ended)" in _row("Env", "ppo_td", [whole, old])
    assert "episodes ended" not in _row("Env", "ppo_td", [whole, whole])


def test_a_stored_run_that_left_its_cut_episodes_nowhere_is_run_again():
    assert not suites.whole_evaluation(_run([1.0] * 9))  # before eval_cut: the missing one is nowhere
    assert suites.whole_evaluation(_run([1.0] * 9, cut=[3.0]))
    assert suites.whole_evaluation(_run([1.0] * 10)) and suites.whole_evaluation(_run([1.0] * 9, library="sb3"))
    again = [r["key"] for r in suites.read_store(suites.STORE) if not suites.whole_evaluation(r)]
    assert all("SpaceInvaders" in key for key in again)  # the three the audit found, and no others


@pytest.mark.slow
def test_the_store_records_each_cut_episode_with_the_reward_it_reached(tmp_path, monkeypatch):
    monkeypatch.setitem(SUITES, "stuck", [Task("endless_envs:half_stuck", "cleanrl", 512, sb3=False)])
    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # the worker process imports the env's module
    def config_of(task):
        return dataclasses.replace(suites.settings_config(task.settings),
                                   env=EnvConfig("endless_envs:half_stuck", num_envs=4), total_frames=task.frames,
                                   frames_per_batch=128, eval_max_steps=30)

    for module in (suites, returns_run):  # the run's config, and its key (suites.key_of reads suites.config_of)
        monkeypatch.setattr(module, "config_of", config_of)
    assert returns_run.main(["stuck", "--seeds", "1", "--store", str(tmp_path)]) == 0
    [run] = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(run["eval_returns"]) + len(run["eval_cut"]) == 10 and run["eval_cut"] == [0.0] * len(run["eval_cut"])
    assert 0 < len(run["eval_cut"]) < 10
