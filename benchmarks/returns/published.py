"""Every published return, recomputed from the result store: ``python -m benchmarks published``.

Three checks, each failing on a number the store does not give within the rounding it is written with:

- ``report.md`` is what ``python -m benchmarks returns ... --report`` writes from ``runs.jsonl`` today (its date
  aside; the plots are not drawn again).
- Every table of ``docs/learning.md``: a row with seeds is one library's runs of one config (the latest run per
  seed, as the report takes them), found by its numbers among all the store's groups: every column it shows (seeds,
  the last-100 mean +- std, median, IQM and interval, the evaluation, minutes, frames/s) must agree, and its
  evaluation cell must say "N of M episodes ended" and "starts shared by seeds" exactly where the report does; a
  ``P(ppo_td run > SB3 run)`` row is recomputed from the ppo_td and SB3 rows matched above it; an anchor row's
  number is one of ``benchmarks.returns.suites.ANCHORS``; a suite's normalized table is the report's. A row quoting runs
  outside the store says "not in the store" and is left alone.
- The README's returns row: each suite's normalized IQM for ppo_td and SB3.

``tests/test_published_numbers.py`` runs it in the suite; ``--report`` writes the report first, then checks.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.returns.report import (
    LABEL,
    SPEED_LABEL,
    aggregates,
    eval_notes,
    pair_improvement,
    row_values,
    speed_ratio,
    suite_scores,
    write_report,
)
from benchmarks.returns.suites import ANCHORS, SUITES, read_store

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "benchmarks" / "results" / "returns"
ALL_SUITES = list(SUITES)
OUTSIDE = "not in the store"
"""What a table row quoting runs the store does not hold says (in its first cells)."""

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


@dataclass(frozen=True)
class Written:
    """A number as written: its value and the half of its last digit's unit (the rounding it allows)."""

    value: float
    slack: float

    def holds(self, computed: float) -> bool:
        return abs(computed - self.value) <= self.slack + 1e-9 * max(1.0, abs(computed))


def numbers(text: str) -> list[Written]:
    """The numbers in ``text`` as written (``2,418.5``, ``-0.0672``, ``0``)."""
    out = []
    for token in _NUMBER.findall(text):
        plain = token.replace(",", "")
        decimals = len(plain.split(".")[1]) if "." in plain else 0
        out.append(Written(float(plain), 0.5 * 10.0 ** -decimals))
    return out


def groups(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The store's runs by config (library, env, preset and the config's digest: the run key without its seed), each
    the latest run per seed, by seed: the groups a table row can describe."""
    by_key: dict[str, dict[int, dict[str, Any]]] = {}
    for run in runs:  # in the order written: a later run of the same key and seed replaces the earlier
        by_key.setdefault(run["key"].rsplit("|", 1)[0], {})[run["seed"]] = run
    return {key: [seeds[s] for s in sorted(seeds)] for key, seeds in by_key.items()}


def tables(text: str) -> Iterator[tuple[int, str, list[list[str]]]]:
    """The Markdown tables of ``text``: (line number of the header, the suite of the section they sit in, the rows'
    cells, the header first, the separator left out)."""
    lines = text.splitlines()
    suite, i = "", 0
    while i < len(lines):
        heading = re.match(r"#+\s+(\w+)", lines[i])
        if heading:
            suite = heading.group(1) if heading.group(1) in SUITES else ""
        if lines[i].startswith("|"):
            start = i
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[i].strip()):
                    rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            yield start + 1, suite, rows
            continue
        i += 1


def _kind(header: str) -> str:
    """What a run table's column holds, from its header."""
    h = header.lower()
    for key, kind in (("last 100", "last"), ("eval", "eval"), ("iqm", "iqm"), ("median", "median"),
                      ("minutes", "minutes"), ("frames/s", "fps")):
        if key in h:
            return kind
    return "seeds" if h == "seeds" else "text"


