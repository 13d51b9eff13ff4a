"""Action masking, env side: the mask's way into the TensorDict and its checks.

Masking has two halves (TORCHRL_FACTS 6): TorchRL's ``ActionMask`` transform updates the
action spec (random policies obey it), and the learned policy must read the mask
(``MaskedCategorical``; :class:`ppo_td.models.MaskedMultiCategorical` for MultiDiscrete actions).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Binary, Composite

from ppo_td.envs.transforms import StepCheck

MASK_KEY = "action_mask"


class InfoMaskToObservation(gym.Wrapper):
    """Lift ``info["action_mask"]`` (the common Gymnasium convention) into a Dict observation.

    The observation becomes ``{"observation": obs, "action_mask": mask}``, so TorchRL's
    GymWrapper reads the mask like any observation key, at resets and at steps.
    """

    def __init__(self, env: gym.Env, mask_size: int) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Dict(
            {"observation": env.observation_space, MASK_KEY: gym.spaces.MultiBinary(mask_size)}
        )

    def _lift(self, obs, info):
        if MASK_KEY not in info:
            raise KeyError(f"env {self.spec.id if self.spec else self.env}: info has no {MASK_KEY!r} entry; "
                           "set env.action_mask='none' or 'observation', or add the mask to info")
        return {"observation": obs, MASK_KEY: np.asarray(info[MASK_KEY], dtype=np.int8)}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._lift(obs, info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._lift(obs, info), reward, terminated, truncated, info


class MaskCheck(StepCheck):
    """Validate the action mask and cast it to bool; raise on an all-masked state.

    ``segments`` are the action dimensions' sizes (``[n]`` for Discrete, ``nvec`` for
    MultiDiscrete): every segment must leave at least one legal action, or the
    policy would have nothing to choose (no NaN, no silent uniform choice); except in the
    last state of an episode that is done (ended or cut), where no action is chosen (a
    finished game's board).
    """

    def __init__(self, env_id: str, segments: Sequence[int], mask_key: str = MASK_KEY) -> None:
        super().__init__([mask_key])
        self.env_id, self.segments, self.mask_key = env_id, [int(s) for s in segments], mask_key

    def check(self, td: TensorDictBase, where: str) -> None:
        mask = td.get(self.mask_key, None)
        if mask is None:
            raise KeyError(f"env {self.env_id!r} gave no {self.mask_key!r} {where}")
        width = sum(self.segments)
        if mask.shape[-1] != width:
            raise ValueError(f"env {self.env_id!r}: action mask has {mask.shape[-1]} entries {where}, the action "
                             f"space needs {width} ({' + '.join(map(str, self.segments))})")
        if mask.dtype.is_floating_point or mask.dtype.is_complex:
            raise TypeError(f"env {self.env_id!r}: action mask dtype {mask.dtype} {where}; use bool or 0/1 integers")
        done = td.get("done", None)  # an ended or cut episode's last state is never acted in (a finished board)
        if mask.device.type == "cpu" and (done is None or done.device.type == "cpu"):
            # the same checks in numpy, on views of the same memory: a tenth of torch's per-call cost on the small
            # masks of a few env copies (7 torch calls a step were about 90 us on a tic-tac-toe game)
            mask = self.checked_array(mask.numpy(), None if done is None else done.numpy(), where)
            td.set(self.mask_key, torch.from_numpy(mask))
            return
        if mask.dtype != torch.bool:
            if ((mask != 0) & (mask != 1)).any():
                raise ValueError(f"env {self.env_id!r}: action mask holds values other than 0/1 {where}")
            mask = mask.bool()
        going = ~done.reshape(mask.shape[:-1]) if done is not None else None
        for i, part in enumerate(mask.split(self.segments, dim=-1)):
            empty = ~part.any(-1) if going is None else ~part.any(-1) & going
            if empty.any():
                self._refuse_empty(i, empty.nonzero()[0].tolist(), where)
        td.set(self.mask_key, mask)

    def checked_array(self, mask: np.ndarray, done: np.ndarray | None, where: str) -> np.ndarray:
        """:meth:`check`'s checks on numpy arrays (the fast collector's numpy step calls it too); the mask as
        bool (a copy where it was not)."""
        if mask.dtype != np.bool_:
            if ((mask != 0) & (mask != 1)).any():
                raise ValueError(f"env {self.env_id!r}: action mask holds values other than 0/1 {where}")
            mask = mask != 0
        going = ~done.reshape(mask.shape[:-1]) if done is not None else None
        start = 0
        for i, size in enumerate(self.segments):
            empty = ~mask[..., start:start + size].any(-1)
            if going is not None:
                empty &= going
            if empty.any():
                self._refuse_empty(i, np.argwhere(empty)[0].tolist(), where)
            start += size
        return mask

    def _refuse_empty(self, dimension: int, copy: list[int], where: str) -> None:
        dim = f" in action dimension {dimension}" if len(self.segments) > 1 else ""
        raise ValueError(f"env {self.env_id!r}: every action is masked{dim} {where} (env copy {copy[0]}); "
                         "the env must always leave at least one legal action (e.g. a no-op)")

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        spec = observation_spec[self.mask_key]
        observation_spec[self.mask_key] = Binary(n=spec.shape[-1], shape=spec.shape, device=spec.device,
                                                 dtype=torch.bool)
        return observation_spec
