"""The doctor: find the autograd mistakes that break hand-written PPO updates.

:func:`audit` works on any ``nn.Module``\\ s and optimizers (it needs nothing else of
ppo_td); :func:`checkup` runs one collection and one update of a ppo_td pipeline under it.
"""

from ppo_td.doctor.audit import Audit, Finding, audit
from ppo_td.doctor.checkup import checkup
from ppo_td.doctor.explain import DoctorError, Explanation, explain

__all__ = ["Audit", "DoctorError", "Explanation", "Finding", "audit", "checkup", "explain"]