def _library(label: str) -> str:
    return "sb3" if "SB3" in label or "Stable-Baselines3" in label else "ppo_td"


def _differences(kinds: list[str], cells: list[str], values: dict[str, Any]) -> list[str]:
    """Where a row's cells differ from a group's numbers beyond the rounding they are written with."""
    out = []
    for kind, cell in zip(kinds, cells, strict=False):
        if kind == "text":
            continue
        written = numbers(cell.split("(")[0])  # the numbers before a note in brackets
        if kind == "seeds":
            expected = [float(values["seeds"])]
        elif kind == "last":
            expected = list(values["last"])
        elif kind == "median":
            expected = [values["median"]]
        elif kind == "iqm":
            expected = list(values["iqm"])
        elif kind == "eval":
            expected = list(values["eval"]) if values["eval"] else []
            for note in re.findall(r"\(([^)]*)\)", eval_notes(values)):
                if note not in cell:
                    out.append(f"its evaluation does not say ({note})")
            if "episodes ended" in cell and "episodes ended" not in eval_notes(values):
                out.append("its evaluation says episodes were cut where none was")
            if "starts shared by seeds" in cell and not values["shared"]:
                out.append("its evaluation says its starts were shared where they were the runs' own")
        elif kind == "minutes":
            expected = [values["minutes"]]
        else:
            expected = [values["fps"]]
        if cell.strip() in ("", "-") and kind in ("median", "fps", "minutes"):
            continue  # a column a row leaves blank (a row of another kind's table)
        if len(written) != len(expected) or not all(w.holds(e) for w, e in zip(written, expected, strict=False)):
            shown = ", ".join(f"{e:,.4g}" for e in expected) or "none"
            out.append(f"{kind}: written {cell!r}, the store gives {shown}")
    return out


