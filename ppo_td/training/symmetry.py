"""A task's symmetry in the update: data augmentation and the mirror loss (``loss.mirror``).

Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot Policies" (ICRA 2024), as rsl_rl runs it
(``rsl_rl/extensions/symmetry.py`` and ``algorithms/ppo.py`` at commit ``c281c32``):

- **augmentation** (``loss.mirror_augment``): each minibatch is doubled with its mirror images, the mirrored
  observations and actions taking the original's stored log-probability, advantage (standardized over the original
  minibatch first), value and value target; the clipped surrogate and the value loss average over both halves; the
  entropy bonus and the KL and clip-fraction diagnostics read the original half (what the adaptive learning rate and
  ``optim.target_kl`` see).
- **mirror loss** (``loss.mirror_loss_coeff``): ``coeff * mean((mu(mirror(s)) - mirror(mu(s)).detach())^2)``, the
  policy's mean action on the mirrored observations against the mirror of its mean action on the originals.

The user's mirror is any object with ``observation(obs)`` and ``action(action)`` (a class is built with no
arguments), each mapping a batch (leading dimension) to its mirror image. It sees observations in the env's units:
with ``env.normalize_observations`` the standardized observation the networks read is mapped back with the
normalizer's statistics (frozen during the update), mirrored, and standardized again (clipped as the normalizer
clips). :mod:`ppo_td.envs.mirrors` has Pendulum's and Walker2d's.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from ppo_td.envs import RunningObsNorm, import_attr


class Mirror:
    """The user's ``mirror`` as the loss applies it: on the observations the networks read."""

    def __init__(self, user: Any, augment: bool, loss_coeff: float, norm: RunningObsNorm | None = None) -> None:
        for method in ("observation", "action"):
            if not callable(getattr(user, method, None)):
                raise ValueError(f"loss.mirror {type(user).__name__} has no {method}() method: a mirror maps a batch "
                                 "of observations with observation(obs) and of actions with action(action)")
        self.user, self.augment, self.loss_coeff, self.norm = user, augment, float(loss_coeff), norm

    @classmethod
    def of(cls, path: str, augment: bool, loss_coeff: float, norm: RunningObsNorm | None = None) -> Mirror:
        """The mirror ``path`` (``module:name``) names: the object, or a class built with no arguments."""
        found = import_attr(path, "loss.mirror")
        return cls(found() if isinstance(found, type) else found, augment, loss_coeff, norm)

    def observation(self, obs: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """The mirror image of a batch of observations as the networks read them."""
        with torch.no_grad():
            if self.norm is None:  # a copy: a mirror working in place must not change the original half
                return self._checked(self.user.observation(obs.clone()), obs, "observation")
            raw = self.norm.unnormalized(obs)
            return self.norm.normalized(self._checked(self.user.observation(raw), raw, "observation"))

    def action(self, action: torch.Tensor) -> torch.Tensor:
        """The mirror image of a batch of actions (or of mean actions: the mirror loss's target)."""
        return self._checked(self.user.action(action.clone()), action, "action")

    def _checked(self, out: Any, given: Any, what: str) -> Any:
        same = (isinstance(out, TensorDictBase) and isinstance(given, TensorDictBase)
                and set(out.keys(True, True)) == set(given.keys(True, True)) and out.batch_size == given.batch_size
                ) or (isinstance(out, torch.Tensor) and isinstance(given, torch.Tensor) and out.shape == given.shape)
        if not same:
            got = tuple(out.shape) if isinstance(out, (torch.Tensor, TensorDictBase)) else type(out).__name__
            raise ValueError(f"loss.mirror's {what}() returned {got} for a batch of {tuple(given.shape)}: it must "
                             f"return the mirror image of the batch, of the same shape"
                             + (" and entries" if isinstance(given, TensorDictBase) else ""))
        return out


def cat_halves(first: Any, second: Any) -> Any:
    """``first`` and ``second`` (tensors or TensorDicts) stacked along the batch."""
    return torch.cat([first, second], 0)
