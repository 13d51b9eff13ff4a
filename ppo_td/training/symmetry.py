"""A task's symmetry in the update: data augmentation and the mirror loss (``loss.mirror``).

Mittal et al., "Symmetry Considerations for Learning Task Symmetric Robot Policies" (ICRA 2024), as rsl_rl runs it
(``rsl_rl/extensions/symmetry.py`` and ``algorithms/ppo.py`` at commit ``c281c32``):

- **augmentation** (``loss.mirror_augment``): each minibatch is doubled with its mirror images (or grown by k images
  where the mirror returns k, as rsl_rl's ``data_augmentation_func`` may: a board's 7 other symmetries), the mirrored
  observations and actions taking the original's stored log-probability, advantage (standardized over the original
  minibatch first), value and value target; the clipped surrogate and the value loss average over both halves; the
  entropy bonus and the KL and clip-fraction diagnostics read the original half (what the adaptive learning rate and
  ``optim.target_kl`` see).
- **mirror loss** (``loss.mirror_loss_coeff``): ``coeff * mean((mu(mirror(s)) - mirror(mu(s)).detach())^2)``, the
  policy's mean action on the mirrored observations against the mirror of its mean action on the originals.

The user's mirror is any object with ``observation(obs)`` and ``action(action)`` (a class is built with no
arguments), each mapping a batch (leading dimension) to its mirror image, or to k images one after the other. With
an action mask (Discrete actions) each image's legal moves are the original's permuted as ``action()`` permutes the
moves. It sees observations in the env's units:
with ``env.normalize_observations`` the standardized observation the networks read is mapped back with the
normalizer's statistics (frozen during the update), mirrored, and standardized again (clipped as the normalizer
clips). :mod:`ppo_td.envs.mirrors` has Pendulum's, Walker2d's, tic-tac-toe's and connect four's.
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
        self.mask_order: torch.Tensor | None = None

    @classmethod
    def of(cls, path: str, augment: bool, loss_coeff: float, norm: RunningObsNorm | None = None) -> Mirror:
        """The mirror ``path`` (``module:name``) names: the object, or a class built with no arguments."""
        found = import_attr(path, "loss.mirror")
        return cls(found() if isinstance(found, type) else found, augment, loss_coeff, norm)

    def observation(self, obs: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """The mirror image of a batch of observations as the networks read them, or its k images."""
        with torch.no_grad():
            if self.norm is None:  # a copy: a mirror working in place must not change the original half
                return self._checked(self.user.observation(obs.clone()), obs, "observation")
            raw = self.norm.unnormalized(obs)
            return self.norm.normalized(self._checked(self.user.observation(raw), raw, "observation"))

    def action(self, action: torch.Tensor) -> torch.Tensor:
        """The mirror image of a batch of actions, or its k images (or of mean actions: the mirror loss's
        target)."""
        return self._checked(self.user.action(action.clone()), action, "action")

    def check(self, observation: torch.Tensor, action: torch.Tensor) -> None:
        """Refuse, before training, a mirror that cannot map the env's observations and actions: probed on a batch
        of each (the env's zero observation and action, in its units), each returns images of the batch, as many
        of one as of the other.

        Raises:
            ValueError: naming the mirror and what it did with the probe.
        """
        name = type(self.user).__name__
        with torch.no_grad():
            try:
                images = self.user.observation(observation.clone())
                moves = self.user.action(action.clone())
            except Exception as err:  # the user's code: any failure on the env's shapes is a misfit, said so
                raise ValueError(f"loss.mirror {name} fails on the env's observations {tuple(observation.shape)} "
                                 f"and actions {tuple(action.shape)}: {err}") from err
            self._checked(images, observation, "observation")
            self._checked(moves, action, "action")
        self.images_of(images, moves, observation.shape[0])

    def images_of(self, observations: Any, actions: Any, rows: int) -> int:
        """How many images of a batch of ``rows`` the mirror returned: ``observations`` from observation(),
        ``actions`` from action() (or the mirror of the policy's mean actions).

        Raises:
            ValueError: the two counts differ.
        """
        seen, acted = observations.shape[0] // rows, actions.shape[0] // rows
        if seen != acted:
            raise ValueError(f"loss.mirror {type(self.user).__name__} returned {seen} image(s) of the observations "
                             f"but {acted} of the actions: observation() and action() must return as many images")
        return seen

    def masks_of(self, actions: int) -> None:
        """Mirror the legal-action masks of ``actions`` Discrete actions from now on, through the user's
        ``action()``: action ``a`` of a state is action ``action(a)`` of its mirror image, so it is legal there
        exactly where ``a`` is legal here (a board game's symmetries permute its cells so).

        Raises:
            ValueError: ``action()`` does not permute the actions (in each image, for k images).
        """
        every = torch.arange(actions)
        images = self.action(every).reshape(-1, actions)
        if images.dtype.is_floating_point or not all(torch.equal(one.sort().values, every) for one in images):
            shown = images.flatten().tolist()
            shown = f"{shown[:20]}{' ...' if len(shown) > 20 else ''}"
            raise ValueError(f"loss.mirror {type(self.user).__name__}.action() maps the actions 0..{actions - 1} to "
                             f"{shown}: the action masks are mirrored through action(), which must permute the "
                             "Discrete actions (in each image, each action the image of exactly one)")
        self.mask_order = images.argsort(-1)
        """Image ``i``'s mask reads the original's ``mask[..., mask_order[i]]``."""

    def action_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """The legal-action masks of the mirror images of a batch of states, image after image (:meth:`masks_of`)."""
        if self.mask_order is None:
            raise ValueError("the action masks are not mirrored: loss.mirror takes masks of Discrete actions "
                             "(Mirror.masks_of)")
        order = self.mask_order.to(mask.device)
        return torch.cat([mask[..., one] for one in order], 0)

    def _checked(self, out: Any, given: Any, what: str) -> Any:
        """``out`` where it is ``k >= 1`` images of the batch ``given`` (``k`` times its rows, image after image,
        each of its shape and entries)."""
        rows = given.shape[0]
        tds = isinstance(out, TensorDictBase) and isinstance(given, TensorDictBase)
        tensors = isinstance(out, torch.Tensor) and isinstance(given, torch.Tensor)
        same = (tds or tensors) and out.shape[0] >= rows > 0 and out.shape[0] % rows == 0 and (
            tuple(out.shape[1:]) == tuple(given.shape[1:])
            and (not tds or set(out.keys(True, True)) == set(given.keys(True, True))))
        if not same:
            got = tuple(out.shape) if isinstance(out, (torch.Tensor, TensorDictBase)) else type(out).__name__
            raise ValueError(f"loss.mirror's {what}() returned {got} for a batch of {tuple(given.shape)}: it must "
                             f"return the mirror image of the batch, of the same shape"
                             + (" and entries" if isinstance(given, TensorDictBase) else "")
                             + " (or k images of it, one after the other: k times its rows)")
        return out


def cat_halves(first: Any, second: Any) -> Any:
    """``first`` and ``second`` (tensors or TensorDicts) stacked along the batch."""
    return torch.cat([first, second], 0)


def repeated(values: torch.Tensor, copies: int) -> torch.Tensor:
    """``values`` ``copies`` times, one after the other along the batch (what the originals and each of their
    images share: the stored log-probabilities, advantages, values and targets)."""
    return values if copies == 1 else torch.cat([values] * copies, 0)
