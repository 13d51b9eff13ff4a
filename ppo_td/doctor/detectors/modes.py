"""Item 15: dropout or batch norm acting differently in the rollout and the update: a policy with such layers
that acts in train mode (its log-probs are sampled with dropout on, or normalized by the rollout's batch), or
that is updated in eval mode, so the update's log-probs are not the rollout's."""

from __future__ import annotations

from torch import nn

from ppo_td.doctor.audit import Audit, Forward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.lines import call_chain, outer

_MODAL = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout,
          nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


class Modes(Detector):
    KINDS = {15: ('dropout or batch norm acts differently in the rollout and the update', 12)}

    def __init__(self) -> None:
        self.modal: dict[str, list[str]] = {}  # module -> its dropout / batch-norm layers
        self.reported: set[tuple[str, bool]] = set()

    def forward(self, a: Audit, module: str, output, record: Forward | None) -> None:
        net = a.modules[module]
        if module not in self.modal:
            self.modal[module] = [f"{n or module} ({type(m).__name__})" for n, m in net.named_modules()
                                  if isinstance(m, _MODAL) and getattr(m, "p", 1) != 0]
        if not self.modal[module]:
            return
        rollout = record is None  # a forward whose output carries no graph: acting, under no_grad
        wrong = net.training if rollout else not net.training
        if not wrong or (module, rollout) in self.reported:
            return
        self.reported.add((module, rollout))
        a.notes.add(("modes", module))  # (the ratio's first-minibatch check has its cause here)
        where = record.chain if record is not None else call_chain()
        layers = ", ".join(self.modal[module][:3])
        if rollout:
            title = f"{module} acts in train mode with dropout or batch norm"
            culprit = (f"{module} ({layers}) ran in train mode without gradient (a rollout) at {where}: its actions "
                       "and log-probs come from a randomly thinned (or batch-normalized) network that the update "
                       "never reproduces, so the ratio is not 1 even before a step")
        else:
            title = f"{module} is updated in eval mode with dropout or batch norm"
            culprit = (f"{module} ({layers}) ran in eval mode in the loss at {where}: the update trains the network "
                       "as it never acts in training")
        a.add(15, title, culprit, "act with policy.eval() (dropout off, running statistics) and call policy.train() "
              "before the update's forwards, or drop dropout and batch norm from the policy (PPO rarely needs them)",
              outer(where), made=where)


DETECTOR = Modes
