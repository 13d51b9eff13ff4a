"""Item 18: the rollouts a policy loss trains on were acted deterministically. A TorchRL policy samples its action
only under a random exploration type: a collector made with ``exploration_type=ExplorationType.DETERMINISTIC``
(or ``MODE``/``MEAN``), a rollout inside ``set_exploration_type(DETERMINISTIC)``, or a ``ProbabilisticActor`` called
outside any exploration context with a deterministic default acts with its mode: PPO's policy gradient then trains
on actions the policy never sampled, and nothing explores.

Which rollouts made the batch: a batch with TorchRL's ``collector`` entries comes from a collector, so a TorchRL
loss on it is judged by the rollouts collectors ran in this process (none seen: a collector in another process,
not judged); another batch by the other rollouts (``env.rollout``, a loop of the user's). Without a TorchRL loss, a
backward that reaches a policy is judged by every rollout since the last judgment. One random rollout among them
(an evaluation in deterministic mode next to a random collection) is fine."""

from __future__ import annotations

import inspect
import os
import re
import sys

import torch

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.detectors.loss_ratio import acts, source_line
from ppo_td.doctor.lines import LIBRARIES, call_chain

_DETERMINISTIC = {"deterministic", "mode", "mean", "median"}
_COLLECTORS = tuple(os.path.join(d, "collectors", "") for d in LIBRARIES)
_COLLECTOR = re.compile(r"Collector\s*\(")


class Exploration(Detector):
    KINDS = {18: ("the rollouts the policy trains on were acted deterministically", 6.8)}

    def __init__(self) -> None:
        # kind of rollout ("collector", "other") -> [(acted deterministically, where)] since the last judgment:
        # the first deterministic one and the first random one are enough
        self.rollouts: dict[str, list[tuple[bool, str]]] = {"collector": [], "other": []}
        self.first = ""  # where the first deterministic rollout judged was made (its collector, if one)
        self.losses = False  # a TorchRL loss was seen: it judges
        self.defaults: dict[int, tuple[torch.nn.Module, str | None]] = {}  # module id -> its default interaction

    def forward(self, a: Audit, module: str, output, record) -> None:
        if record is not None or torch.is_grad_enabled() or a.in_loss or not acts(a, module):
            return
        if not hasattr(output, "keys") or "next" in output.keys():
            return  # (a plain tensor policy samples by itself; a forward on collected data is no rollout)
        deterministic = self._deterministic(a.called)
        if deterministic is None:
            return
        collector = _collector()
        if collector == "__init__":
            return  # (a collector's probe of the policy as it is made: no rollout)
        seen = self.rollouts["collector" if collector else "other"]
        if any(d == deterministic for d, _ in seen):
            return
        where = ""
        if deterministic:
            where = call_chain()
            if collector:  # (its exploration_type is set where it is made)
                where = source_line(where, _COLLECTOR, prefer="exploration_type") or where
        seen.append((deterministic, where))

    def loss(self, a: Audit, name: str, module, batch, output, where: str) -> None:
        if not torch.is_grad_enabled() or not hasattr(output, "keys") or "loss_objective" not in output.keys():
            return
        self.losses = True
        kind = "collector" if hasattr(batch, "keys") and "collector" in batch.keys() else "other"
        rollouts, self.rollouts = self.rollouts[kind], {"collector": [], "other": []}
        self._judge(a, rollouts, f"{name}'s forward at {where}", where)

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        if self.losses or not record.modules & set(a.policies()):
            return
        rollouts = self.rollouts["collector"] + self.rollouts["other"]
        self.rollouts = {"collector": [], "other": []}
        self._judge(a, rollouts, f"backward #{record.index}", record.where)

    def _judge(self, a: Audit, rollouts: list[tuple[bool, str]], what: str, where: str) -> None:
        if not rollouts or not all(d for d, _ in rollouts):
            return
        self.first = made = self.first or rollouts[0][1]
        a.add(18, "the policy trains on rollouts it acted deterministically: it never explores",
              f"every rollout of the policy before {what} ran in a deterministic exploration type (the first at "
              f"{made}): its actions are the distribution's mode, so the policy gradient trains on actions it "
              "never sampled and the old log-probs are those of the mode",
              "collect with exploration_type=ExplorationType.RANDOM (a collector's default), or act inside "
              "torchrl.envs.utils.set_exploration_type(ExplorationType.RANDOM); keep DETERMINISTIC for evaluation",
              where, made=made)

    def _deterministic(self, module: torch.nn.Module) -> bool | None:
        """Whether a TensorDict policy acts with its mode now: TorchRL's exploration type where one is set, else
        the policy's own default; None for a policy without a distribution module (it samples by itself)."""
        known = self.defaults.get(id(module))
        if known is None or known[0] is not module:
            found = [m.default_interaction_type for m in module.modules() if hasattr(m, "default_interaction_type")]
            known = self.defaults[id(module)] = (module, _name(found[-1]) if found else None)
        if known[1] is None:
            return None
        utils = sys.modules.get("torchrl.envs.utils")
        current = utils.exploration_type() if utils is not None else None
        return (_name(current) if current is not None else known[1]) in _DETERMINISTIC


def _name(interaction) -> str:
    return str(getattr(interaction, "value", interaction)).lower()


def _collector() -> str:
    """``__init__`` when a TorchRL collector probes the policy as it is made, ``run`` when a collector runs the
    forward being handled otherwise, or "" when no collector does."""
    frame, found = inspect.currentframe(), ""
    try:
        while frame is not None:
            if frame.f_code.co_filename.startswith(_COLLECTORS):
                if frame.f_code.co_name == "__init__":
                    return "__init__"
                found = "run"
            frame = frame.f_back
        return found
    finally:
        del frame


DETECTOR = Exploration
