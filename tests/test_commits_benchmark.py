"""``python -m benchmarks commits``: the same benchmark at several commits, interleaved, each run with its own
checkout's ppo_td (issue 65's bisect)."""

import pytest

from benchmarks.speed import commits


def _run(collect, update):
    return {"collect_seconds": collect, "update_seconds": update, "train_seconds": collect + update}


def test_the_report_pairs_runs_by_seed_and_round():
    results = {("a", "ppo_td"): [_run(1.0, 2.0), _run(1.0, 4.0)], ("a", "sb3"): [_run(2.0, 2.0), _run(3.0, 2.0)],
               ("b", "ppo_td"): [_run(0.5, 2.0), _run(1.0, 2.0)], ("b", "sb3"): [_run(2.0, 2.0), _run(2.0, 2.0)]}
    text = "\n".join(commits.report(results, ["a", "b"], ["ppo_td", "sb3"]))
    assert "| a | ppo_td | 1.000 | 3.000 | 4.000 | 2 |" in text  # medians
    assert "| a | 2.50 (2.00-3.00) | 0.75 (0.50-1.00) | 1.17 (1.00-1.33) |" in text  # SB3 over ppo_td, per run
    assert "| b | 0.75 (0.50-1.00) | 0.75 (0.50-1.00) | 0.72 (0.60-0.83) |" in text  # b's ppo_td over a's, paired


def test_an_unknown_revision_is_refused_and_a_foreign_ppo_td_fails_the_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        commits.main(["no-such-revision-here"])
    assert "git knows no commit 'no-such-revision-here'" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="not .*" + tmp_path.name):  # no ppo_td in it: the installed one is refused
        commits.run_in(tmp_path, {"library": "ppo_td", "preset": "cleanrl", "seed": 1, "total_frames": 512})


def test_this_working_tree_runs_and_reports(capsys):
    assert commits.main([".", "--seeds", "1", "--rounds", "1", "--frames", "512", "--libraries", "ppo_td"]) == 0
    out = capsys.readouterr().out
    assert "round 1 seed 1 . ppo_td: collect" in out and "| . | ppo_td |" in out
