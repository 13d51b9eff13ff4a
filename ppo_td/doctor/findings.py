"""What the doctor reports: findings grouped by (kind, source line), most severe first, as text or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ppo_td.doctor.lines import location

# the doctor's kinds of mistake (``Finding.item``) and their severity (0 is the most severe: what crashes, what
# poisons the weights, what silently trains the wrong thing, what wastes): each detector declares its own
# (ppo_td.doctor.detectors); a failing backward is explained without one
KINDS = {3: "backward fails"}
_SEVERITY = {3: 0}


def declare(item: int, kind: str, severity: float) -> None:
    """Make ``item`` a kind of finding, named ``kind``, ranked by ``severity`` (a detector's declaration)."""
    KINDS[item], _SEVERITY[item] = kind, severity


MAX_CULPRIT = 480  # characters of a culprit in the text report (--json keeps it whole)


@dataclass
class Finding:
    """One diagnosed mistake: its kind (``item``, see :data:`KINDS`), what, the culprit, the fix, and where.

    The same finding (kind and title) at one source line is one finding: ``count`` says how often it was seen
    and ``steps`` during which optimizer steps (1 = before the first step had run, and so on). ``made`` is the
    line where the wrong tensor was made (or the wrong call stands), ``where`` the line where it was seen (the
    backward or the step); the report shows ``made`` first. ``made`` is a call chain where the tensor was made
    inside the user's functions or modules, the user's outer call first (``lines.call_chain``): the fix names that
    line (:attr:`change`).
    """

    item: int
    title: str
    culprit: str
    fix: str
    where: str = ""
    count: int = 1
    steps: list[int] = field(default_factory=list)
    made: str = ""

    @property
    def change(self) -> str:
        """``file:line`` of the line to change: the user's outer call that made the wrong tensor ("" if unknown)."""
        return location(self.made)

    @property
    def severity(self) -> float:
        """0 is the most severe."""
        return _SEVERITY.get(self.item, float(len(_SEVERITY)))

    def __str__(self) -> str:
        seen = f"seen {self.count}x" + (f", during step(s) {ranges(self.steps)}" if self.steps else "")
        lines = [f"[{self.item}] {self.title} ({seen})"]
        if self.made:
            lines.append(f"    made at: {self.made}")
        if self.where and self.where != self.made:
            lines.append(f"    {'seen at' if self.made else 'at'}: {self.where}")
        culprit = self.culprit if len(self.culprit) <= MAX_CULPRIT else (
            self.culprit[:MAX_CULPRIT].rsplit(" ", 1)[0] + " ... (--json: all of it)")
        fix = f"at {self.change}: {self.fix}" if self.change else self.fix
        return "\n".join([*lines, f"    culprit: {culprit}", f"    fix: {fix}"])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": KINDS.get(self.item, ""), "severity": self.severity, "change": self.change}


@dataclass
class ErrorReport:
    """The exception that ended the audited code: its text, the user's line, and what the doctor made of it."""

    type: str
    message: str
    where: str
    finding: Finding | None = None

    def __str__(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        lines = [f"the code stopped with {self.type}" + (f": {first}" if first else ""), f"    at: {self.where}"]
        if self.finding is not None:
            lines += [f"    why: {self.finding.culprit}", f"    fix: {self.finding.fix}"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "where": self.where,
                "finding": self.finding.to_dict() if self.finding else None}


class Findings:
    """The findings of one audit, grouped by (kind, title, line)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[int, str], Finding] = {}

    def add(self, finding: Finding, step: int) -> Finding:
        """Add ``finding`` seen during optimizer step ``step``; returns the group it joined (or started)."""
        key = (finding.item, finding.title, finding.made or finding.where or finding.culprit)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = finding
            group.count = 0
        group.count += 1
        if step not in group.steps:
            group.steps.append(step)
        return group

    def ordered(self) -> list[Finding]:
        """Most severe first; within a kind, in the order first seen."""
        return sorted(self._groups.values(), key=lambda f: f.severity)

    def __len__(self) -> int:
        return len(self._groups)


def render(head: str, findings: list[Finding], error: ErrorReport | None) -> str:
    """The text report: the head line, every finding (the error's own last, as the error), then the error."""
    shown = [f for f in findings if error is None or f is not error.finding]
    if not findings and error is None:
        return head + "\nno findings: the update is clean."
    parts = [head]
    if shown:
        parts.append(f"{len(shown)} finding(s), most severe first:")
        parts += [str(f) for f in shown]
    if error is not None:
        parts.append(str(error))
    return "\n".join(parts)


def ranges(steps: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    out, run = [], []
    for s in sorted(steps):
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)
