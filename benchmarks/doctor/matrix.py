"""Which classic PPO mistakes the doctor finds, in scripts written in different hands, at which line.

Runs ``ppo-td doctor --json`` on every correct host script of ``tests/doctor_hosts/`` (a finding there is a false
positive) and on every mistake injected into each (``tests/doctor_hosts/mistakes.py``), and prints the table:
the kind found and the line it names, or ``missed``; and, per mistake, a call chain the doctor named (the user's
call first, then the lines inside the user's functions or modules down to the one that made the wrong tensor).

    python -m benchmarks doctor_matrix
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[2] / "tests" / "doctor_hosts"
def _doctor(path: Path) -> dict:
    from ppo_td.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["doctor", str(path), "--steps", "20", "--json"])
    return json.loads(out.getvalue())


def main() -> None:
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(HOSTS))
    from mistakes import KIND, MISTAKES, NAMES, mutate

    hosts = sorted(MISTAKES)
    false_positives = {h: [f["title"] for f in _doctor(HOSTS / h)["findings"]] for h in hosts}
    rows = [f"| mistake | {' | '.join(h[:-3] for h in hosts)} | call chain |", f"|---|{'---|' * (len(hosts) + 1)}"]
    found = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for code in KIND:
            cells, chain = [], ""
            for host in hosts:
                if code not in MISTAKES[host]:
                    cells.append("")
                    continue
                text, line = mutate(host, code)
                path = Path(tmp) / host
                path.write_text(text)
                report = _doctor(path)
                hits = [f for f in report["findings"] if f["item"] == KIND[code]]
                at = f"{path}:{line} "
                named = any(at in f"{f['made']} {f['where']} {f['culprit']} " for f in hits)
                chain = chain or next((f"{host[:-3]}: {_lines(f['made'])}" for f in hits if " -> " in f["made"]), "")
                total += 1
                found += bool(hits and named)
                cells.append(f"[{KIND[code]}] line {line}" if hits and named else
                             (f"[{KIND[code]}], another line" if hits else "missed"))
            rows.append(f"| {code} {NAMES[code]} | {' | '.join(cells)} | {chain} |")
    print("\n".join(rows))
    print(f"\nfound with their line: {found} of {total}; findings on the {len(hosts)} correct scripts: "
          f"{sum(len(v) for v in false_positives.values())} {false_positives if any(false_positives.values()) else ''}")


def _lines(chain: str) -> str:
    """``file:82 (...) -> file:26 (...)`` -> ``82 -> 26``: the line numbers of a call chain, the user's call first."""
    from ppo_td.doctor.lines import CHAIN, line_number

    return CHAIN.join(str(line_number(part)) for part in chain.split(CHAIN))


if __name__ == "__main__":
    main()
