"""Transforms TorchRL lacks, written in TorchRL's transform style."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from torchrl.envs import Transform, VecNormV2

from ppo_td import keys


class NonFiniteEnvError(ValueError):
    """An environment produced a NaN or infinite observation or reward."""


class StepCheck(Transform):
    """Base of the env-output checks: ``_check(td, where)`` runs on every reset and step.

    ``where`` reads "at reset" or "at step N", N counting the env's step calls since it
    was built (a buffer, so it is saved with the env's state and survives a resume).
    """

    def __init__(self, in_keys: Sequence) -> None:
        super().__init__(in_keys=list(in_keys), out_keys=list(in_keys))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def _check(self, td: TensorDictBase, where: str) -> None:
        raise NotImplementedError

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.steps += 1
        self._check(next_tensordict, f"at step {int(self.steps)}")
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._check(tensordict_reset, "at reset")
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict


class FiniteCheck(StepCheck):
    """Raise as soon as the env emits a NaN/inf in a checked key, naming the env, key, step and env copy.

    On by default in :func:`ppo_td.envs.make_env` (``EnvConfig.check_finite``); its cost is
    measured by ``python -m benchmarks.guard_overhead``. ``step`` counts the env's step
    calls since it was built (all copies step together).

    Example:
        >>> env.append_transform(FiniteCheck("MyEnv-v0"))
    """

    def __init__(self, env_id: str, in_keys: Sequence = (keys.OBSERVATION, "reward")) -> None:
        super().__init__(in_keys)
        self.env_id = env_id

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


class ReturnScaling(Transform):
    """Divide each reward by the running std of the discounted return, then clip (no mean subtraction).

    The semantics of Gymnasium's ``NormalizeReward`` and Stable-Baselines3's
    ``VecNormalize(norm_reward=True)``, which TorchRL lacks. Per env copy it keeps
    ``G <- gamma * G + r`` (reset to 0 when the episode ends); the mean/variance of
    ``G`` are count-based over every copy and step (parallel Welford update, starting
    from mean 0, var 1, count 1e-4 as SB3 and Gymnasium do). The reward becomes
    ``clip(r / sqrt(var + eps), -clip, clip)``. Only ``"reward"`` changes; keys written
    before it (``RewardSum``'s episode return) keep the raw reward.

    ``freeze()`` stops the statistics from updating (evaluation); the state lives in
    ``state_dict()``, so checkpoints restore it.

    Example:
        >>> env.append_transform(ReturnScaling(gamma=0.99))
    """

    def __init__(self, gamma: float = 0.99, clip: float = 10.0, eps: float = 1e-8) -> None:
        super().__init__(in_keys=["reward"], out_keys=["reward"])
        if not 0.0 <= gamma <= 1.0 or clip <= 0 or eps <= 0:
            raise ValueError(f"ReturnScaling needs gamma in [0, 1], clip > 0, eps > 0; got {gamma}, {clip}, {eps}")
        self.gamma, self.clip, self.eps = gamma, clip, eps
        self.frozen = False
        # statistics of the discounted return, float64 as in numpy-based references
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.full((), 1e-4, dtype=torch.float64))
        self.register_buffer("running_return", torch.zeros(0, dtype=torch.float64))  # one per env copy

    def freeze(self) -> ReturnScaling:
        """Stop updating the statistics (scaling still applies)."""
        self.frozen = True
        return self

    def unfreeze(self) -> ReturnScaling:
        self.frozen = False
        return self

    def _update(self, returns: torch.Tensor) -> None:
        n = returns.numel()
        batch_mean = returns.mean()
        batch_var = returns.var(correction=0)
        delta = batch_mean - self.mean
        total = self.count + n
        m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
        self.mean.copy_(self.mean + delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        reward = next_tensordict.get("reward")
        flat = reward.reshape(next_tensordict.batch_size).to(torch.float64)
        if self.running_return.shape != flat.shape:
            self.running_return = torch.zeros_like(flat)
        returns = self.running_return * self.gamma + flat
        if not self.frozen:
            self._update(returns)
        scaled = (reward.to(torch.float64) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)
        next_tensordict.set("reward", scaled.to(reward.dtype))
        done = next_tensordict.get("done").reshape(flat.shape)
        self.running_return = returns.masked_fill(done, 0.0)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        batch = tensordict_reset.batch_size
        if self.running_return.shape != batch:
            self.running_return = torch.zeros(batch, dtype=torch.float64)
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            self.running_return.zero_()
        else:
            self.running_return = self.running_return.masked_fill(reset.reshape(batch), 0.0)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict


class RunningObsNorm(VecNormV2):
    """TorchRL's ``VecNormV2`` with count-based statistics over exactly the observations the envs emit.

    Configured as ``decay=1.0`` (count-based running mean/variance, infinite memory,
    as Gymnasium's ``NormalizeObservation`` and SB3's ``VecNormalize``; VecNormV2's
    default is an exponential moving average) and ``reduce_batch_dims=True`` (one set
    of statistics over all env copies). Two fixes on top: on a partial reset VecNormV2
    would add the current observation of *every* copy to the statistics again; here
    only the copies that reset contribute their new first observation, so the
    statistics equal numpy's mean/variance (population) of the concatenated stream.
    And the variance E[x^2] - E[x]^2 is clamped at 0 before the square root (VecNormV2
    returns NaN when rounding makes it negative).
    ``freeze()`` stops updates (evaluation); the state is in ``state_dict()``.
    """

    def __init__(self, in_keys: Sequence = (keys.OBSERVATION,), eps: float = 1e-4) -> None:
        super().__init__(in_keys=list(in_keys), decay=1.0, eps=eps, reduce_batch_dims=True)

    def set_container(self, container) -> None:
        with warnings.catch_warnings():  # "batched containers are experimental": ppo_td tests this use
            warnings.filterwarnings("ignore", message="Support of .* batch-size is experimental")
            super().set_container(container)

    def _norm(self, data: TensorDictBase, loc: TensorDictBase, var: TensorDictBase, count) -> TensorDictBase:
        # VecNormV2 stores E[x] and E[x^2]; their difference can round below zero for a near-constant
        # feature (Hopper's first steps), and sqrt of it is NaN: clamp the variance at 0 first.
        if self.missing_tolerance:
            loc = loc.select(*data.keys(True, True))
            var = var.select(*data.keys(True, True))
            if loc.is_empty():
                return data
        scale = (var - loc.pow(2)).clamp_min(0.0).sqrt().clamp_min(self.eps)
        return (data - loc) / scale

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is None or self.frozen or bool(mask.all()):
            return super()._reset(tensordict, tensordict_reset)
        self._maybe_stateful_init(tensordict_reset)
        rows = tensordict_reset.select(*self.in_keys)[mask.reshape(tensordict_reset.batch_size)]
        self._stateful_update(rows)
        self.frozen = True  # normalize every row, update nothing more
        try:
            return super()._reset(tensordict, tensordict_reset)
        finally:
            self.frozen = False
