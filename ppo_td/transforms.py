"""Transforms TorchRL lacks, written in TorchRL's transform style."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from torchrl.envs import Transform

from ppo_td import keys


class NonFiniteEnvError(ValueError):
    """An environment produced a NaN or infinite observation or reward."""


class FiniteCheck(Transform):
    """Raise as soon as the env emits a NaN/inf in a checked key, naming the env, key, step and env copy.

    On by default in :func:`ppo_td.envs.make_env` (``EnvConfig.check_finite``); its cost is
    measured by ``python -m benchmarks.guard_overhead``. ``step`` counts the env's step
    calls since it was built (all copies step together).

    Example:
        >>> env.append_transform(FiniteCheck("MyEnv-v0"))
    """

    def __init__(self, env_id: str, in_keys: Sequence = (keys.OBSERVATION, "reward")) -> None:
        super().__init__(in_keys=list(in_keys), out_keys=list(in_keys))
        self.env_id = env_id
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))  # saved with the env's state_dict

    def _check(self, td: TensorDictBase, where: str) -> None:
        for key in self.in_keys:
            value = td.get(key, None)
            if value is None or torch.isfinite(value).all():
                continue
            bad = (~torch.isfinite(value)).nonzero()[0].tolist()
            copy = f" (env copy {bad[0]})" if td.batch_dims else ""
            raise NonFiniteEnvError(
                f"env {self.env_id!r} produced a non-finite {key!r} {where}{copy}: {value[tuple(bad)].item()}. "
                "Fix the environment or clip its output in a wrapper; set env.check_finite=False only if "
                "a NaN there is intended."
            )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.steps += 1
        self._check(next_tensordict, f"at step {int(self.steps)}")
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._check(tensordict_reset, "at reset")
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict
