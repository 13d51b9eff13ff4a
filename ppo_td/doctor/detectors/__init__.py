"""The doctor's checks, one detector per module: each reacts to the events it needs and reports findings.

A detector is a class with ``KINDS`` (the kinds of finding it makes, with their severity) and any of the event
methods of :class:`Detector`; a module of this package names its detector ``DETECTOR``. Adding a check is adding
a module here (and a script to ``examples/doctor/``): :func:`registered` finds it.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

from ppo_td.doctor.findings import declare

if TYPE_CHECKING:
    import torch

    from ppo_td.doctor.audit import Audit, Backward, Forward


class Detector:
    """One check. The audit calls, for every detector, the events below (each a no-op here)."""

    KINDS: dict[int, tuple[str, float]] = {}
    """The kinds of finding this detector makes: item -> (what, severity; 0 is the most severe)."""
    calls: frozenset = frozenset()
    """Torch functions whose calls :meth:`call` sees (through the audit's function mode), where gradients are on and
    the result requires grad..."""
    calls_without_grad: frozenset = frozenset()
    """... or, for these of them, whatever the result."""

    def forward(self, a: Audit, module: str, output: Any, record: Forward | None) -> None:
        """An audited module ran (``record``: its forward, where the output carries a graph)."""

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        """A ``backward()`` is about to run through ``record.nodes`` (``children``: each node's inputs)."""

    def step(self, a: Audit, opt: torch.optim.Optimizer, name: str, params: list, where: str) -> None:
        """Optimizer ``name`` is about to step ``params`` (``a._steps`` steps done before it)."""

    def call(self, a: Audit, func: Any, args: tuple, kwargs: dict, result: Any) -> None:
        """A torch function of :attr:`calls` returned ``result``."""

    def loss(self, a: Audit, name: str, module: torch.nn.Module, batch: Any, output: Any, where: str) -> None:
        """A TorchRL loss module (``LossModule``: ``ClipPPOLoss``...) named ``name`` ran on ``batch`` at ``where``
        (the user's call chain) and returned ``output``, its ``loss_*`` terms and logged values."""

    def finish(self, a: Audit) -> None:
        """The audited block ended."""


@functools.cache
def registered() -> tuple[type[Detector], ...]:
    """Every detector of this package, in the order of their modules' names."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        detector = getattr(module, "DETECTOR", None)
        if detector is not None:
            found.append(detector)
            for item, (kind, severity) in detector.KINDS.items():
                declare(item, kind, severity)
    return tuple(found)
