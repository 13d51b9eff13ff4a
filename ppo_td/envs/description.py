"""The one description of a built env that the layers above read: observation, action, mask.

The env layer reads the TorchRL env's public specs once (:func:`describe`) and hands
the result up. Models size their networks from it, checkpoints store its
:meth:`EnvDescription.signature`, evaluation rebuilds from it; nobody asks the env
again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import torch
from torchrl.data import Categorical, MultiCategorical
from torchrl.data.tensor_specs import ContinuousBox
from torchrl.envs import EnvBase, TransformedEnv

from ppo_td import keys
from ppo_td.envs.masking import MASK_KEY
from ppo_td.envs.transforms import ReturnScaling, RunningObsNorm

ActionKind = Literal["discrete", "multi_discrete", "box"]


@dataclass(frozen=True)
class EnvDescription:
    """What a batched env looks like to a policy: plain data, no live state.

    Example:
        >>> describe(make_env(EnvConfig("CartPole-v1", num_envs=4)))
        EnvDescription(num_envs=4, observation_shape=(4,), action_kind='discrete', action_nvec=(2,), ...)
    """

    num_envs: int
    """Env copies stepped together (the env's batch size)."""
    observation_shape: tuple[int, ...]
    """Shape of one copy's ``"observation"``."""
    action_kind: ActionKind
    """'discrete' (Categorical), 'multi_discrete' (one index per dimension) or 'box' (floats)."""
    action_nvec: tuple[int, ...] | None
    """Choices per action dimension (``(n,)`` for discrete); None for box actions."""
    action_shape: tuple[int, ...]
    """Shape of one copy's action (``()`` for discrete)."""
    action_low: tuple[float, ...] | None = None
    """Box actions: lower bounds (None otherwise)."""
    action_high: tuple[float, ...] | None = None
    """Box actions: upper bounds (None otherwise)."""
    action_mask: bool = False
    """Observations carry a legal-action mask under ``"action_mask"`` (a bool entry: ``MaskCheck`` validates and
    casts it; with ``EnvConfig.action_mask='none'`` a raw mask entry is left alone and the policy ignores it)."""

    @property
    def observation_size(self) -> int:
        """Features of a flat observation (the product of its shape)."""
        size = 1
        for d in self.observation_shape:
            size *= d
        return size

    @property
    def action_size(self) -> int:
        """Policy-head outputs: sum of ``action_nvec`` (logits) or the box's dimension (means)."""
        if self.action_nvec is not None:
            return sum(self.action_nvec)
        return self.action_shape[-1] if self.action_shape else 1

    def signature(self) -> dict[str, Any]:
        """What a checkpoint must match to be loaded into an env: observation shape and action space."""
        if self.action_kind == "discrete":
            action = f"Discrete({self.action_nvec[0]})"
        elif self.action_kind == "multi_discrete":
            action = f"MultiDiscrete({list(self.action_nvec)})"
        else:
            action = f"Box(shape={list(self.action_shape)})"
        return {"observation_shape": list(self.observation_shape), "action_space": action}


def describe(env: EnvBase) -> EnvDescription:
    """Read ``env``'s public specs into an :class:`EnvDescription` (any TorchRL env with an ``"observation"``).

    Raises:
        ValueError: the env has no ``"observation"`` key or an action spec ppo_td's policies do not handle.
    """
    obs_spec = env.observation_spec
    if keys.OBSERVATION not in obs_spec.keys():
        raise ValueError(f"the env's observation spec has keys {list(obs_spec.keys())}; ppo_td's networks read "
                         f"{keys.OBSERVATION!r}. Rename the entry with torchrl.envs.RenameTransform")
    batch_dims = len(env.batch_size)
    spec = env.action_spec_unbatched
    low = high = nvec = None
    if isinstance(spec, Categorical):
        kind: ActionKind = "discrete"
        nvec = (int(spec.space.n),)
    elif isinstance(spec, MultiCategorical):
        kind = "multi_discrete"
        nvec = tuple(int(n) for n in spec.nvec.reshape(-1).tolist())
    elif not spec.dtype.is_floating_point and isinstance(spec.space, ContinuousBox) and len(spec.shape) == 1:
        kind = "multi_discrete"  # GymWrapper's MultiDiscrete: integer bounds [0, nvec - 1]
        nvec = tuple(int(n) for n in (spec.space.high - spec.space.low + 1).tolist())
    elif spec.dtype.is_floating_point and isinstance(spec.space, ContinuousBox):
        kind = "box"
        low = tuple(float(v) for v in spec.space.low.reshape(-1).tolist())
        high = tuple(float(v) for v in spec.space.high.reshape(-1).tolist())
    else:
        raise ValueError(f"the env's action spec is {type(spec).__name__} ({spec.dtype}); ppo_td's policies "
                         "handle Categorical, MultiCategorical and Box (float) actions")
    return EnvDescription(
        num_envs=int(env.batch_size.numel()) if batch_dims else 1,
        observation_shape=tuple(obs_spec[keys.OBSERVATION].shape[batch_dims:]),
        action_kind=kind,
        action_nvec=nvec,
        action_shape=tuple(spec.shape),
        action_low=low,
        action_high=high,
        action_mask=MASK_KEY in obs_spec.keys() and obs_spec[MASK_KEY].dtype == torch.bool,
    )


@dataclass
class BuiltEnv:
    """What :func:`ppo_td.envs.build_env` built: the TorchRL env, the Gymnasium vector env under it,
    the transforms that hold state, and the env's description.

    ``env`` is what TorchRL's collectors, evaluation and the user step. ppo_td's fast
    collector steps ``vector`` itself through the same transforms (their own public
    methods), so both paths share one state.
    """

    env: TransformedEnv
    vector: gym.vector.VectorEnv
    description: EnvDescription
    obs_norm: RunningObsNorm | None = None
    return_scaling: ReturnScaling | None = None

    def close(self) -> None:
        if not self.env.is_closed:
            self.env.close()
