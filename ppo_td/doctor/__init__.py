"""The doctor: find the autograd mistakes that break hand-written PPO updates.

:func:`audit` works on any ``nn.Module``\\ s and optimizers and needs nothing else of ppo_td
(importing it loads torch only); :func:`checkup` runs one collection and one update of a
ppo_td pipeline under it (it loads the training layer on first use).
"""

from typing import Any

from ppo_td.doctor.explain import DoctorError, Explanation, explain
from ppo_td.doctor.watch import Audit, Finding, audit

__all__ = ["Audit", "DoctorError", "Explanation", "Finding", "audit", "checkup", "explain"]


def __getattr__(name: str) -> Any:
    if name == "checkup":
        from ppo_td.doctor.pipeline import checkup

        return checkup
    raise AttributeError(f"module 'ppo_td.doctor' has no attribute {name!r}")
