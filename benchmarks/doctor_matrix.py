"""Which classic PPO mistakes the doctor finds, in scripts written in different hands, at which line.

Runs ``ppo-td doctor --json`` on every correct host script of ``tests/doctor_hosts/`` (a finding there is a false
positive) and on every mistake injected into each (``tests/doctor_hosts/mistakes.py``), and prints the table:
the kind found and the line it names, or ``missed``.

    python -m benchmarks.doctor_matrix
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

HOSTS = Path(__file__).resolve().parent.parent / "tests" / "doctor_hosts"
KIND = {"a1": 9, "a2": 9, "a3": 9, "b1": 10, "b2": 10, "b3": 6, "c1": 11, "d1": 12, "d2": 12, "d3": 12, "e1": 13,
        "e2": 13, "f1": 14, "g1": 15, "h1": 16}
NAMES = {"a1": "no zero_grad", "a2": "zero_grad on another module", "a3": "zero_grad between backward and step",
         "b1": "old log-probs = current policy", "b2": "old log-probs carry a graph",
         "b3": "old log-probs from another policy", "c1": "ratio detached", "d1": "entropy minimized",
         "d2": "surrogate ascended", "d3": "min/max swapped", "e1": "value [B,1] vs returns [B]",
         "e2": "multi-dim log-probs not summed", "f1": "critic in no optimizer", "g1": "dropout while acting",
         "h1": "advantages normalized over 1 sample"}


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
    from mistakes import MISTAKES, mutate

    hosts = sorted(MISTAKES)
    false_positives = {h: [f["title"] for f in _doctor(HOSTS / h)["findings"]] for h in hosts}
    rows = [f"| mistake | {' | '.join(h[:-3] for h in hosts)} |", f"|---|{'---|' * len(hosts)}"]
    found = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for code in KIND:
            cells = []
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
                total += 1
                found += bool(hits and named)
                cells.append(f"[{KIND[code]}] line {line}" if hits and named else
                             (f"[{KIND[code]}], another line" if hits else "missed"))
            rows.append(f"| {code} {NAMES[code]} | {' | '.join(cells)} |")
    print("\n".join(rows))
    print(f"\nfound with their line: {found} of {total}; findings on the {len(hosts)} correct scripts: "
          f"{sum(len(v) for v in false_positives.values())} {false_positives if any(false_positives.values()) else ''}")


if __name__ == "__main__":
    main()
