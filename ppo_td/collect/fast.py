"""The fast in-process collector: TorchRL ``Collector``'s batches without its per-step machinery.

TorchRL's ``Collector`` spends a few hundred microseconds per step call on EnvBase and
TensorDict bookkeeping (spec lookups, ``step_mdp``, key bookkeeping, TensorDictModule
dispatch), whatever the env costs (TORCHRL_FACTS 10). For cheap envs that overhead sets
the speed. :class:`FastCollector` runs on ppo_td's own objects instead: it steps the
Gymnasium vector env that :func:`ppo_td.envs.build_env` built, reads its outputs with the
``GymWrapper``'s public readers, applies each transform's own public step/reset code,
and samples from ppo_td's :class:`~ppo_td.models.PolicyNet` as TorchRL's
``ProbabilisticActor`` would, in the same order. So, with ``inference='torch'``, it writes the same batch as
``Collector`` from the same state, bit for bit (a recurrent policy's float outputs within 1e-6: its cell is
stepped by :func:`~ppo_td.models.recurrent.cell_step`), and leaves the transforms, the
simulators and torch's RNG in the same state (``tests/test_fast.py`` checks every key,
over resets, truncations, masks and normalization).

It runs exactly these parts, and refuses anything else with :class:`FastUnsupported`
naming the part (:func:`ppo_td.collect.make_collector` then uses TorchRL's Collector):

- env: a :class:`~ppo_td.envs.BuiltEnv` (not a bare TorchRL env);
- transforms: ``IndexObservations``, ``FiniteCheck``, ``MaskCheck``, ``ActionMask``, ``DoubleToFloat``,
  TorchRL's ``ObservationNorm`` (in place), ``RunningObsNorm``, ``StepCounter`` (no ``max_steps``), ``RewardSum``,
  ``RewardClipping``, ``ReturnScaling``, a recurrent policy's ``InitTracker`` and primer, a gSDE policy's
  ``ExplorationNoise``;
- observations: any space ppo_td encodes (a ``Dict``/``Tuple`` observation is carried as a TensorDict);
- policy: an actor built by :func:`ppo_td.models.make_actor` (see :mod:`ppo_td.models.plain`).

With ``inference='auto'`` (the default) a small feed-forward MLP policy samples in numpy
(:class:`~ppo_td.models.inference.NumpyPolicy`: a third of torch's per-step cost at these sizes); its
parameters, actions and log-probs then equal the torch path's within float rounding, not bit for bit (the
same draws from torch's generator).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import expand_as_right
from torch import nn
from torchrl.data import Categorical, Composite
from torchrl.envs import (
    ActionMask,
    Compose,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    RewardClipping,
    RewardSum,
    StepCounter,
    TensorDictPrimer,
)
from torchrl.modules.distributions.utils import sample_and_log_prob

from ppo_td import keys
from ppo_td.envs import BuiltEnv, FiniteCheck, IndexObservations, MaskCheck, ReturnScaling, RunningObsNorm
from ppo_td.envs.info import INFO, info_values
from ppo_td.envs.masking import MASK_KEY
from ppo_td.models import ClosedForm, PolicyNet, ValueNet, policy_net, value_net
from ppo_td.models.gsde import NOISE_KEY, ExplorationNoise, GSDEHead
from ppo_td.models.inference import NumpyPolicy
from ppo_td.models.networks import SharedFeatures
from ppo_td.models.recurrent import IS_INIT, Recurrent, is_recurrent, recurrent_parts

Values = dict[str, torch.Tensor]

_FLAGS = ("done", "terminated", "truncated")
_NUMPY = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}
_NUMPY_INTEGERS = {torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16, torch.int32: np.int32,
                   torch.int64: np.int64}
"""Integer observations the numpy step reads too (a flattened grid, a board): the transforms it runs on them keep
them integers (the finite check, the counters) or cast them to float32 as their tensor forms do (the running
normalizer)."""
_COUNTERS = ("step_count", "episode_reward")


def _entry_op(key: str, step: Callable[[np.ndarray], np.ndarray]) -> Callable[[Values, dict], None]:
    def op(cur: Values, nxt: dict) -> None:
        nxt[key] = step(nxt[key])
    return op


def _reward_op(step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Values, dict], None]:
    def op(cur: Values, nxt: dict) -> None:
        nxt["reward"] = step(nxt["reward"], nxt["done"])
    return op


def _mask_check(t: MaskCheck) -> Callable[[Values, dict], None]:
    """``t``'s step on numpy arrays: count the step, check the mask (an ended episode's last state may be all
    masked) and cast it to bool, by its own code."""
    def op(cur: Values, nxt: dict) -> None:
        nxt[t.mask_key] = t.checked_array(nxt[t.mask_key], nxt["done"], f"at step {t.count_step()}")
    return op


def _observation_norm(t: ObservationNorm, obs: np.ndarray) -> np.ndarray:
    """TorchRL's ``ObservationNorm`` on a numpy observation: its operations in its order, on views of its own
    ``loc`` and ``scale`` (elementwise float operations: the tensor step's bits)."""
    loc, scale = t.loc.numpy(), t.scale.numpy()
    return (obs - loc) / scale if t.standard_normal else obs * scale + loc


class FastUnsupported(ValueError):  # noqa: N818 - a refusal with its reason, not a failure
    """The env or policy has a part :class:`FastCollector` cannot run; the message names it."""


class _Values(dict):
    """The env's outputs at one step or reset: a dict that also answers the TensorDict calls
    :class:`~ppo_td.envs.StepCheck` makes (``get``, ``set``, ``batch_dims``), so the checks run their own code."""

    batch_dims = 1

    def set(self, key: str, value: torch.Tensor) -> None:
        self[key] = value


class FastPolicy:
    """A ppo_td actor's sampling on plain tensors: its :class:`PolicyNet`, then its distribution.

    Samples as ``ProbabilisticActor`` does under ``ExplorationType.RANDOM`` (the collectors' default), so
    outputs and RNG use match: a Gaussian or (masked) categorical in closed form (:class:`ClosedForm`, torch's
    own operations without the distribution objects), any other distribution with TorchRL's
    ``sample_and_log_prob``. With ``inference`` 'auto' or 'numpy', a small MLP policy runs in numpy instead
    (:class:`~ppo_td.models.inference.NumpyPolicy`: the same RNG use, outputs within float rounding).
    """

    def __init__(self, actor: nn.Module, critic: nn.Module | None = None, device: torch.device | str = "cpu",
                 inference: str = "auto", rows: int = 1, compile: bool = False) -> None:
        self.device = torch.device(device)
        """Where the networks run: each step's observation goes there, its outputs come back to the CPU."""
        self.recurrent: Recurrent | None = recurrent_parts(actor)
        """A recurrent actor's encoder, core and head (its state read from and written to the step's values)."""
        net = self.recurrent.head if self.recurrent is not None else policy_net(actor, acting=True)
        if not isinstance(net, PolicyNet):
            raise FastUnsupported(f"the actor ({type(actor).__name__}) is not one that ppo_td.models.make_actor "
                                  "builds, so the fast collector cannot run it on plain tensors")
        self.net: PolicyNet = net
        self.noise = isinstance(net.head, GSDEHead)
        """A gSDE actor: its network reads each copy's noise matrix (``"gsde_noise"``) beside the observation."""
        dist_module = actor.module[1]
        self.param_keys = list(actor.module[0].out_keys[-len(net.param_names):])
        self.log_prob_key = dist_module.log_prob_key
        self.out_keys = [*self.param_keys, keys.ACTION, self.log_prob_key]
        self.closed_form = ClosedForm.of(net.distribution_class, net.distribution_kwargs, net.masked)
        self.critic_core: Recurrent | None = None
        """A recurrent critic with a core of its own: stepped with the actor, to carry its state."""
        value: ValueNet | None = None
        if self.recurrent is not None:
            own = recurrent_parts(critic) if critic is not None else None  # None: a feed-forward critic (its
            # values come from GAE's pass) or one the collector does not step (TorchRL's Collector runs it then)
            if own is None and is_recurrent(critic):
                raise FastUnsupported("the recurrent critic is not one that ppo_td.models builds")
            if own is not None and own.core is self.recurrent.core:  # one core: V(s) from the actor's memory
                value = own.head
            elif own is not None:
                self.critic_core = own
        else:
            value = value_net(critic) if critic is not None else None
            value = value if value is not None and net.trunk is not None and value.trunk is net.trunk else None
        self.value: ValueNet | None = value
        """A critic reading the actor's features (a shared trunk or a shared recurrent core): V(s) costs its head
        only here, so it is recorded as the batch's ``("collector", "state_value")`` (GAE uses it once instead of
        that pass: :class:`~ppo_td.training.objective.OnePassGAE`). So is a recurrent critic's with a core of its
        own, which runs every step anyway."""
        self.states = [*(self.recurrent.state if self.recurrent else ()),
                       *(self.critic_core.state if self.critic_core else ())]
        """The recurrent states this policy reads and writes (``("next", key)``)."""
        self.inputs = [keys.OBSERVATION, MASK_KEY, *((IS_INIT, *self.states) if self.recurrent else ()),
                       *((NOISE_KEY,) if self.noise else ())]
        self.numpy: NumpyPolicy | None = None
        """The policy's sampling in numpy (:mod:`ppo_td.models.inference`), where ``inference`` allows it."""
        self.forward: Callable[[Any], Any] = self.net
        """The policy network's forward: the network itself, or (``compile``, a feed-forward policy without a
        critic reading its features) it through ``torch.compile`` (without CUDA graphs: the batch keeps each step's
        outputs, which a graph's next replay would overwrite)."""
        if compile and self.recurrent is None and value is None:
            self.forward = torch.compile(self.net, dynamic=False)
        if inference not in ("auto", "numpy", "torch"):
            raise ValueError(f"inference={inference!r}; expected 'auto', 'numpy' or 'torch'")
        self.inference = inference
        if inference != "torch":
            plain = self.recurrent is None and not self.records_value and self.device.type == "cpu"
            self.numpy = NumpyPolicy.of(net, rows) if plain else None
            if self.numpy is None and inference == "numpy":
                raise FastUnsupported(
                    "collector.inference='numpy' runs a small feed-forward MLP policy without a shared trunk "
                    "(Gaussian or categorical, a Discrete action's mask allowed, float32, on the CPU); this one is "
                    "not: set "
                    "collector.inference='auto' or 'torch'")

    def refresh(self) -> None:
        """Re-read the numpy policy's parameters (before each batch); a policy moved or cast since (no longer
        float32 on the CPU) goes back to torch, or is refused with ``inference='numpy'``."""
        if self.numpy is None or self.numpy.refresh():
            return
        if self.inference == "numpy":
            raise FastUnsupported("collector.inference='numpy': the policy's parameters are no longer float32 CPU "
                                  "tensors (moved or cast after the collector was built); set "
                                  "collector.inference='auto' or 'torch'")
        self.numpy = None

    def sample_in_torch(self) -> None:
        """Sample in torch from now on (a resumed run that sampled in torch: the numpy policy rounds differently).

        Raises:
            FastUnsupported: with ``inference='numpy'``, which asked for numpy.
        """
        if self.inference == "numpy":
            raise FastUnsupported("collector.inference='numpy': this policy samples in numpy")
        self.numpy = None

    @property
    def records_value(self) -> bool:
        """Each step writes V(s) too."""
        return self.value is not None or self.critic_core is not None

    def sample(self, values: Values) -> None:
        """Write the parameters, ``"action"`` and its log-prob (and V(s), see :attr:`value`, and the next
        recurrent states) into ``values`` (on the CPU, wherever the networks run); call under no_grad."""
        if self.numpy is not None:
            mask = values.get(MASK_KEY)
            params, action, log_prob = self.numpy.sample(values[keys.OBSERVATION].numpy(),
                                                         None if mask is None else mask.numpy())
            values.update(zip(self.param_keys, map(torch.from_numpy, params), strict=True))
            values[keys.ACTION] = torch.from_numpy(action)
            values[self.log_prob_key] = torch.from_numpy(log_prob)
            return
        if self.device.type == "cpu":
            self._sample(values)
            return
        inputs = {k: v for k, v in values.items() if k in self.inputs}
        on_device = _Values({k: v.to(self.device, non_blocking=True) for k, v in inputs.items()})
        self._sample(on_device)
        values.update({k: v.to("cpu") for k, v in on_device.items() if k not in inputs})

    def _features(self, values: Values) -> torch.Tensor:
        """What the policy head reads: the observation, or a recurrent actor's memory (next states written)."""
        obs = values[keys.OBSERVATION]
        if self.recurrent is None:
            return obs
        is_init = values[IS_INIT]
        if self.critic_core is not None:
            memory, new = self.critic_core.step(obs, [values[k] for k in self.critic_core.state], is_init)
            values[keys.STATE_VALUE] = self.critic_core.head(memory)
            values.update({("next", k): v for k, v in zip(self.critic_core.state, new, strict=True)})
        memory, new = self.recurrent.step(obs, [values[k] for k in self.recurrent.state], is_init)
        values.update({("next", k): v for k, v in zip(self.recurrent.state, new, strict=True)})
        return memory

    def _sample(self, values: Values) -> None:
        obs = self._features(values)
        extra = (values[NOISE_KEY],) if self.noise else ()
        if self.value is not None:
            self.net.shared_features = self.value.shared_features = SharedFeatures()
            try:
                values[keys.STATE_VALUE] = self.value(obs)
                params = self.net(obs, *extra)
            finally:
                self.net.shared_features = self.value.shared_features = None
        else:
            params = self.forward(obs, *extra)
        params = params if isinstance(params, tuple) else (params,)
        if self.closed_form is not None:
            sample, log_prob = self.closed_form.sample(params, values.get(MASK_KEY))
        else:
            dist = self.net.distribution(params, values.get(MASK_KEY))
            sample, log_prob = sample_and_log_prob(dist, torch.Size(), reparameterize=dist.has_rsample)
        values.update(zip(self.param_keys, params, strict=True))
        values[keys.ACTION] = sample
        values[self.log_prob_key] = log_prob


def env_transforms(env: Any) -> list[Any]:
    """The transforms of a ``TransformedEnv`` as they are now, in order (a ``Compose``'s parts, or the one)."""
    transform = env.transform
    return list(transform) if isinstance(transform, Compose) else [transform]


class FastEnv:
    """Step and partially reset a :class:`~ppo_td.envs.BuiltEnv` on plain tensors, through its
    GymWrapper's readers and each transform's own code."""

    def __init__(self, built: BuiltEnv) -> None:
        if not isinstance(built, BuiltEnv):
            raise FastUnsupported(f"the env is a {type(built).__name__}; the fast collector steps the "
                                  "BuiltEnv that ppo_td.envs.build_env returns")
        if built.vector is None:
            raise FastUnsupported("the env is a TorchRL env (ppo_td's step loop steps Gymnasium vector envs)"
                                  if built.description.group is None else
                                  "the env is a multi-agent suite's (TorchRL steps it; VMAS vectorizes its copies "
                                  "in torch itself)")
        self.built, self.base, self.vec = built, built.env.base_env, built.vector
        self.num_envs = int(self.base.batch_size[0])
        self.action_spec = self.base.full_action_spec[keys.ACTION]
        spec = self.base.observation_spec
        self.obs_keys = [k for k in spec.keys() if k != INFO]
        self._info_names = list(spec[INFO].keys()) if INFO in spec.keys() else []
        self.info: list[tuple[str, str]] = [(INFO, k) for k in self._info_names]
        """The info entries the env's info reader writes (:mod:`ppo_td.envs.info`), read here from the same infos
        by the same code."""
        self._unreported = {key: torch.full((self.num_envs,), torch.nan) for key in self.info}
        self._asked = built.config.info_keys if built.config is not None else ()
        self.nested = [k for k in self.obs_keys if isinstance(self.base.observation_spec[k], Composite)]
        """Observation keys whose value has entries of its own (a ``Dict`` or ``Tuple`` space): a TensorDict."""
        self.transforms = self.current_transforms()
        self.memory: list[str] = []
        """Keys a policy's transforms add (a recurrent one's ``"is_init"`` and states, a gSDE one's noise
        matrices), carried from step to step."""
        self.states: list[str] = []
        """The recurrent states a primer adds: the policy writes their next values."""
        self._steps: list[Callable[[Values, Values], None]] = []
        self._resets: list[Callable[[Values, Values, torch.Tensor], None]] = []
        for t in self.transforms:
            self._plan(t)
        self._array_steps = self._plan_arrays()
        self._one_copy = self._single_env()
        """With one env copy in a Gymnasium ``SyncVectorEnv`` without autoreset: that copy, stepped directly (the
        vector env's per-step bookkeeping, its info merging above all, cost about 25 us a step on HalfCheetah)."""
        kinds = {type(t) for t in self.transforms}
        counters = zip(_COUNTERS, (StepCounter, RewardSum), strict=True)
        self.carried: list[Any] = self.obs_keys + [key for key, kind in counters if kind in kinds] + self.memory
        self.carried += self.info  # kept from step to step (root infos: the last step's, or the reset's)

    def _plan(self, t: Any) -> None:
        """Append ``t``'s step and reset operations (the same code as its step and reset)."""
        kind = type(t)
        if kind is IndexObservations:
            return  # specs only
        if kind in (FiniteCheck, MaskCheck):
            self._steps.append(lambda cur, nxt: t.check_step(nxt))
            self._resets.append(lambda cur, out, reset: t.check(out, "at reset"))
        elif kind is ActionMask:
            mask_key = t.in_keys[1]
            self._steps.append(lambda cur, nxt: t.action_spec.update_mask(nxt[mask_key]))
            self._resets.append(lambda cur, out, reset: t.action_spec.update_mask(out[mask_key]))
        elif kind is DoubleToFloat:
            tops = {k[0] if isinstance(k, tuple) else k for k in t.in_keys}
            if not tops <= set(self.obs_keys) | {"reward"} or t.in_keys_inv:
                raise FastUnsupported(f"DoubleToFloat casts {t.in_keys} (and actions {t.in_keys_inv}); the fast "
                                      "collector runs it on observations and reward only")

            def cast(cur: Values, values: Values, *_: Any) -> None:
                for key in t.in_keys:
                    if isinstance(key, tuple):  # an entry of a Dict or Tuple observation: its TensorDict, in place
                        entries = values.get(key[0])
                        if entries is not None:
                            entries.set(key[1:], entries.get(key[1:]).to(t.dtype_out))
                    elif key in values:
                        values[key] = values[key].to(t.dtype_out)
            self._steps.append(cast)
            self._resets.append(cast)
        elif kind is ObservationNorm:  # TorchRL's (its tutorial's): its own affine map, on its loc and scale
            if list(t.out_keys) != list(t.in_keys) or t.in_keys_inv or not set(t.in_keys) <= set(self.obs_keys):
                raise FastUnsupported(f"ObservationNorm {t.in_keys} -> {t.out_keys} (the fast collector runs it in "
                                      "place on observation entries)")

            def normalize(cur: Values, values: Values, *_: Any) -> None:
                for key in t.in_keys:
                    if key in values:  # ObservationNorm._apply_transform's operations, in its order
                        values[key] = ((values[key] - t.loc) / t.scale if t.standard_normal
                                       else values[key] * t.scale + t.loc)
            self._steps.append(normalize)
            self._resets.append(normalize)
        elif kind is RunningObsNorm:
            key = t.in_keys[0]
            self._steps.append(lambda cur, nxt: nxt.__setitem__(key, t.observed(nxt[key])))
            self._resets.append(lambda cur, out, reset: out.__setitem__(key, t.observed(out[key], reset)))
        elif kind is StepCounter:
            if t.max_steps is not None or list(t.step_count_keys) != ["step_count"]:
                raise FastUnsupported("StepCounter with max_steps or other keys (use the env's own time limit)")
            self._steps.append(lambda cur, nxt: nxt.__setitem__("step_count", cur["step_count"] + 1))
            self._resets.append(lambda cur, out, reset: out.__setitem__(
                "step_count", torch.where(~reset, cur["step_count"].expand_as(reset), 0)))
        elif kind is RewardSum:
            if list(t.in_keys) != ["reward"] or list(t.out_keys) != ["episode_reward"]:
                raise FastUnsupported(f"RewardSum over {t.in_keys} -> {t.out_keys}")
            self._steps.append(lambda cur, nxt: nxt.__setitem__("episode_reward",
                                                                cur["episode_reward"] + nxt["reward"]))
            self._resets.append(lambda cur, out, reset: out.__setitem__("episode_reward", torch.where(
                expand_as_right(~reset, cur["episode_reward"]), cur["episode_reward"], 0.0)))
        elif kind is RewardClipping:
            if list(t.in_keys) != ["reward"] or list(t.out_keys) != ["reward"]:
                raise FastUnsupported(f"RewardClipping over {t.in_keys} -> {t.out_keys}")
            low, high = t.clamp_min, t.clamp_max  # its buffers (the bounds ppo_td gives it: both set)
            self._steps.append(lambda cur, nxt: nxt.__setitem__("reward", nxt["reward"].clamp(low, high)))
        elif kind is ReturnScaling:
            self._steps.append(lambda cur, nxt: nxt.__setitem__("reward", t.scaled(nxt["reward"], nxt["done"])))
            self._resets.append(lambda cur, out, reset: t.reset_returns(self.num_envs, reset))
        elif kind is InitTracker:
            if t.init_key != IS_INIT:
                raise FastUnsupported(f"InitTracker writing {t.init_key!r}; the fast collector runs it on {IS_INIT!r}")
            self._steps.append(lambda cur, nxt: nxt.__setitem__(IS_INIT,
                                                                torch.zeros(self.num_envs, 1, dtype=torch.bool)))
            self._resets.append(lambda cur, out, reset: out.__setitem__(IS_INIT, reset.clone()))
            self.memory.append(IS_INIT)
        elif kind is TensorDictPrimer:
            defaults = t.default_value.values() if isinstance(t.default_value, dict) else [t.default_value]
            nested = any(isinstance(k, tuple) for k in t.primers.keys())
            if t.random or any(v not in (None, 0) for v in defaults) or nested:
                raise FastUnsupported("a TensorDictPrimer with random or non-zero defaults, or nested keys (the fast "
                                      "collector runs the primer of a recurrent policy's states: zeros at a reset)")
            for key in t.primers.keys():
                spec = self.built.env.observation_spec[key]  # as the env has it: one per copy
                self._resets.append(lambda cur, out, reset, key=key, spec=spec: out.__setitem__(
                    key, torch.zeros(spec.shape, dtype=spec.dtype)))
                self.memory.append(key)
                self.states.append(key)
        elif kind is ExplorationNoise:  # its own step and reset code: the same draws in the same order
            self._steps.append(lambda cur, nxt: nxt.__setitem__(NOISE_KEY, t.stepped(cur[NOISE_KEY])))
            self._resets.append(lambda cur, out, reset: out.__setitem__(
                NOISE_KEY, t.restarted(torch.Size([self.num_envs]))))
            self.memory.append(NOISE_KEY)
        else:
            raise FastUnsupported(f"the env has a {kind.__name__} transform, which the fast collector does not run")

    def _observation_layout(self) -> dict[str, tuple[type, tuple[int, ...]]] | None:
        """Each observation entry's numpy dtype and shape (one per copy), where the observation is one numeric
        array (a ``Box``), a ``Discrete`` from 0 (TorchRL reads it as a categorical integer: toy text), or a ``Dict``
        of them read as top-level entries (a board and its action mask, Taxi's state and mask): else None (the step
        then reads the observation with TorchRL's readers)."""
        space = self.vec.single_observation_space
        spaces = (dict(space.spaces) if isinstance(space, gym.spaces.Dict)
                  else {keys.OBSERVATION: space} if isinstance(space, gym.spaces.Box | gym.spaces.Discrete) else None)
        if spaces is None or self.nested or sorted(spaces) != sorted(self.obs_keys):
            return None
        layout: dict[str, tuple[type, tuple[int, ...]]] = {}
        for key, sub in spaces.items():
            spec = self.base.observation_spec.get(key)
            dtype = _NUMPY.get(spec.dtype, _NUMPY_INTEGERS.get(spec.dtype))
            discrete = isinstance(sub, gym.spaces.Discrete) and int(sub.start) == 0 and isinstance(spec, Categorical)
            if not (isinstance(sub, gym.spaces.Box | gym.spaces.MultiBinary) or discrete) or dtype is None:
                return None  # e.g. a Discrete entry TorchRL reads as one-hot, or one counted from a start
            layout[key] = (dtype, tuple(spec.shape))
        return layout

    def _plan_arrays(self) -> list[Callable[[Values, dict[str, np.ndarray]], None]] | None:
        """The step on numpy arrays, or None where it does not apply (the step then runs on tensors).

        Applies when the observation is one floating-point or integer array, or a ``Dict`` of them (a game's board
        and its action mask), and every transform has a numpy form below (TorchRL's fixed ``ObservationNorm`` on
        floating-point observations only):
        the env's outputs stay numpy arrays through the transforms (a numpy operation on a small array costs
        a fraction of a tensor operation) and become tensors once, without a copy. The same float operations
        in the same order, so the same bits as the tensor step (``tests/test_fast.py``)."""
        obs_spec, reward_spec = self.base.observation_spec.get(keys.OBSERVATION, None), self.base.reward_spec
        layout = self._observation_layout()
        if layout is None or reward_spec.dtype not in _NUMPY:
            return None
        self._array_layout = (layout, (_NUMPY[reward_spec.dtype], tuple(reward_spec.shape)))
        ops: list[Callable[[Values, dict[str, np.ndarray]], None]] = []
        for t in self.transforms:
            kind = type(t)
            if kind is FiniteCheck:
                if not set(t.in_keys) <= {*layout, "reward"}:
                    return None
                ops.append(self._finite_check(t))
            elif kind is MaskCheck:
                if t.mask_key not in layout:
                    return None
                ops.append(_mask_check(t))
            elif kind is ActionMask:  # the action spec's mask updated from the checked one, as its step does
                if t.in_keys[1] not in layout:
                    return None
                spec, mask_key = t.action_spec, t.in_keys[1]  # the env's spec, looked up once a batch (begin())
                ops.append(lambda cur, nxt, spec=spec, key=mask_key: spec.update_mask(torch.from_numpy(nxt[key])))
            elif kind is DoubleToFloat:
                if not set(t.in_keys) <= {*layout, "reward"}:  # an entry inside a Dict: the tensor step
                    return None
                ops.append(lambda cur, nxt, t=t: nxt.update(
                    {k: nxt[k].astype(np.float32) for k in t.in_keys if k in nxt}))
            elif kind is ObservationNorm:
                if list(t.in_keys) != [keys.OBSERVATION] or obs_spec is None or obs_spec.dtype not in _NUMPY:
                    return None
                ops.append(_entry_op(keys.OBSERVATION, functools.partial(_observation_norm, t)))
            elif kind is RunningObsNorm:  # bound to its buffers' memory for this batch (see begin())
                ops.append(_entry_op(t.in_keys[0], t.array_step()))
            elif kind is StepCounter:
                ops.append(lambda cur, nxt: nxt.__setitem__("step_count", cur["step_count"].numpy() + 1))
            elif kind is RewardSum:
                ops.append(lambda cur, nxt: nxt.__setitem__("episode_reward",
                                                            cur["episode_reward"].numpy() + nxt["reward"]))
            elif kind is ReturnScaling:
                ops.append(_reward_op(t.array_step(self.num_envs)))
            elif kind is InitTracker:
                ops.append(lambda cur, nxt: nxt.__setitem__(IS_INIT, np.zeros((self.num_envs, 1), dtype=bool)))
            elif kind is TensorDictPrimer:
                continue  # the policy writes the next states
            elif kind is ExplorationNoise:  # torch's draws: a tensor, its memory shared with the array
                ops.append(lambda cur, nxt, t=t: nxt.__setitem__(NOISE_KEY, t.stepped(cur[NOISE_KEY]).numpy()))
            else:  # RewardClipping's tensor bounds, index observations: the tensor step
                return None
        return ops

    def _single_env(self) -> gym.Env | None:
        """The one copy a ``SyncVectorEnv`` holds, where the numpy step runs and stepping it directly gives the same
        outputs as the vector env's step (its observation copied, as the vector env copies it): else None."""
        vec = self.vec
        if (self._array_steps is None or self.num_envs != 1 or type(vec) is not gym.vector.SyncVectorEnv
                or vec.autoreset_mode != gym.vector.AutoresetMode.DISABLED):
            return None
        return vec.envs[0]

    @staticmethod
    def _finite_check(t: FiniteCheck) -> Callable[[Values, dict[str, np.ndarray]], None]:
        """``t``'s step on numpy arrays: count the step in its buffer's memory, check the values."""
        steps, checked = t.steps.numpy(), list(t.in_keys)

        def check(cur: Values, nxt: dict[str, np.ndarray]) -> None:
            steps[()] += 1  # as t.count_step(), on the view bound for this batch
            if not all(np.isfinite(nxt[k]).all() for k in checked if k in nxt):  # the check names what and where
                t.check(_Values({k: torch.from_numpy(v) for k, v in nxt.items()}), f"at step {int(steps)}")
        return check

    def begin(self) -> None:
        """Bind the numpy step to the transforms' buffers as they are now (before each batch: a buffer replaced
        since, by ``.to()`` or a new shape, is not written through a stale view)."""
        if self._array_steps is not None:
            self._array_steps = self._plan_arrays()

    def _read_info(self, infos: dict[str, Any], out: Values) -> Values:
        """``out`` with the env's info entries from ``infos`` (as its info reader writes them)."""
        names = self._info_names
        if not names:
            return out
        if any(k in infos for k in names):
            values = info_values(infos, names, self.num_envs, self._asked)
            out.update({(INFO, k): v for k, v in values.items()})
        else:  # none reported (most steps of most envs): one NaN tensor, never written in place
            out.update(self._unreported)
        return out

    def _observation_arrays(self, obs: Any, copy: bool) -> dict[str, np.ndarray]:
        """The observation's entries as arrays of the spec's dtypes and shapes (TorchRL's readers' values)."""
        read = np.array if copy else np.asarray
        if not isinstance(obs, dict):
            obs = {keys.OBSERVATION: obs}
        layout = self._array_layout[0]
        return {key: read(obs[key], dtype=dtype).reshape(shape) for key, (dtype, shape) in layout.items()}

    def _step_arrays(self, obs: Any, reward: Any, terminated: Any, truncated: Any, cur: Values,
                     copy: bool = False) -> Values:
        """The step's outputs through the numpy transforms; ``copy``: the observation copied (one copy stepped
        directly, whose env may hand out one array it updates in place, as the vector env copies it)."""
        shape = (self.num_envs, 1)
        _, (reward_dtype, reward_shape) = self._array_layout
        terminated = np.asarray(terminated, dtype=bool).reshape(shape)
        truncated = np.asarray(truncated, dtype=bool).reshape(shape)
        nxt = self._observation_arrays(obs, copy)
        nxt.update({"reward": np.asarray(reward, dtype=reward_dtype).reshape(reward_shape),
                    "done": terminated | truncated, "terminated": terminated, "truncated": truncated})
        for op in self._array_steps:
            op(cur, nxt)
        return _Values({k: torch.from_numpy(v) for k, v in nxt.items()})

    def current_transforms(self) -> list[Any]:
        """The env's transforms as they are now (one may have been appended after planning)."""
        return env_transforms(self.built.env)

    def stale(self) -> bool:
        """True when the env's transforms are no longer the ones this plan runs."""
        now = self.current_transforms()
        return len(now) != len(self.transforms) or any(a is not b for a, b in zip(now, self.transforms, strict=True))

    def step(self, action: torch.Tensor, cur: Values) -> Values:
        """The env's ``("next", ...)`` entries after ``action`` from state ``cur``, transformed."""
        base = self.base
        actions = self.action_spec.to_numpy(action, safe=False)
        if self._one_copy is not None:  # the vector env's step for one copy in DISABLED mode, without its bookkeeping
            obs, reward, terminated, truncated, info = self._one_copy.step(actions[0])
            return self._read_info(info, self._step_arrays(obs, np.float64(reward), terminated, truncated, cur,
                                                           copy=True))  # (the vector env stores rewards as float64)
        obs, reward, terminated, truncated, info = self.vec.step(actions)
        if self._array_steps is not None:
            return self._read_info(info, self._step_arrays(obs, reward, terminated, truncated, cur))
        terminated, truncated, done, _ = base.read_done(terminated=terminated, truncated=truncated)
        shape = (self.num_envs, 1)
        nxt = _Values(base.read_obs(obs))
        nxt["reward"] = base.read_reward(reward)
        nxt["done"], nxt["terminated"], nxt["truncated"] = done.view(shape), terminated.view(shape), \
            truncated.view(shape)
        for op in self._steps:
            op(cur, nxt)
        return self._read_info(info, nxt)

    def reset(self, reset: torch.Tensor, cur: Values) -> Values:
        """Reset the copies where ``reset`` (``[num_envs, 1]``) is True; ``cur`` updated in place and returned."""
        if self._one_copy is not None:  # the vector env's reset of its one copy, without its bookkeeping
            obs, info = self._one_copy.reset(seed=None, options={})  # (the vector env's call, reset_mask popped)
            out = _Values({k: torch.from_numpy(v) for k, v in self._observation_arrays(obs, copy=True).items()})
        else:
            obs, info = self.vec.reset(options={"reset_mask": reset.view(self.num_envs).numpy()})
            out = _Values(self.base.read_obs(obs))
        for op in self._resets:
            op(cur, out, reset)
        self._read_info(info, out)
        if self._one_copy is not None:  # the one copy restarts: its values are the reset's (fresh arrays)
            cur.update(out)
            return cur
        rows = reset.view(self.num_envs)
        for key, value in out.items():
            if isinstance(value, TensorDictBase):  # a Dict or Tuple observation: entry by entry
                cur[key] = value.apply(lambda new, old: torch.where(expand_as_right(rows, new), new, old), cur[key])
            else:
                cur[key] = torch.where(expand_as_right(rows, value), value, cur[key])
        return cur


def _nested(values: dict[Any, torch.Tensor]) -> dict[str, Any]:
    """``values`` with its ``(outer, inner)`` keys (the infos) as nested dicts, as the batch's TensorDict holds them."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(key, tuple):
            out.setdefault(key[0], {})[key[1]] = value
        else:
            out[key] = value
    return out


class InProcessCollector:
    """What ppo_td's in-process collectors share, TorchRL ``Collector``'s interface: batches of ``frames_per_batch``
    frames from :meth:`rollout` until ``total_frames``; the policy is called, not copied (weight updates apply at
    once); :meth:`shutdown` closes the env."""

    env: Any
    frames_per_batch: int
    total_frames: int
    frames: int

    def rollout(self) -> TensorDictBase:
        raise NotImplementedError

    def __len__(self) -> int:
        return -(self.total_frames // -self.frames_per_batch)

    def __iter__(self) -> Iterator[TensorDictBase]:
        while self.frames < self.total_frames:
            batch = self.rollout()
            self.frames += batch.numel()
            yield batch

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to do: the collector calls the training policy itself."""

    def shutdown(self) -> None:
        """Close the env (as ``Collector.shutdown`` does)."""
        if not self.env.is_closed:
            self.env.close()


class FastCollector(InProcessCollector):
    """In-process collector with TorchRL ``Collector``'s batches and interface, minus its per-step cost.

    Yields ``[num_envs, frames_per_batch // num_envs]`` TensorDicts (time dim named
    ``"time"``) with the keys ``Collector`` writes, ``("collector", "traj_ids")``
    included, until ``total_frames``. The policy is called, not copied: weight updates
    apply at once. The current step (observation, counters, flags, trajectory ids) is
    :meth:`state_dict`, which checkpoints save and :meth:`load_state_dict` restores.

    Raises:
        FastUnsupported: a part of ``env`` or ``actor`` it cannot run (the message names it).

    Example:
        >>> collector = FastCollector(build_env(config.env), actor, frames_per_batch=512, total_frames=50_000)
        >>> batch = next(iter(collector))
    """

    def __init__(self, env: BuiltEnv, actor: nn.Module, frames_per_batch: int, total_frames: int,
                 critic: nn.Module | None = None, device: torch.device | str = "cpu", inference: str = "auto",
                 compile: bool = False) -> None:
        self.fast_env = FastEnv(env)
        self.fast_policy = FastPolicy(actor, critic, device, inference, rows=self.fast_env.num_envs, compile=compile)
        if sorted(self.fast_env.states) != sorted(self.fast_policy.states):
            raise FastUnsupported(f"the env carries the recurrent states {sorted(self.fast_env.states)}, the policy "
                                  f"{sorted(self.fast_policy.states)}: build the env with "
                                  "ppo_td.models.add_policy_inputs(env, actor, critic)")
        if self.fast_policy.noise and NOISE_KEY not in self.fast_env.memory:
            raise FastUnsupported(f"the gSDE actor reads {NOISE_KEY!r}, which the env does not carry: build the env "
                                  "with ppo_td.models.add_policy_inputs(env, actor, critic, every)")
        self.env, self.policy = env.env, actor
        n = self.fast_env.num_envs
        if frames_per_batch % n:
            raise ValueError(f"frames_per_batch={frames_per_batch} must be a multiple of the {n} env copies")
        self.frames_per_batch, self.total_frames = frames_per_batch, total_frames
        first = self.env.reset()
        self.current: Values = {k: first.get(k) for k in self.fast_env.carried + list(_FLAGS)}
        self.traj_ids = torch.arange(n)
        self.next_traj = n
        self.frames = 0

    def state_dict(self) -> dict[str, Any]:
        """The current step of every env copy and the trajectory counters (what the next batch starts from)."""
        return {"current": {k: v.clone() for k, v in self.current.items()}, "traj_ids": self.traj_ids.clone(),
                "next_traj": self.next_traj}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`state_dict` (of a collector over the same env layout). The frame budget stays
        this collector's own (a resumed run builds its collector with the frames left)."""
        state = {**state, "current": {**{k: torch.full_like(self.current[k], torch.nan) for k in self.fast_env.info},
                                      **state["current"]}}  # a checkpoint from before the infos were read: NaN
        if set(state["current"]) != set(self.current):
            raise ValueError(f"collector state holds {sorted(map(str, state['current']))}, this collector carries "
                             f"{sorted(map(str, self.current))}")
        self.current = {k: v.clone() for k, v in state["current"].items()}
        self.traj_ids, self.next_traj = state["traj_ids"].clone(), int(state["next_traj"])

    def _replan(self) -> None:
        if not self.fast_env.stale():
            return
        try:  # a transform was added or removed since: plan again (or say why not)
            self.fast_env = FastEnv(self.fast_env.built)
        except FastUnsupported as err:
            raise FastUnsupported(f"the env's transforms changed after the fast collector was built: {err}. "
                                  "Add transforms before building the pipeline, or set "
                                  "collector.step_loop='torchrl'") from err

    @torch.no_grad()
    def rollout(self) -> TensorDictBase:
        """One batch of ``frames_per_batch`` frames from the current state."""
        self._replan()
        env, policy = self.fast_env, self.fast_policy
        env.begin()
        policy.refresh()
        n, steps = env.num_envs, self.frames_per_batch // env.num_envs
        cur: Values = {k: self.current[k] for k in env.carried}
        flags = {k: self.current[k] for k in _FLAGS}
        traj_ids = self.traj_ids
        root: dict[str, list[torch.Tensor]] = {k: [] for k in list(cur) + list(_FLAGS) + policy.out_keys}
        nexts: dict[str, list[torch.Tensor]] = {k: [] for k in list(cur) + ["reward", *_FLAGS]}
        ids: list[torch.Tensor] = []
        state_values: list[torch.Tensor] = []
        for _ in range(steps):
            values = dict(cur)
            policy.sample(values)
            values.update(flags)
            nxt = env.step(values[keys.ACTION], cur)
            for key in env.states:
                nxt[key] = values["next", key]
            for key, store in root.items():
                store.append(values[key])
            for key, store in nexts.items():
                store.append(nxt[key])
            ids.append(traj_ids)
            if policy.records_value:
                state_values.append(values[keys.STATE_VALUE])
            cur = {k: nxt[k] for k in env.carried}
            flags = {k: nxt[k] for k in _FLAGS}
            done = nxt["done"]
            if done.any():
                cur = env.reset(done, cur)
                flags = {k: torch.zeros_like(v) for k, v in flags.items()}
                ended = done.view(n)
                fresh = torch.arange(self.next_traj, self.next_traj + int(ended.sum()))
                self.next_traj += fresh.numel()
                traj_ids = traj_ids.masked_scatter(ended, fresh)
        source: dict[str, Any] = _nested({k: torch.stack(v, 1) for k, v in root.items()})
        source["next"] = _nested({k: torch.stack(v, 1) for k, v in nexts.items()})
        source["collector"] = {"traj_ids": torch.stack(ids, 1)}
        if state_values:
            source["collector"][keys.STATE_VALUE] = torch.stack(state_values, 1)
        self.current, self.traj_ids = {**cur, **flags}, traj_ids
        return TensorDict(source, batch_size=[n, steps]).refine_names(None, "time")
