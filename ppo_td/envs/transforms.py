"""Transforms TorchRL lacks, written in TorchRL's transform style."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Composite, MultiCategorical
from torchrl.envs import Compose, Transform

from ppo_td import keys


class NonFiniteEnvError(ValueError):
    """An environment produced a NaN or infinite observation or reward."""


class StepCheck(Transform):
    """Base of the env-output checks: ``check(td, where)`` runs on every reset and step.

    ``where`` reads "at reset" or "at step N", N counting the env's step calls since it
    was built (a buffer, so it is saved with the env's state and survives a resume).
    """

    def __init__(self, in_keys: Sequence) -> None:
        super().__init__(in_keys=list(in_keys), out_keys=list(in_keys))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def check(self, td: TensorDictBase, where: str) -> None:
        """Raise if ``td`` (the env's output ``where``) is bad; may replace entries (e.g. cast a mask)."""
        raise NotImplementedError

    def check_step(self, values) -> None:
        """Count one step call and check its output (a TensorDict, or the fast collector's dict of tensors)."""
        self.check(values, f"at step {self.count_step()}")

    def count_step(self) -> int:
        """Count one step call; returns the count (the step number the messages name)."""
        steps = self.steps.numpy()  # the buffer's own memory: cheaper than a tensor op per step
        steps += 1
        return int(steps)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.check_step(next_tensordict)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self.check(tensordict_reset, "at reset")
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict


def _all_finite(value: torch.Tensor) -> bool:
    if value.device.type == "cpu" and not value.requires_grad:
        return bool(np.isfinite(value.numpy()).all())  # numpy: a third of the tensor ops' cost on small arrays
    return bool(torch.isfinite(value).all())


class FiniteCheck(StepCheck):
    """Raise as soon as the env emits a NaN/inf in a checked key, naming the env, key, step and env copy.

    On by default in :func:`ppo_td.envs.build_env` (``EnvConfig.check_finite``); its cost is
    measured by ``python -m benchmarks guard_overhead``. ``step`` counts the env's step
    calls since it was built (all copies step together).

    Example:
        >>> env.append_transform(FiniteCheck("MyEnv-v0"))
    """

    def __init__(self, env_id: str, in_keys: Sequence = (keys.OBSERVATION, "reward")) -> None:
        super().__init__(in_keys)
        self.env_id = env_id

    def _leaves(self, td: TensorDictBase):
        """(key, tensor) of the checked floating-point entries (a Dict observation's entries one by one)."""
        for key in self.in_keys:
            value = td.get(key, None)
            if isinstance(value, TensorDictBase):
                for sub, leaf in value.items(True, True):
                    if leaf.dtype.is_floating_point:
                        yield (key, *sub) if isinstance(sub, tuple) else (key, sub), leaf
            elif value is not None and value.dtype.is_floating_point:
                yield key, value

    def check(self, td: TensorDictBase, where: str) -> None:
        for key, value in self._leaves(td):
            if _all_finite(value):
                continue
            bad = (~torch.isfinite(value)).nonzero()[0].tolist()
            copy = f" (env copy {bad[0]})" if td.batch_dims else ""
            raise NonFiniteEnvError(
                f"env {self.env_id!r} produced a non-finite {key!r} {where}{copy}: {value[tuple(bad)].item()}. "
                "Fix the environment or clip its output in a wrapper; set env.check_finite=False only if "
                "a NaN there is intended."
            )


class _Freezable:
    """``freeze()`` stops a transform's statistics from updating (evaluation); ``unfreeze()`` resumes."""

    frozen = False

    def freeze(self):
        self.frozen = True
        return self

    def unfreeze(self):
        self.frozen = False
        return self


Moments = dict[str, torch.Tensor]
"""``{"count", "mean", "var"}`` of a stream: its length, mean and population variance (float64)."""


def merge_moments(a: Moments, b: Moments) -> Moments:
    """The moments of two streams together (Chan et al.'s parallel update); exact up to rounding."""
    count = a["count"] + b["count"]
    if float(count) == 0:
        return {k: v.clone() for k, v in a.items()}
    delta = b["mean"] - a["mean"]
    m2 = a["var"] * a["count"] + b["var"] * b["count"] + delta.square() * a["count"] * b["count"] / count
    return {"count": count, "mean": a["mean"] + delta * b["count"] / count, "var": m2 / count}


def moments_since(now: Moments, base: Moments) -> Moments:
    """The moments of what was added to a stream after ``base``: ``merge_moments(base, result) == now``."""
    count = now["count"] - base["count"]
    if float(count) <= 0:
        return {"count": torch.zeros_like(now["count"]), "mean": torch.zeros_like(now["mean"]),
                "var": torch.zeros_like(now["var"])}
    mean = (now["mean"] * now["count"] - base["mean"] * base["count"]) / count
    m2 = (now["var"] * now["count"] - base["var"] * base["count"]
          - (mean - base["mean"]).square() * base["count"] * count / now["count"])
    return {"count": count, "mean": mean, "var": (m2 / count).clamp_min(0.0)}


class RunningMoments:
    """Statistics kept as ``count``/``mean``/``var`` buffers, readable and settable as :data:`Moments`.

    Collection workers each update their own copy; :mod:`ppo_td.collect.workers` merges what every
    worker added since the last sync and sets the result in all of them.
    """

    def moments(self) -> Moments:
        return {"count": self.count.clone(), "mean": self.mean.clone(), "var": self.var.clone()}

    def load_moments(self, moments: Moments) -> None:
        for name in ("count", "mean", "var"):
            getattr(self, name).copy_(moments[name])

    def start_moments(self) -> Moments:
        """The statistics before any data (what a run over ranks merges every rank's first additions into)."""
        return {k: v.clone() for k, v in self._start.items()}


def running_moments(env: Any) -> list[RunningMoments]:
    """The normalizers among ``env``'s transforms (observations, returns), in their order: the statistics worker
    collectors and the ranks of a run merge."""
    return [t for _, t in indexed_running_moments(env)]


def indexed_running_moments(env: Any) -> list[tuple[int, RunningMoments]]:
    """:func:`running_moments` with each one's index among ``env``'s transforms (how a worker process's copy of the
    env is addressed)."""
    transform = getattr(env, "transform", None)
    if transform is None:
        return []
    parts = list(transform) if isinstance(transform, Compose) else [transform]
    return [(i, t) for i, t in enumerate(parts) if isinstance(t, RunningMoments)]


class ReturnScaling(RunningMoments, _Freezable, Transform):
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
        self._start = self.moments()

    def _update(self, returns: list[float]) -> float:
        """Parallel Welford update with this step's returns (plain floats: cheaper than tiny tensor ops)."""
        return _return_update(returns, self.mean.numpy(), self.var.numpy(), self.count.numpy())

    def scaled(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """One step on plain tensors (shape ``[num_envs, 1]``): update the statistics, return the scaled reward."""
        flat = reward.reshape(-1).to(torch.float64)
        if self.running_return.shape != flat.shape:
            self.running_return = torch.zeros_like(flat)
        returns = self.running_return.mul_(self.gamma).add_(flat)  # in place: no Module.__setattr__ per step
        var = float(self.var) if self.frozen else self._update(returns.tolist())
        scale = 1.0 / math.sqrt(var + self.eps)
        returns.masked_fill_(done.reshape(flat.shape), 0.0)
        return (reward * scale).clamp_(-self.clip, self.clip)

    def array_step(self, num_envs: int):
        """:meth:`scaled` on numpy arrays for ``num_envs`` copies (the fast collector's step: the same float
        operations and bits), bound to numpy views of the buffers, so no buffer lookup per step: valid until a
        buffer is replaced, so the fast collector binds it again before each batch."""
        if self.running_return.shape != (num_envs,):
            self.running_return = torch.zeros(num_envs, dtype=torch.float64)
        returns, mean, var, count = (b.numpy() for b in (self.running_return, self.mean, self.var, self.count))
        gamma, eps, clip = self.gamma, self.eps, self.clip

        def step(reward: np.ndarray, done: np.ndarray) -> np.ndarray:
            np.multiply(returns, gamma, out=returns)  # in place on the buffer's memory
            np.add(returns, reward.reshape(-1), out=returns)
            v = float(var) if self.frozen else _return_update(returns.tolist(), mean, var, count)
            scale = 1.0 / math.sqrt(v + eps)
            returns[done.reshape(-1)] = 0.0
            scaled = reward * np.float32(scale) if reward.dtype == np.float32 else reward * scale
            np.maximum(scaled, -clip, out=scaled)
            return np.minimum(scaled, clip, out=scaled)
        return step

    def reset_returns(self, num_envs: int, reset: torch.Tensor | None) -> None:
        """Zero the running return of the copies in ``reset`` (all copies when None)."""
        if self.running_return.shape != (num_envs,):
            self.running_return = torch.zeros(num_envs, dtype=torch.float64)
        if reset is None:
            self.running_return.zero_()
        else:
            self.running_return.masked_fill_(reset.reshape(num_envs), 0.0)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set("reward", self.scaled(next_tensordict.get("reward"), next_tensordict.get("done")))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        self.reset_returns(tensordict_reset.batch_size.numel(), reset)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict


class RunningObsNorm(RunningMoments, _Freezable, Transform):
    """Standardize observations by count-based running statistics over all env copies, then clip (integer
    observations come out float32).

    The statistics are the mean and (population) variance of every observation the
    envs emitted: step observations, and the first observation of each copy that
    resets (not the others); parallel Welford updates in float64, so they equal
    numpy's mean/var of the concatenated stream. Count-based (infinite memory), as
    Gymnasium's ``NormalizeObservation`` and SB3's ``VecNormalize``: ``(x - mean) /
    sqrt(var + eps)`` clipped to +-``clip``. ``freeze()`` stops updates (evaluation); the
    statistics are buffers, so checkpoints carry them.

    Why not TorchRL's ``VecNormV2`` (tried first, measured on TorchRL 0.14): with a batch
    of envs it adds every copy's observation again at each partial reset, its
    ``E[x^2] - E[x]^2`` rounds below zero for near-constant features and yields NaN
    (Hopper-v5's first steps), and its TensorDict-level arithmetic cost about 200 us per
    step on HalfCheetah-v5, against about 76 us here.
    """

    def __init__(self, size: int, in_key=keys.OBSERVATION, clip: float = 10.0, eps: float = 1e-8,
                 parts: Sequence[tuple[str, tuple[int, ...]]] = ()) -> None:
        super().__init__(in_keys=[in_key], out_keys=[in_key])
        if size < 1 or clip <= 0 or eps <= 0:
            raise ValueError(f"RunningObsNorm needs size >= 1, clip > 0, eps > 0; got {size}, {clip}, {eps}")
        self.parts = tuple((str(name), tuple(int(d) for d in shape)) for name, shape in parts)
        """A Dict observation's entries it standardizes, each ``(name, shape of one copy's)``, in this order in the
        statistics (every element its own mean and variance, as for a vector): ``in_key`` then holds a TensorDict,
        and its other entries (images, indices) pass as they are. ``()``: ``in_key`` is one vector."""
        self._slices = []
        start = 0
        for name, shape in self.parts:
            self._slices.append((name, shape, slice(start, start + math.prod(shape))))
            start += math.prod(shape)
        if self.parts and start != size:
            raise ValueError(f"RunningObsNorm's parts {self.parts} hold {start} numbers, not size={size}")
        self.clip, self.eps, self.frozen = clip, eps, False
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self._start = self.moments()

    def _update(self, rows: torch.Tensor) -> None:
        """Parallel Welford update, in numpy on the buffers' memory: a few small-array operations
        cost a fraction of the same tensor operations (about 15 vs 45 us per step on HalfCheetah)."""
        _moments_update(rows.detach().numpy(), self.mean.numpy(), self.var.numpy(), self.count.numpy())

    def array_step(self):
        """:meth:`observed` for one step's observations as numpy arrays (the fast collector's step: the same float
        operations, so the same bits, without a tensor operation), bound to numpy views of the statistics, so no
        buffer lookup per step: valid until a buffer is replaced, so the fast collector binds it again before each
        batch."""
        mean, var, counter = self.mean.numpy(), self.var.numpy(), self.count.numpy()
        eps, clip = self.eps, self.clip

        def step(obs: np.ndarray) -> np.ndarray:
            if not self.frozen:
                _moments_update(obs, mean, var, counter)
            if obs.dtype.kind != "f":  # integer observations (Atari's RAM, a flattened grid) come out float32
                obs = obs.astype(np.float32)
            dtype = obs.dtype
            scaled = (obs - mean.astype(dtype)) / np.sqrt(var + eps).astype(dtype)
            np.maximum(scaled, -clip, out=scaled)
            return np.minimum(scaled, clip, out=scaled)
        return step

    def normalized(self, obs: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """``obs`` standardized by the current statistics and clipped (no update); integers come out float32. With
        :attr:`parts`, ``obs`` is the Dict observation's TensorDict: a copy of it with those entries standardized."""
        return self._per_part(obs, self.standardized)

    def unnormalized(self, obs: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """:meth:`normalized`'s inverse by the current statistics, ``obs * sqrt(var + eps) + mean`` (a value it
        clipped comes back at the clip's edge): the observation in the env's units (a mirror function reads them)."""
        return self._per_part(obs, self._scaled_back)

    def _per_part(self, obs: torch.Tensor | TensorDictBase, apply: Any) -> torch.Tensor | TensorDictBase:
        """``apply(values, slice of the statistics)`` on a vector, or on each of :attr:`parts` of a Dict's
        TensorDict (flattened, then shaped back) in a copy of it."""
        if not isinstance(obs, TensorDictBase):
            return apply(obs, slice(None))
        out = obs.copy()
        for name, shape, where in self._slices:
            entry = obs.get(name)
            flat = entry.reshape(*entry.shape[: entry.dim() - len(shape)], -1)
            out.set(name, apply(flat, where).reshape(entry.shape))
        return out

    def _scaled_back(self, obs: torch.Tensor, where: slice) -> torch.Tensor:
        to = {"device": obs.device, "dtype": obs.dtype}  # a minibatch on the run's device; the statistics on the env's
        return obs * torch.sqrt(self.var[where] + self.eps).to(**to) + self.mean[where].to(**to)

    def standardized(self, obs: torch.Tensor, where: slice) -> torch.Tensor:
        """``obs`` (a vector, or a flattened Dict entry) standardized by the statistics at ``where`` and clipped."""
        if not obs.is_floating_point():
            obs = obs.to(torch.float32)
        to = {"device": obs.device, "dtype": obs.dtype}
        scaled = (obs - self.mean[where].to(**to)) / torch.sqrt(self.var[where] + self.eps).to(**to)
        return scaled.clamp_(-self.clip, self.clip)

    def observed(self, obs: torch.Tensor | TensorDictBase,
                 reset: torch.Tensor | None = None) -> torch.Tensor | TensorDictBase:
        """Add ``obs`` to the statistics (only the rows where ``reset``, at a partial reset; none when
        frozen) and return it normalized. The step and reset code of both collectors."""
        if not self.frozen:
            rows = self._joined(obs) if isinstance(obs, TensorDictBase) else obs
            self._update(rows if reset is None else rows[reset.reshape(-1)])
        return self.normalized(obs)

    def _joined(self, obs: TensorDictBase) -> torch.Tensor:
        """The :attr:`parts` of a Dict observation side by side, ``[copies, size]`` in float64 (as the update
        reads them)."""
        return torch.cat([obs.get(name).reshape(obs.batch_size.numel(), -1).to(torch.float64)
                          for name, _, _ in self._slices], dim=-1)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set(self.in_keys[0], self.observed(next_tensordict.get(self.in_keys[0])))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        tensordict_reset.set(self.in_keys[0], self.observed(tensordict_reset.get(self.in_keys[0]), mask))
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for key in [(self.in_keys[0], name) for name, _ in self.parts] or [self.in_keys[0]]:
            spec = observation_spec[key]
            dtype = spec.dtype if spec.dtype.is_floating_point else torch.float32
            observation_spec[key] = Bounded(low=-self.clip, high=self.clip, shape=spec.shape, dtype=dtype,
                                            device=spec.device)
        return observation_spec


class ClipActions(Transform):
    """Box actions clipped to ``[low, high]`` on their way to the env (``env.clip_actions`` for a TorchRL env; the
    Gymnasium envs' is :class:`~ppo_td.envs.wrappers.ClipToBounds`): the TensorDict keeps the action as sampled, so
    its log-probability stays the sample's. Bounds of any shape that broadcasts to the action (TorchRL's
    ``ClipTransform`` takes scalars only)."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__(in_keys_inv=[keys.ACTION], out_keys_inv=[keys.ACTION])
        self.low, self.high = low.clone(), high.clone()  # constants of the spec, not state: no checkpoint entry

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(action.device), self.high.to(action.device)
        return torch.maximum(torch.minimum(action, high), low)


class IndexObservations(Transform):
    """Give the observation entries that hold indices (Gymnasium ``MultiDiscrete``) TorchRL's
    ``MultiCategorical`` spec; the data is unchanged.

    TorchRL's GymWrapper gives a ``MultiDiscrete`` observation the same spec as an integer ``Box``; the encoders
    read the spec (:func:`~ppo_td.envs.description.observation_space`) and one-hot the indices, but cast an
    integer ``Box`` to float. ``nvec`` maps each such entry's key to its choices per index.
    """

    def __init__(self, nvec: dict) -> None:
        super().__init__(in_keys=[], out_keys=[])
        self.nvec = {key: tuple(int(n) for n in values) for key, values in nvec.items()}

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for key, nvec in self.nvec.items():
            spec = observation_spec[key]
            batch = spec.shape[: len(spec.shape) - 1]
            observation_spec[key] = MultiCategorical(nvec=torch.tensor(nvec).expand(*batch, len(nvec)),
                                                     shape=spec.shape, dtype=spec.dtype, device=spec.device)
        return observation_spec


def _return_update(returns: list[float], mean: np.ndarray, var: np.ndarray, count: np.ndarray) -> float:
    """:class:`ReturnScaling`'s parallel Welford update of the 0-d ``mean``/``var``/``count`` arrays (views of its
    buffers) with this step's returns, in plain floats; returns the new variance."""
    n = len(returns)
    batch_mean = sum(returns) / n
    batch_var = sum((r - batch_mean) ** 2 for r in returns) / n
    m, v, c = float(mean), float(var), float(count)
    total = c + n
    delta = batch_mean - m
    v = (v * c + batch_var * n + delta * delta * c * n / total) / total
    mean[()], var[()], count[()] = m + delta * n / total, v, total
    return v


def _moments_update(rows: np.ndarray, mean: np.ndarray, var: np.ndarray, counter: np.ndarray) -> None:
    """:class:`RunningObsNorm`'s parallel Welford update of ``mean``/``var``/``counter`` (views of its buffers)
    with ``rows`` (in float64, as numpy's mean and variance of the whole stream)."""
    x = rows.reshape(-1, mean.shape[0]).astype(np.float64)
    n = x.shape[0]
    if n == 0:
        return
    count = float(counter)
    batch_mean, batch_var = (x[0], 0.0) if n == 1 else (x.mean(0), x.var(0))
    total = count + n
    delta = batch_mean - mean
    var[:] = (var * count + batch_var * n + delta * delta * (count * n / total)) / total
    mean += delta * (n / total)
    counter[()] = total
