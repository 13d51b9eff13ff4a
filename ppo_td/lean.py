"""The lean collector: TorchRL ``Collector`` batches without its per-step machinery.

TorchRL's ``Collector`` spends a few hundred microseconds per step call on EnvBase and
TensorDict bookkeeping (spec lookups, ``step_mdp``, key bookkeeping, TensorDictModule
dispatch), whatever the env costs (TORCHRL_FACTS 10). For cheap envs that overhead sets
the speed. For the parts ppo_td builds, :class:`LeanCollector` makes the same calls on
plain tensors: the GymWrapper's own readers around the Gymnasium vector env, each
transform's own code, each policy network and the distribution, in the same order. So it
writes the same batch as ``Collector`` from the same state, bit for bit, and leaves the
env's transforms, the simulators and torch's RNG in the same state
(``tests/test_lean.py`` checks every key, over resets, truncations, masks and
normalization).

It runs exactly these parts, and refuses anything else with :class:`LeanUnsupported`
naming the part (:func:`ppo_td.pipeline.make_collector` then uses TorchRL's Collector):

- env: a ``GymWrapper`` over a Gymnasium vector env with ``AutoresetMode.DISABLED``
  (what :func:`ppo_td.envs.make_env` builds), no info-dict readers, no frame skip;
- transforms: ``FiniteCheck``, ``MaskCheck``, ``ActionMask``, ``DoubleToFloat``,
  ``RunningObsNorm``, ``StepCounter`` (no ``max_steps``), ``RewardSum``, ``ReturnScaling``;
- policy: ``TensorDictModule``\\ s and sequences of them ending in a
  ``SafeProbabilisticModule`` (``ProbabilisticActor``), without hooks or spec projection.

:class:`LeanModule` (a policy or critic on plain tensors) also serves
:class:`ppo_td.objective.PPOObjective`'s lean forward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import (
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from tensordict.utils import expand_as_right
from torch.nn.modules.module import _global_forward_hooks, _global_forward_pre_hooks
from torchrl.envs import (
    ActionMask,
    Compose,
    DoubleToFloat,
    GymWrapper,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import (
    ProbabilisticActor,
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    ValueOperator,
)
from torchrl.modules.distributions.utils import sample_and_log_prob

from ppo_td.masking import MaskCheck
from ppo_td.transforms import FiniteCheck, ReturnScaling, RunningObsNorm

Values = dict[str, torch.Tensor]

_SEQUENCES = (TensorDictSequential, SafeSequential, ProbabilisticTensorDictSequential,
              SafeProbabilisticTensorDictSequential, ProbabilisticActor)
_FLAGS = ("done", "terminated", "truncated")
_COUNTERS = ("step_count", "episode_reward")


class LeanUnsupported(ValueError):  # noqa: N818 - a refusal with its reason, not a failure
    """The env or policy has a part :class:`LeanCollector` cannot run; the message names it."""


class _Values(dict):
    """The env's outputs at one step or reset: a dict that also answers the TensorDict calls
    :class:`StepCheck` makes (``get``, ``set``, ``batch_dims``), so the checks run their own code."""

    batch_dims = 1

    def set(self, key: str, value: torch.Tensor) -> None:
        self[key] = value


class LeanModule:
    """A TensorDict module run on a dict of tensors: its networks in order, then its distribution.

    Calls the same networks with the same inputs and builds the same distribution as the
    module would. ``sample`` draws from it with TorchRL's ``sample_and_log_prob`` (as
    ``SafeProbabilisticModule`` does under ``ExplorationType.RANDOM``, the collectors'
    default), so outputs and RNG use match. ``distribution=False`` takes a module without
    one (a critic) and ``run`` writes its outputs.
    """

    def __init__(self, module: TensorDictModule, distribution: bool = True) -> None:
        self.module = module
        self.nets: list[tuple[torch.nn.Module, list[str], list[str]]] = []
        self._parts: list[torch.nn.Module] = []  # every TensorDict module of the plan (see hooked)
        self.dist: SafeProbabilisticModule | None = None
        self.dist_inputs: list[tuple[str, str]] = []  # (distribution argument, key)
        self._flatten(module)
        if distribution and self.dist is None:
            raise LeanUnsupported("the policy has no SafeProbabilisticModule (ProbabilisticActor) at its end")
        if not distribution and self.dist is not None:
            raise LeanUnsupported(f"{type(module).__name__} ends in a distribution where none is expected")
        written = [k for _, _, outs in self.nets for k in outs]
        self.out_keys = written + (self.sample_keys + [self.log_prob_key] if self.dist is not None else [])
        if list(module.out_keys) != self.out_keys:
            raise LeanUnsupported(f"the module selects out_keys {module.out_keys}, its parts write {self.out_keys}")
        reads = [k for _, ins, _ in self.nets for k in ins] + [k for _, k in self.dist_inputs]
        self.in_keys = list(dict.fromkeys(k for k in reads if k not in written))
        """The keys it reads from its input (what the networks and distribution need and do not write)."""

    def _flatten(self, module: torch.nn.Module) -> None:
        kind = type(module)
        if self.dist is not None:
            raise LeanUnsupported(f"the module runs {kind.__name__} after its distribution module")
        if getattr(module, "safe", False):
            raise LeanUnsupported(f"the module's {kind.__name__} projects onto its spec (safe=True)")
        self._parts.append(module)
        if kind in _SEQUENCES:
            if module.partial_tolerant or getattr(module, "return_composite", False):
                raise LeanUnsupported(f"the module's {kind.__name__} is partial_tolerant or composite")
            for child in module.module:
                self._flatten(child)
        elif kind in (TensorDictModule, SafeModule, ValueOperator):
            if module.method is not None or module._kwargs or not all(isinstance(k, str) for k in module.in_keys):
                raise LeanUnsupported("a TensorDictModule uses method/kwargs or nested keys")
            self.nets.append((module.module, list(module.in_keys), list(module.out_keys)))
        elif kind is SafeProbabilisticModule:
            if module.num_samples is not None or module._generator is not None or module._generator_key is not None:
                raise LeanUnsupported("the distribution module draws several samples or uses a generator")
            if not module.return_log_prob:
                raise LeanUnsupported("the policy does not return the log-prob of its action (return_log_prob=False)")
            keys = [k[-1] if isinstance(k, tuple) else k for k in module.dist_keys]
            self.dist_inputs = list(zip(keys, module.in_keys, strict=True))
            self.sample_keys = list(module.dist_sample_keys)
            self.log_prob_key = module.log_prob_key
            self.dist = module
        else:
            raise LeanUnsupported(f"the module contains a {kind.__name__}, which the lean path does not run")

    def hooked(self) -> bool:
        """True when a forward hook sits on one of its TensorDict modules now (the doctor's audit adds
        some) or on every module: the lean path would skip it, so the caller must run the module itself."""
        if _global_forward_hooks or _global_forward_pre_hooks:
            return True
        return any(m._forward_hooks or m._forward_pre_hooks for m in self._parts)

    def run(self, values: Values) -> None:
        """Run the networks, writing their outputs into ``values``."""
        for net, in_keys, out_keys in self.nets:
            out = net(*[values.get(k) for k in in_keys])
            values.update(zip(out_keys, out if isinstance(out, tuple) else (out,), strict=True))

    def distribution(self, values: Values) -> torch.distributions.Distribution:
        """Run the networks and build the distribution from their outputs."""
        self.run(values)
        module = self.dist
        return module.distribution_class(**{name: values.get(key) for name, key in self.dist_inputs},
                                         **module.distribution_kwargs)

    def sample(self, values: Values, batch_size: int) -> None:
        """Write the policy's outputs (networks', action, log-prob) into ``values``; call under no_grad.

        With a forward hook present (see :meth:`hooked`) the module itself runs on a TensorDict of
        ``values``, so the hook sees the call.
        """
        if self.hooked():
            td = TensorDict(dict(values), batch_size=[batch_size])
            self.module(td)
            values.update((key, td.get(key)) for key in self.out_keys)
            return
        dist = self.distribution(values)
        sample, log_prob = sample_and_log_prob(dist, torch.Size(), reparameterize=dist.has_rsample)
        values.update(zip(self.sample_keys, sample if isinstance(sample, tuple) else (sample,), strict=True))
        values[self.log_prob_key] = log_prob


class LeanEnv:
    """Step and partially reset a ppo_td env on plain tensors, through its own readers and transforms."""

    def __init__(self, env: TransformedEnv) -> None:
        base = getattr(env, "base_env", None)
        if type(env) is not TransformedEnv or type(base) is not GymWrapper:
            raise LeanUnsupported(f"the env is a {type(env).__name__} over {type(base).__name__}; the lean collector "
                                  "steps a TransformedEnv over a GymWrapper (what ppo_td.envs.make_env builds)")
        vec = base._env
        if not isinstance(vec, gym.vector.VectorEnv) or getattr(vec, "autoreset_mode", None) != \
                gym.vector.AutoresetMode.DISABLED:
            raise LeanUnsupported("the GymWrapper does not hold a Gymnasium vector env with AutoresetMode.DISABLED")
        if base.info_dict_reader or base.wrapper_frame_skip != 1 or len(base.batch_size) != 1 or \
                not base._convert_actions_to_numpy:
            raise LeanUnsupported("the GymWrapper reads info dicts, skips frames, has a batch of more than 1 dim "
                                  "or passes actions as tensors")
        if base.device is not None and base.device.type != "cpu":
            raise LeanUnsupported(f"the env runs on {base.device}; the lean collector runs on the CPU")
        if base.reward_keys != ["reward"] or sorted(base.done_keys) != sorted(_FLAGS) or len(base.action_keys) != 1:
            raise LeanUnsupported("the env has other reward/done/action keys than reward, done/terminated/truncated "
                                  "and one action")
        self.env, self.base, self.vec = env, base, vec
        self.num_envs = int(base.batch_size[0])
        self.action_spec = base.full_action_spec[base.action_key]
        self.obs_keys = [k for k in base.observation_spec.keys(True, True)]
        if not all(isinstance(k, str) for k in self.obs_keys):
            raise LeanUnsupported(f"the env has nested observation keys {self.obs_keys}")
        self.transforms = self.current_transforms()
        self._steps: list[Callable[[Values, Values], None]] = []
        self._resets: list[Callable[[Values, Values, torch.Tensor], None]] = []
        for t in self.transforms:
            self._plan(t)
        kinds = {type(t) for t in self.transforms}
        counters = zip(_COUNTERS, (StepCounter, RewardSum), strict=True)
        self.carried = self.obs_keys + [key for key, kind in counters if kind in kinds]  # kept from step to step

    def _plan(self, t: Any) -> None:
        """Append ``t``'s step and reset operations (the same code as its ``_step``/``_reset``)."""
        kind = type(t)
        if kind in (FiniteCheck, MaskCheck):
            self._steps.append(lambda cur, nxt: t.check_step(nxt))
            self._resets.append(lambda cur, out, reset: t._check(out, "at reset"))
        elif kind is ActionMask:
            mask_key = t.in_keys[1]
            self._steps.append(lambda cur, nxt: t.action_spec.update_mask(nxt[mask_key]))
            self._resets.append(lambda cur, out, reset: t.action_spec.update_mask(out[mask_key]))
        elif kind is DoubleToFloat:
            if not set(t.in_keys) <= set(self.obs_keys) | {"reward"} or t.in_keys_inv:
                raise LeanUnsupported(f"DoubleToFloat casts {t.in_keys} (and actions {t.in_keys_inv}); the lean "
                                      "collector runs it on observations and reward only")

            def cast(cur: Values, values: Values, *_: Any) -> None:
                for key in t.in_keys:
                    if key in values:
                        values[key] = values[key].to(t.dtype_out)
            self._steps.append(cast)
            self._resets.append(cast)
        elif kind is RunningObsNorm:
            key = t.in_keys[0]
            self._steps.append(lambda cur, nxt: nxt.__setitem__(key, t.observed(nxt[key])))
            self._resets.append(lambda cur, out, reset: out.__setitem__(key, t.observed(out[key], reset)))
        elif kind is StepCounter:
            if t.max_steps is not None or list(t.step_count_keys) != ["step_count"]:
                raise LeanUnsupported("StepCounter with max_steps or other keys (use the env's own time limit)")
            self._steps.append(lambda cur, nxt: nxt.__setitem__("step_count", cur["step_count"] + 1))
            self._resets.append(lambda cur, out, reset: out.__setitem__(
                "step_count", torch.where(~reset, cur["step_count"].expand_as(reset), 0)))
        elif kind is RewardSum:
            if list(t.in_keys) != ["reward"] or list(t.out_keys) != ["episode_reward"]:
                raise LeanUnsupported(f"RewardSum over {t.in_keys} -> {t.out_keys}")
            self._steps.append(lambda cur, nxt: nxt.__setitem__("episode_reward",
                                                                cur["episode_reward"] + nxt["reward"]))
            self._resets.append(lambda cur, out, reset: out.__setitem__("episode_reward", torch.where(
                expand_as_right(~reset, cur["episode_reward"]), cur["episode_reward"], 0.0)))
        elif kind is ReturnScaling:
            self._steps.append(lambda cur, nxt: nxt.__setitem__("reward", t.scaled(nxt["reward"], nxt["done"])))
            self._resets.append(lambda cur, out, reset: t.reset_returns(self.num_envs, reset))
        else:
            raise LeanUnsupported(f"the env has a {kind.__name__} transform, which the lean collector does not run")

    def current_transforms(self) -> list[Any]:
        """The env's transforms as they are now (one may have been appended after planning)."""
        transform = self.env.transform
        return list(transform) if isinstance(transform, Compose) else [transform]

    def stale(self) -> bool:
        """True when the env's transforms are no longer the ones this plan runs."""
        now = self.current_transforms()
        return len(now) != len(self.transforms) or any(a is not b for a, b in zip(now, self.transforms, strict=True))

    def step(self, action: torch.Tensor, cur: Values) -> Values:
        """The env's ``("next", ...)`` entries after ``action`` from state ``cur``, transformed."""
        base = self.base
        obs, reward, terminated, truncated, _ = self.vec.step(self.action_spec.to_numpy(action, safe=False))
        terminated, truncated, done, _ = base.read_done(terminated=terminated, truncated=truncated)
        shape = (self.num_envs, 1)
        nxt = _Values(base.read_obs(obs))
        nxt["reward"] = base.read_reward(reward)
        nxt["done"], nxt["terminated"], nxt["truncated"] = done.view(shape), terminated.view(shape), \
            truncated.view(shape)
        for op in self._steps:
            op(cur, nxt)
        return nxt

    def reset(self, reset: torch.Tensor, cur: Values) -> Values:
        """Reset the copies where ``reset`` (``[num_envs, 1]``) is True; ``cur`` updated in place and returned."""
        obs, _ = self.vec.reset(options={"reset_mask": reset.view(self.num_envs).numpy()})
        out = _Values(self.base.read_obs(obs))
        for op in self._resets:
            op(cur, out, reset)
        for key, value in out.items():
            cur[key] = torch.where(expand_as_right(reset.view(self.num_envs), value), value, cur[key])
        return cur


