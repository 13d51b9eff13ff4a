"""Items 6 and 10 inside TorchRL's ``ClipPPOLoss``, read from what it returns for logging (``max_ratio`` and
``mean_ratio``, the ratio of the current policy to the one the batch's log-probs came from): the doctor computes
nothing. On the first minibatch after a rollout seen in this process, before any step, every ratio must be 1: if
not, the batch holds transitions of an older policy (a replay buffer larger than one batch and never emptied keeps
earlier iterations) or log-probs of another network. Once the policy has moved away from the batch's log-probs
(ratios other than 1), ratios of exactly 1 after a forward of the policy on the collected batch mean that forward
recomputed the old log-probs with the current policy."""

from __future__ import annotations

import re

import torch

from ppo_td.doctor.audit import Audit
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import call_chain, filename_of, format_line, getlines, neighbours

FIRST_TOLERANCE = 1e-3  # |ratio - 1| on the first minibatch after a rollout (float rounding, tanh's inverse)
ONE = 1e-6  # |ratio - 1| below which every ratio of a minibatch is 1
_BUFFER = re.compile(r"(ReplayBuffer|Storage)\s*\(")


class LossRatio(Detector):
    KINDS = {6: ("PPO ratio is not 1 on the first minibatch", 15),
             10: ("the ratio's old log-probs are wrong", 2)}

    def __init__(self) -> None:
        self.rollout_step: int | None = None  # optimizer steps done at the latest rollout
        self.first_checked: int | None = None
        self.recomputed: tuple[int, str] | None = None  # (steps done, call chain) of a policy forward on collected
        # data without gradient, after the latest rollout and a step
        self.moved = False  # a loss after the rollout had ratios other than 1

    def forward(self, a: Audit, module: str, output, record) -> None:
        if record is not None or torch.is_grad_enabled() or a.in_loss or not acts(a, module):
            return
        if hasattr(output, "keys") and "next" in output.keys():  # (collected transitions: not acting)
            if self.rollout_step is not None and a._steps > self.rollout_step:
                self.recomputed = (a._steps, call_chain())
            return
        if self.rollout_step != a._steps:
            self.rollout_step, self.recomputed, self.moved = a._steps, None, False

    def loss(self, a: Audit, name: str, module, batch, output, where: str) -> None:
        if not hasattr(output, "keys") or not torch.is_grad_enabled() or self.rollout_step is None:
            return
        if "max_ratio" not in output.keys() or "mean_ratio" not in output.keys():
            return  # (ClipPPOLoss reports them; PPOLoss and KLPENPPOLoss in TorchRL 0.14 do not)
        largest, mean = torch.stack([output["max_ratio"].detach(), output["mean_ratio"].detach()]).tolist()
        deviation = max(abs(largest - 1), abs(mean - 1))
        if a._steps == self.rollout_step:
            if self.first_checked == a._steps:
                self.moved = self.moved or deviation >= ONE
                return
            self.first_checked = a._steps  # the first minibatch after a rollout: the policy that acted
            if deviation > FIRST_TOLERANCE:
                self.moved = True
                buffer = source_line(where, _BUFFER)
                a.add(6, "PPO ratio is not 1 on the first minibatch of the update",
                      f"max_ratio {largest:.4g} and mean_ratio {mean:.4g} on the first minibatch after the rollout, "
                      "before any step: the batch holds transitions of an older policy (" + (
                          f"the replay buffer made at {buffer}" if buffer else "a replay buffer") + " keeps earlier "
                      "iterations if it is larger than one batch and never emptied) or log-probs of another "
                      f"network; {name} at {where}",
                      "size the buffer's storage to one batch (LazyTensorStorage(frames_per_batch)) or "
                      "call replay_buffer.empty() after each iteration's update, and record the log-probs with the "
                      "network that is trained", where)
            return
        if deviation >= ONE:
            self.moved = True
            return
        if self.recomputed is None or not self.moved:  # (a batch from a collector the hooks never see, a policy
            # that did not move: a fresh start, not a recomputation)
            self.rollout_step = self.first_checked = a._steps
            self.recomputed, self.moved = None, False
            return
        made = self.recomputed[1]
        a.add(10, "the ratio is 1 after the policy was stepped: its old log-probs were recomputed by the current "
              "policy",
              f"{name} at {where} reports every ratio 1 (max_ratio {largest:.7g}) {a._steps - self.rollout_step} "
              f"optimizer step(s) after the rollout, after ratios other than 1 before; the policy ran on the "
              f"collected data at {made} after the update began: the stored log-probs are now the current "
              "policy's, so clipping never acts",
              "keep the log-probs the collector recorded (action_log_prob): run no forward of the policy on the "
              "collected batch once the update has begun, or recompute only the advantages (GAE)", where,
              made=made)
        self.recomputed, self.moved = None, False


def acts(a: Audit, module: str) -> bool:
    """Whether ``module`` is a policy, or a part of one (a TorchRL actor's network, called by ``get_dist``): it
    holds a parameter of an audited policy."""
    if a.role(module) == "policy":
        return True
    return any(a.role(owner) == "policy" and not a.role_is_guessed(owner)
               for p in a.modules[module].parameters() for owner in a._owners.get(id(p), ()))


def source_line(where: str, pattern: re.Pattern, prefer: str = "") -> str:
    """The first line of code matching ``pattern`` (one that also holds ``prefer``, if any) in the file (or the
    notebook) of ``where`` ("" if none): where the user made a part no hook sees being made (a buffer, a
    collector)."""
    found = []
    for filename in neighbours(filename_of(where)):
        for n, text in enumerate(getlines(filename), start=1):
            if pattern.search(text) and not text.lstrip().startswith(("#", "from ", "import ")):
                found.append((prefer and prefer in text, format_line(filename, n, text)))
    preferred = [line for better, line in found if better]
    return (preferred or [line for _, line in found] or [""])[0]


DETECTOR = LossRatio
