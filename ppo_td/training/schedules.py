"""Learning-rate schedules beyond torch's own: the KL-adaptive rate of the robot-learning libraries (rsl_rl's
``schedule="adaptive"``, rl_games' ``AdaptiveScheduler``, skrl's ``KLAdaptiveLR``)."""

from __future__ import annotations

import math

import torch

FACTOR = 1.5
"""How much one adaptation divides or multiplies the learning rate (rsl_rl, rl_games and skrl alike)."""


class KLAdaptiveLR(torch.optim.lr_scheduler.LRScheduler):
    """The learning rate adapted to the KL the update measures: divided by 1.5 where the KL exceeds twice
    ``desired_kl``, multiplied by 1.5 where it is under half of it and above 0, kept within ``[min_lr, max_lr]``
    (rsl_rl's ``PPO.update``, ``schedule="adaptive"``; its bounds 1e-5 and 1e-2). :meth:`adapt` applies the rule to
    every parameter group; :meth:`step` (once an iteration, as the training loop calls any scheduler) leaves the
    rate where the adaptations put it. The rate lives in the optimizer's parameter groups, so the optimizer's
    ``state_dict`` carries it into a checkpoint and back.

    Example:
        >>> opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        >>> schedule = KLAdaptiveLR(opt, desired_kl=0.01)
        >>> schedule.adapt(0.05)  # more than twice the target: 1e-3 / 1.5
        0.0006666666666666666
    """

    def __init__(self, optimizer: torch.optim.Optimizer, desired_kl: float, min_lr: float = 1e-5,
                 max_lr: float = 1e-2, last_epoch: int = -1) -> None:
        if not (desired_kl > 0 and 0 < min_lr < max_lr):
            raise ValueError(f"KLAdaptiveLR: desired_kl={desired_kl} must be > 0 and 0 < min_lr={min_lr} < "
                             f"max_lr={max_lr}")
        self.desired_kl, self.min_lr, self.max_lr = desired_kl, min_lr, max_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        """Each group's rate as the adaptations left it (an iteration's step does not change it)."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def adapt(self, kl: float) -> float:
        """One adaptation on a measured ``kl``; returns the first group's rate after it. A KL that is not finite
        changes nothing (the update's own checks name the failure)."""
        if math.isfinite(kl):
            for group in self.optimizer.param_groups:
                if kl > 2.0 * self.desired_kl:
                    group["lr"] = max(self.min_lr, group["lr"] / FACTOR)
                elif 0.0 < kl < self.desired_kl / 2.0:
                    group["lr"] = min(self.max_lr, group["lr"] * FACTOR)
        return self.optimizer.param_groups[0]["lr"]