class LeanCollector:
    """In-process collector with TorchRL ``Collector``'s batches and interface, minus its per-step cost.

    Yields ``[num_envs, frames_per_batch // num_envs]`` TensorDicts (time dim named
    ``"time"``) with the keys ``Collector`` writes, ``("collector", "traj_ids")``
    included, until ``total_frames``. The policy is called, not copied: weight updates
    apply at once. The current step lives in ``_carrier`` between batches, as in
    ``Collector``, so :mod:`ppo_td.snapshot` saves and restores it the same way.

    Raises:
        LeanUnsupported: a part of ``env`` or ``policy`` it cannot run (the message names it).

    Example:
        >>> collector = LeanCollector(env, actor, frames_per_batch=512, total_frames=50_000)
        >>> batch = next(iter(collector))
    """

    def __init__(self, env: TransformedEnv, policy: TensorDictModule, frames_per_batch: int,
                 total_frames: int) -> None:
        self.lean_env, self.lean_policy = LeanEnv(env), LeanModule(policy)
        self.env, self.policy = env, policy
        n = self.lean_env.num_envs
        if frames_per_batch % n:
            raise ValueError(f"frames_per_batch={frames_per_batch} must be a multiple of the {n} env copies")
        self.frames_per_batch, self.total_frames = frames_per_batch, total_frames
        self._carrier = env.reset()
        self._carrier.set(("collector", "traj_ids"), torch.arange(n))
        self._next_traj = n
        self.frames = 0

    def __len__(self) -> int:
        return -(self.total_frames // -self.frames_per_batch)

    def __iter__(self) -> Iterator[TensorDictBase]:
        while self.frames < self.total_frames:
            batch = self.rollout()
            self.frames += batch.numel()
            yield batch

    @torch.no_grad()
    def rollout(self) -> TensorDictBase:
        """One batch of ``frames_per_batch`` frames from the current state."""
        if self.lean_env.stale():  # a transform was added or removed since: plan again (or say why not)
            try:
                self.lean_env = LeanEnv(self.env)
            except LeanUnsupported as err:
                raise LeanUnsupported(f"the env's transforms changed after the lean collector was built: {err}. "
                                      "Add transforms before building the pipeline, or set "
                                      "collector.step_loop='torchrl'") from err
        env, policy = self.lean_env, self.lean_policy
        n, steps = env.num_envs, self.frames_per_batch // env.num_envs
        carrier = self._carrier
        cur: Values = {k: carrier.get(k) for k in env.carried}
        flags = {k: carrier.get(k) for k in _FLAGS}
        traj_ids = carrier.get(("collector", "traj_ids"))
        root_keys = list(cur) + list(_FLAGS) + policy.out_keys
        next_keys = list(cur) + ["reward", *_FLAGS]
        root: dict[str, list[torch.Tensor]] = {k: [] for k in root_keys}
        nexts: dict[str, list[torch.Tensor]] = {k: [] for k in next_keys}
        ids: list[torch.Tensor] = []
        with set_exploration_type(ExplorationType.RANDOM):  # Collector's default, for modules that read it
            for _ in range(steps):
                values = dict(cur)
                policy.sample(values, n)
                values.update(flags)
                nxt = env.step(values[policy.sample_keys[0]], cur)
                for key, store in root.items():
                    store.append(values[key])
                for key, store in nexts.items():
                    store.append(nxt[key])
                ids.append(traj_ids)
                cur = {k: nxt[k] for k in env.carried}
                flags = {k: nxt[k] for k in _FLAGS}
                done = nxt["done"]
                if done.any():
                    cur = env.reset(done, cur)
                    flags = {k: torch.zeros_like(v) for k, v in flags.items()}
                    ended = done.view(n)
                    fresh = torch.arange(self._next_traj, self._next_traj + int(ended.sum()))
                    self._next_traj += fresh.numel()
                    traj_ids = traj_ids.masked_scatter(ended, fresh)
        source: dict[str, Any] = {k: torch.stack(v, 1) for k, v in root.items()}
        source["next"] = {k: torch.stack(v, 1) for k, v in nexts.items()}
        source["collector"] = {"traj_ids": torch.stack(ids, 1)}
        self._carrier = TensorDict({**cur, **flags, "collector": {"traj_ids": traj_ids}}, batch_size=[n])
        return TensorDict(source, batch_size=[n, steps]).refine_names(None, "time")

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to do: the collector calls the training policy itself."""

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        return self.env.set_seed(seed, static_seed=static_seed)

    def shutdown(self) -> None:
        """Close the env (as ``Collector.shutdown`` does)."""
        if not self.env.is_closed:
            self.env.close()