def check_run_table(where: str, rows: list[list[str]], store_groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The problems of one table whose rows are runs (its header has a last-100 column)."""
    kinds = [_kind(h) for h in rows[0]]
    seeds_col = kinds.index("seeds") if "seeds" in kinds else None
    text_cols = [i for i, k in enumerate(kinds) if k == "text"][:2]
    problems: list[str] = []
    matched: dict[str, list[dict[str, Any]] | None] = {}
    for n, cells in enumerate(rows[1:], 1):
        label = " ".join(cells[i] for i in text_cols if i < len(cells))
        if OUTSIDE in " ".join(cells):
            continue
        row = f"{where}, row {n} ({label.strip() or cells[0]})"
        if seeds_col is None or not cells[seeds_col].strip():
            figures = [c for c, k in zip(cells, kinds, strict=False) if k != "text"]
            problems += _check_unseeded(row, label, figures, matched, " ".join(cells))
            continue
        library = _library(label)
        if not cells[seeds_col].strip().isdigit():
            problems.append(f"{row}: its seeds {cells[seeds_col]!r} are not one count (one library's runs a row)")
            continue
        found, closest = None, None
        for key, group in store_groups.items():
            if not key.startswith(library + "|") or len(group) != int(cells[seeds_col]):
                continue
            last = cells[kinds.index("last")] if "last" in kinds else ""
            if last and _differences(["last"], [last], {"last": _last(group)}):
                continue  # (the cheap column first: most groups end here, before any bootstrap)
            wrong = _differences(kinds, cells, row_values(group))
            if not wrong:
                found = group
                break
            closest = closest or (key, wrong)
        if "on `" not in label and "*" not in label:  # an ablation's or an older run's row is no P row's source
            matched[library] = found  # (None where it matched nothing: no P row is computed from an older row)
        if found is None:
            because = f"; the nearest, {closest[0]}: {'; '.join(closest[1])}" if closest else ""
            problems.append(f"{row}: no {LABEL[library]} runs in the store give these numbers{because} (a row "
                            f"quoting runs outside the store says '{OUTSIDE}')")
    return problems


def _last(group: list[dict[str, Any]]) -> tuple[float, float]:
    """The last-100 column alone (mean, std over seeds): what picks a row's candidates before any bootstrap."""
    last = np.array([r["last100"] for r in group])
    return float(last.mean()), float(last.std())


def _check_unseeded(row: str, label: str, cells: list[str],
                    matched: dict[str, list[dict[str, Any]] | None], whole: str = "") -> list[str]:
    """A row without seeds (``cells``: its columns of numbers; ``whole``: all its cells): P(ppo_td run > SB3 run) or
    the frames/s ratio from the env's own ppo_td and SB3 rows matched above it, or a published anchor."""
    if "P(ppo_td run > SB3 run)" in label:
        if matched.get("ppo_td") is None or matched.get("sb3") is None:
            return [f"{row}: no ppo_td and SB3 rows matched above it to compute it from"]
        p, low, high = pair_improvement(matched["ppo_td"], matched["sb3"])
        written = [w for c in cells for w in numbers(c)]
        if len(written) != 3 or not all(w.holds(e) for w, e in zip(written, (p, low, high), strict=True)):
            return [f"{row}: written {' '.join(cells).strip()!r}, the store gives {p:.2f} [{low:.2f}, {high:.2f}]"]
        return []
    if SPEED_LABEL in label:
        if matched.get("ppo_td") is None or matched.get("sb3") is None:
            return [f"{row}: no ppo_td and SB3 rows matched above it to compute it from"]
        speed = speed_ratio(matched["ppo_td"], matched["sb3"])
        ratio = re.search(r"(\d[\d.]*)x \((\d[\d.]*)-(\d[\d.]*)\)", whole)
        said = speed is not None and f"over {speed[3]} seeds" in whole and f"run on {speed[4]}" in whole
        if speed is None or ratio is None or not said or not all(
                numbers(g)[0].holds(e) for g, e in zip(ratio.groups(), speed[:3], strict=True)):
            given = "nothing" if speed is None else "{:.2f}x ({:.2f}-{:.2f}) over {} seeds, run on {}".format(*speed)
            return [f"{row}: written {whole.strip()!r}, the store gives {given}"]
        return []
    written = [w for c in cells for w in numbers(c.split("(")[0])]
    published = [mean for anchors in ANCHORS.values() for source, mean, _, _ in anchors if source in label]
    if not written or not any(written[0].holds(m) for m in published):
        return [f"{row}: neither runs of the store (no seeds) nor an anchor of benchmarks.returns.suites.ANCHORS "
                f"named as its label names it"]
    return []


def suite_aggregates(suite: str, runs: list[dict[str, Any]], store: Path) -> dict[str, Any]:
    _, normalized, envs, _ = suite_scores(suite, runs, store)
    return aggregates(normalized, envs) if envs else {}


def check_aggregate_table(where: str, suite: str, rows: list[list[str]], runs: list[dict[str, Any]],
                          store: Path) -> list[str]:
    """A suite's normalized table (library, seeds, IQM, mean) against the report's."""
    if not suite:
        return [f"{where}: a normalized table outside a suite's section (### SUITE, ...): which suite is it?"]
    computed = suite_aggregates(suite, runs, store)
    problems = []
    for cells in rows[1:]:
        library = _library(cells[0])
        if library not in computed:
            problems.append(f"{where}, {cells[0]}: the store has no normalized {suite} score for it")
            continue
        seeds, iqm, mean = computed[library]
        written = [w for c in cells[2:] for w in numbers(c)]
        expected = [*iqm, *mean]
        if numbers(cells[1]) != [Written(float(s), 0.5) for s in seeds] or len(written) != 6 or not all(
                w.holds(e) for w, e in zip(written, expected, strict=True)):
            problems.append(f"{where}, {cells[0]}: written {' | '.join(cells[1:])}, the store gives seeds "
                            f"{', '.join(map(str, seeds))}, IQM {iqm[0]:.2f} [{iqm[1]:.2f}, {iqm[2]:.2f}], mean "
                            f"{mean[0]:.2f} [{mean[1]:.2f}, {mean[2]:.2f}]")
    return problems


def check_learning(path: Path, runs: list[dict[str, Any]], store: Path) -> list[str]:
    """Every table of ``path`` (docs/learning.md) against the store."""
    store_groups = groups(runs)
    problems = []
    for line, suite, rows in tables(path.read_text()):
        where = f"{path.name}:{line}"
        header = [h.lower() for h in rows[0]]
        if any("last 100" in h for h in header):
            problems += check_run_table(where, rows, store_groups)
        elif header[:2] == ["library", "seeds"]:
            problems += check_aggregate_table(where, suite, rows, runs, store)
    return problems


def check_readme(path: Path, runs: list[dict[str, Any]], store: Path) -> list[str]:
    """The README's returns row: each suite it names, in its order, ppo_td's and SB3's normalized IQM."""
    row = next((line for line in path.read_text().splitlines() if line.startswith("| Returns, normalized IQM")), None)
    if row is None:
        return [f"{path.name}: no results row starting '| Returns, normalized IQM'"]
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    named = sorted((cells[0].lower().find(s), s) for s in ALL_SUITES if s in cells[0].lower())
    problems = []
    for column, library in ((1, "ppo_td"), (2, "sb3")):
        parts = [p.strip() for p in cells[column].split(";")]
        if len(parts) != len(named):
            problems.append(f"{path.name}: the returns row names {len(named)} suites, its {LABEL[library]} cell has "
                            f"{len(parts)} numbers")
            continue
        for (_, suite), part in zip(named, parts, strict=True):
            seeds_iqm = suite_aggregates(suite, runs, store).get(library)
            written = numbers(part)
            if seeds_iqm is None or len(written) != 3 or not all(
                    w.holds(e) for w, e in zip(written, seeds_iqm[1], strict=True)):
                given = "nothing" if seeds_iqm is None else "{:.2f} [{:.2f}, {:.2f}]".format(*seeds_iqm[1])
                problems.append(f"{path.name}: {suite}, {LABEL[library]}: written {part}, the store gives {given}")
    return problems


def check_report(store: Path) -> list[str]:
    """``store/report.md`` against the report made from the store now (the date line aside)."""
    written = (store / "report.md").read_text().splitlines()
    made = write_report(ALL_SUITES, store, plots=False, write=False).splitlines()
    if written[1:] == made[1:]:
        return []
    for n, (a, b) in enumerate(zip(written, made, strict=False), 1):
        if n > 1 and a != b:
            return [f"report.md:{n} is not what the store gives now (python -m benchmarks returns "
                    f"{' '.join(ALL_SUITES)} --report):\n  written: {a}\n  now:     {b}"]
    return [f"report.md has {len(written)} lines, the store gives {len(made)}"]


def check(root: Path = ROOT, store: Path = STORE) -> list[str]:
    """Every problem of the report, learning.md and the README's row against ``store``."""
    runs = read_store(store)
    return (check_report(store) + check_learning(root / "docs" / "learning.md", runs, store)
            + check_readme(root / "README.md", runs, store))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks published", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=STORE)
    parser.add_argument("--report", action="store_true", help="write report.md from the store first")
    args = parser.parse_args(argv)
    if not (args.store / "runs.jsonl").is_file():
        parser.error(f"--store: {args.store} holds no runs.jsonl (the result store of python -m benchmarks returns)")
    if not args.report and not (args.store / "report.md").is_file():
        parser.error(f"{args.store} has no report.md yet: make it with --report (it is written, then checked)")
    if args.report:
        write_report(ALL_SUITES, args.store)
    problems = check(ROOT, args.store)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} number{'' if len(problems) == 1 else 's'} the store does not give" if problems else
          "the report, docs/learning.md's tables and the README's returns row are what the store gives")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
