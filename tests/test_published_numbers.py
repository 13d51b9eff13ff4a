"""Every published return is what the result store gives (issue 64): the returns report, every table of
docs/learning.md and the README's returns row, recomputed from ``benchmarks/results/returns/runs.jsonl``
(``benchmarks.returns.published``); and the check fails where a number, a note or a marker does not hold."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.returns import published, store_history
from benchmarks.returns.suites import read_store

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "learning.md"


@pytest.fixture(scope="module")
def runs():
    return read_store(published.STORE)


def test_the_report_learning_md_and_the_readme_are_what_the_store_gives(runs):
    # (the first call computes every group's bootstrap, about a minute; the tests below reuse them)
    assert published.check() == []


def _doc_with(tmp_path: Path, old: str, new: str) -> Path:
    text = DOC.read_text()
    assert text.count(old) == 1, old
    path = tmp_path / "learning.md"
    path.write_text(text.replace(old, new))
    return path


def test_a_number_off_by_more_than_its_rounding_fails(tmp_path, runs):
    row = "| Acrobot-v1 | ppo_td | 5 | -76.0 +- 1.94 |"
    assert published.check_learning(_doc_with(tmp_path, row, row), runs, published.STORE) == []
    problems = published.check_learning(_doc_with(tmp_path, row, row.replace("1.94", "1.84")), runs,
                                         published.STORE)
    assert len(problems) == 2 and "Acrobot-v1 ppo_td" in problems[0] and "no ppo_td runs" in problems[0]
    assert "P(ppo_td run > SB3 run)" in problems[1]  # (it has no ppo_td row to be computed from)
    # the stored mean is -75.956: -75.96 is a rounding of it, -75.95 is not
    assert published.check_learning(_doc_with(tmp_path, row, row.replace("-76.0 +-", "-75.96 +-")), runs,
                                    published.STORE) == []
    assert len(published.check_learning(_doc_with(tmp_path, row, row.replace("-76.0 +-", "-75.95 +-")), runs,
                                        published.STORE)) == 2  # the row, and the P row below it


def test_an_evaluation_from_shared_starts_must_say_so(tmp_path, runs):
    old = "| 7.20 +- 0.34 (starts shared by seeds) |"  # Taxi's ppo_td runs of 2026-11-28
    problems = published.check_learning(_doc_with(tmp_path, old, "| 7.20 +- 0.34 |"), runs, published.STORE)
    assert any("does not say (starts shared by seeds)" in p for p in problems)
    swimmer = "| 336.7 +- 28.0 |"  # its runs evaluated from their own starts
    problems = published.check_learning(_doc_with(tmp_path, swimmer, "| 336.7 +- 28.0 (starts shared by seeds) |"),
                                        runs, published.STORE)
    assert any("says its starts were shared" in p for p in problems)


def test_a_p_row_is_recomputed_from_the_rows_above_it(tmp_path, runs):
    old = "| | P(ppo_td run > SB3 run) | | 0.56 [0.16, 0.92] | | | | |"
    problems = published.check_learning(_doc_with(tmp_path, old, old.replace("0.56", "0.66")), runs,
                                         published.STORE)
    assert len(problems) == 1 and "the store gives 0.56 [0.16, 0.92]" in problems[0]


def test_a_row_of_runs_outside_the_store_must_say_so(tmp_path, runs):
    made_up = "| Pendulum-v1 | ppo_td | 5 | -150.0 +- 1.0 | -150.0 | -150.0 [-151.0, -149.0] | -140.0 +- 1.0 | 0.4 |"
    last = "| | P(ppo_td run > SB3 run) | | 0.20 [0.00, 0.60] | | | | |"  # the classic table's last row
    for label, count in (("ppo_td", 1), (f"ppo_td ({published.OUTSIDE})", 0)):
        doc = _doc_with(tmp_path, last, last + "\n" + made_up.replace("| ppo_td |", f"| {label} |"))
        assert len(published.check_learning(doc, runs, published.STORE)) == count
    anchor = "| | RL Zoo | | -172.225 +- 104.159 |"
    wrong_anchor = published.check_learning(_doc_with(tmp_path, anchor, anchor.replace("-172.225", "-162.225")),
                                            runs, published.STORE)
    assert len(wrong_anchor) == 1 and "anchor" in wrong_anchor[0]


def test_a_normalized_table_and_the_readme_row_are_the_reports(tmp_path, runs):
    old = "| Stable-Baselines3 | 1, 2, 3, 4, 5 | 0.73 [0.71, 0.74] | 0.72 [0.68, 0.76] |"
    problems = published.check_learning(_doc_with(tmp_path, old, old.replace("0.72 [", "0.74 [")), runs,
                                        published.STORE)
    assert len(problems) == 1 and "IQM 0.73 [0.71, 0.74], mean 0.72 [0.68, 0.76]" in problems[0]
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| Returns, normalized IQM"))
    copy = tmp_path / "README.md"
    copy.write_text(readme.replace(row, row.replace("| 0.98 [0.96, 0.99];", "| 0.97 [0.96, 0.99];", 1)))
    problems = published.check_readme(copy, runs, published.STORE)
    assert problems == ["README.md: classic, ppo_td: written 0.97 [0.96, 0.99], the store gives 0.98 [0.96, 0.99]"]


def test_a_report_not_made_from_the_store_fails(tmp_path, runs):
    store = tmp_path / "returns"
    shutil.copytree(published.STORE, store)
    report = (store / "report.md").read_text()
    assert published.check_report(store) == []
    (store / "report.md").write_text(report.replace("| 500.0 +- 0 |", "| 499.0 +- 0 |", 1))
    problems = published.check_report(store)
    assert len(problems) == 1 and problems[0].startswith("report.md:") and "499.0" in problems[0]


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    for args in (["add", name], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", name]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_what_a_stored_evaluation_started_from_is_read_from_its_commit(tmp_path, runs):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    before, change, after = (_commit(tmp_path, name) for name in ("a", "b", "c"))
    starts = [store_history.eval_starts({"key": "k", "library": "ppo_td", "commit": c}, tmp_path, since=change)
              for c in (before, change, after + "-dirty")]
    assert starts == ["shared", "per run", "per run"]
    assert store_history.eval_starts({"key": "k", "library": "sb3", "commit": before}, tmp_path, change) == \
        "sequential"
    with pytest.raises(ValueError, match="not in this repository's history"):
        store_history.eval_starts({"key": "k", "library": "ppo_td", "commit": "0" * 40}, tmp_path, change)
    assert all(r.get("eval_starts") in ("shared", "per run", "sequential") for r in runs)  # every stored run


def test_marking_the_store_keeps_every_record_and_a_cut_line(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    commit = _commit(tmp_path, "a")
    store = tmp_path / "store"
    store.mkdir()
    lines = [json.dumps({"key": "k1", "library": "ppo_td", "commit": commit}),
             json.dumps({"key": "k2", "library": "sb3", "commit": commit, "eval_starts": "sequential"}), '{"key": "k3"']
    (store / "runs.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="cannot tell"):  # the change's commit unknown here: no guess
        store_history.mark(store, tmp_path)
    assert (store / "runs.jsonl").read_text() == "\n".join(lines) + "\n"  # nothing written
    assert store_history.mark(store, tmp_path, since=commit) == 1
    marked = (store / "runs.jsonl").read_text().splitlines()
    assert json.loads(marked[0])["eval_starts"] == "per run"  # (a commit is its own ancestor)
    assert marked[1:] == lines[1:]  # a marked record as it was; a line a crash cut short left as it is


def test_the_command_refuses_a_store_it_cannot_read(tmp_path, capsys):
    with pytest.raises(SystemExit) as no_store:
        published.main(["--store", str(tmp_path)])
    assert no_store.value.code == 2 and "holds no runs.jsonl" in capsys.readouterr().err
    (tmp_path / "runs.jsonl").write_text("")
    with pytest.raises(SystemExit):
        published.main(["--store", str(tmp_path)])
    assert "make it with --report" in capsys.readouterr().err


def test_a_speed_row_is_recomputed_from_the_rows_above_it(runs):
    """The report's ``frames/s, ppo_td / SB3`` row (each seed's ppo_td run over its SB3 run: median and range) is
    checked against the runs matched above it, like a P row."""
    from benchmarks.returns.report import SPEED_LABEL, write_report

    report = write_report(["classic"], published.STORE, plots=False, write=False).splitlines()
    header = next(i for i, line in enumerate(report) if line.startswith("| env |"))
    start = next(i for i, line in enumerate(report) if line.startswith("| CartPole-v1 | ppo_td |"))
    end = next(i for i in range(start, len(report)) if SPEED_LABEL in report[i])
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in [report[header],
                                                                                 *report[start:end + 1]]]
    assert published.check_run_table("report", cells, published.groups(runs)) == []
    written, note = cells[-1][-1], cells[-1][-2]
    cells[-1][-1] = "9.99x" + written[written.index("x") + 1:]
    problems = published.check_run_table("report", cells, published.groups(runs))
    assert len(problems) == 1 and SPEED_LABEL in problems[0] and f"the store gives {written} over" in problems[0]
    cells[-1][-1], cells[-1][-2] = written, note.replace("run on 20", "run on 19")  # a stale date fails too
    assert len(published.check_run_table("report", cells, published.groups(runs))) == 1
    # an ablation's rows between the env's own and its P and speed rows are not what those are computed from
    mcc = next(i for i, line in enumerate(report) if line.startswith("| MountainCarContinuous-v0 | ppo_td |"))
    end = next(i for i in range(mcc, len(report)) if SPEED_LABEL in report[i])
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in [report[header], *report[mcc:end + 1]]]
    assert any("on `" in r[1] for r in rows) and published.check_run_table("report", rows, published.groups(runs)) == []
