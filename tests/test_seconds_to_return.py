"""Seconds to a return in the returns report (issue 65): the training seconds until a run's mean of its last 100
episodes first reaches a threshold, from its episodes or its compacted curve, and the median over seeds with runs that
never got there counted as such."""

import math

import pytest

from benchmarks.returns.report import median_interval, running_means, seconds_to
from benchmarks.returns.suites import compact


def _run(returns):
    return {"episodes": [[100 * (i + 1), float(i), float(r)] for i, r in enumerate(returns)]}


def test_the_first_time_the_last_100_episodes_reach_the_threshold():
    run = _run([0.0] * 150 + [10.0] * 150)
    # the mean of the last 100 is 5 once 50 of them are 10s: episode 199, at second 199
    assert seconds_to(run, 5.0) == 199.0
    assert seconds_to(run, 10.0) == 249.0  # 100 tens
    assert seconds_to(run, 10.5) == math.inf


def test_a_few_lucky_first_episodes_do_not_count():
    run = _run([10.0] + [0.0] * 29)  # 30 episodes: counted from the 30th on, the mean of all of them
    seconds, means = running_means(run)
    assert list(seconds) == [29.0] and means[0] == pytest.approx(10 / 30)
    assert seconds_to(run, 5.0) == math.inf
    assert seconds_to(_run([0.0] * 99 + [10.0] * 201), 0.0) == 99.0  # a long run: from its 100th episode


def test_a_compacted_run_gives_the_seconds_of_its_episodes_within_the_curve_spacing():
    returns = [0.0] * 3000 + [1.0] * 2000
    full = _run(returns)
    small = compact(dict(full))
    assert "curve" in small and "episodes" not in small
    exact, approx = seconds_to(full, 0.5), seconds_to(small, 0.5)
    assert exact == 3049.0 and exact <= approx <= exact + 3  # 2,000 points over 5,000 episodes: 2.5 apart
    assert running_means(small)[1][-1] == pytest.approx(1.0)


def test_the_median_over_seeds_keeps_the_runs_that_never_got_there():
    assert median_interval([3.0, 1.0, 2.0])[0] == 2.0
    assert median_interval([1.0, 2.0, math.inf])[0] == 2.0
    median, low, high = median_interval([1.0, math.inf, math.inf])
    assert median == math.inf and low == 1.0 and high == math.inf  # the lower median: never a mean with an inf
    median, low, high = median_interval([10.0, 20.0, 30.0, 40.0, 50.0])
    assert low <= median <= high and median == 30.0
