"""``python -m benchmarks distributed``: its tables from made-up runs, and one short real run of each part."""

import pytest

from benchmarks.scaling import distributed


def test_seconds_to_a_target_is_when_the_mean_of_the_last_episodes_first_reaches_it():
    episodes = [[i * 1000, float(i), r] for i, r in enumerate([0, 0, 10, 10, 30, 40], start=1)]
    assert distributed.seconds_to(episodes, 20.0, window=2) == 5.0  # mean(10, 30) = 20 at the fifth
    assert distributed.seconds_to(episodes, 50.0, window=2) is None


def test_the_learning_table_counts_runs_that_never_reach_the_target():
    def run(ranks, seed, last, curve):
        return {"ranks": ranks, "seed": seed, "last100": last, "eval_returns": [last], "seconds": 100.0,
                "episodes": [[i, float(i), r] for i, r in enumerate(curve, start=1)]}

    runs = [run(1, 1, 100.0, [100.0] * 10), run(1, 2, 100.0, [50.0] * 5 + [100.0] * 10),
            run(2, 1, 100.0, [100.0] * 10), run(2, 2, 10.0, [10.0] * 10)]
    table = "\n".join(distributed.learning_table(runs))
    assert "Target: 90.0" in table
    assert "| 1 | 1, 2 | 100.0 +- 0.0 |" in table and "(2 of 2)" in table
    assert "| 2 | 1, 2 | 55.0 +- 45.0 |" in table and "(1 of 2)" in table


def test_the_paired_line_is_the_mean_difference_by_seed_with_its_interval():
    runs = [{"ranks": r, "seed": seed, "last100": value} for seed, (one, two) in enumerate(
        [(100.0, 110.0), (100.0, 120.0), (100.0, 90.0)], start=1) for r, value in ((1, one), (2, two))]
    line = distributed.paired_lines(runs, resamples=2000)[0]
    assert line.startswith("2 ranks against 1, paired by seed (last-100 return): mean difference +6.7, 95% bootstrap "
                           "interval [-10.0, +20.0]") and line.endswith("higher on 2 of 3 seeds."), line


def test_the_throughput_table_pairs_each_count_with_one_rank_in_its_round():
    runs = [{"setting": "cleanrl", "ranks": r, "round": k, "sps": sps, "collect_seconds": 1.0, "update_seconds": 1.0}
            for k, (one, two) in enumerate([(100.0, 150.0), (200.0, 250.0)]) for r, sps in ((1, one), (2, two))]
    table = "\n".join(distributed.throughput_table(runs))
    assert "| cleanrl | 2 | 200 (150-250) | 1.00 (1.00-1.00) | 1.00 (1.00-1.00) | 1.38x (1.25-1.50) | 69% |" in table


@pytest.mark.slow
def test_a_short_run_of_the_benchmark_writes_its_tables_and_the_commands_for_more_ranks(tmp_path):
    assert distributed.main(["--ranks", "1", "2", "--settings", "cleanrl", "--rounds", "1", "--throughput-iterations",
                             "2", "--skip-learning", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "distributed.md").read_text()
    assert "One all-reduce of the" in text and "| cleanrl | 2 |" in text
    assert "--ranks 1 2 4 8 16" in (tmp_path / "more_ranks.sh").read_text()
