"""A trained policy as a plain callable: raw observations in, actions in the env's action space out.

:func:`load_policy` reads a run folder or checkpoint; :class:`Policy` does what ppo_td's env pipeline did around
the actor in training, from the observation the env emits to the action it takes: the mask lifted from the info
(passed as ``action_mask=``), Dict and Tuple observations nested, dtypes cast, the observation normalizer frozen at
its checkpointed statistics, the actor run in TorchRL's deterministic or random exploration mode, Box actions
clipped to their bounds as the env clipped them in training, and a recurrent actor's state carried between calls.
It runs the very TorchRL actor module evaluation runs, so its actions are evaluation's actions
(``tests/test_deploy.py`` checks this step by step), bit for bit with ``inference='torch'``; by default one numpy
observation of a small MLP policy is answered in numpy, within float rounding of them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModuleBase
from torch import nn
from torchrl.envs import Transform
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ppo_td import keys
from ppo_td.config import TrainConfig
from ppo_td.envs import MASK_KEY, BuiltEnv, RunningObsNorm, build_env, gym_env
from ppo_td.envs.info import INFO
from ppo_td.envs.wrappers import needs_nesting, nest_observation, nests_entries
from ppo_td.models import make_actor_critic
from ppo_td.models.device import resolve_device
from ppo_td.models.distributions import deterministic_action
from ppo_td.models.gsde import NOISE_KEY, gsde_head
from ppo_td.models.inference import NumpyPolicy
from ppo_td.models.networks import PolicyNet
from ppo_td.models.plain import policy_net
from ppo_td.models.recurrent import Recurrent, memory_spec, recurrent_parts
from ppo_td.training.evaluation import load_transform_states

IS_INIT = "is_init"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One tensor the actor reads: its TensorDict key, the shape and dtype of one observation's value."""

    key: str | tuple[str, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def name(self) -> str:
        return self.key if isinstance(self.key, str) else ".".join(self.key)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the env's raw observation becomes the actor's TensorDict (read once from the env ppo_td builds)."""

    entries: tuple[Entry, ...]
    mask_from_info: bool
    """The mask comes from ``info["action_mask"]``: the caller passes it as ``action_mask=``."""
    nest: bool | None
    """None: the observation is read as it is; else it is nested as ppo_td's ``NestObservation`` does (``inner``)."""
    masked: bool
    """The actor reads an ``"action_mask"`` entry."""
    observation_space: gym.Space
    action_space: gym.Space
    clip_actions: bool
    images: bool = False
    """The observation holds images (``device="auto"`` then picks a GPU where there is one)."""
    normalized_parts: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """A Dict observation's entries the normalizer standardizes, in its statistics' order (its ``parts``)."""

    @classmethod
    def of(cls, built: BuiltEnv, config: TrainConfig) -> Layout:
        user = gym_env(acting_config(config.env))  # the env as the caller makes it: its spaces
        try:
            observation_space, action_space = user.observation_space, user.action_space
        finally:
            user.close()
        masked = built.description.action_mask
        in_obs = isinstance(observation_space, gym.spaces.Dict) and MASK_KEY in observation_space.spaces
        mask_from_info = masked and not in_obs
        lifted = (gym.spaces.Dict({"observation": observation_space, MASK_KEY: gym.spaces.MultiBinary(1)})
                  if mask_from_info else observation_space)
        nest = nests_entries(lifted) if needs_nesting(lifted) else None
        spec, raw = built.env.observation_spec, built.env.base_env.observation_spec  # the keys the env emits;
        inputs = [k for k in raw.keys(True, True)  # not the env's info values (ppo_td.envs.info): recorded only
                  if not (k == MASK_KEY and not masked) and not (isinstance(k, tuple) and k[0] == INFO)]
        if config.model.actor_keys:  # an asymmetric actor-critic: the actor's entries only (not the critic's)
            inputs = [k for k in inputs if not (isinstance(k, tuple) and k[0] == keys.OBSERVATION
                                                and k[1] not in config.model.actor_keys)]
        entries = tuple(Entry(k, tuple(raw[k].shape[1:]), _cast_dtype(spec, raw, k))  # their dtypes after its casts
                        for k in inputs)
        return cls(entries, mask_from_info, nest, masked, observation_space, action_space,
                   config.env.clip_actions and isinstance(action_space, gym.spaces.Box),
                   bool(built.description.observation_space.images()),
                   built.obs_norm.parts if built.obs_norm is not None else ())


class Policy(nn.Module):
    """A trained actor that takes observations as the env emits them and returns actions for the env.

    ``policy(obs)`` takes one observation or a batch (leading dimension), as numpy arrays, torch tensors, Python
    numbers, or the dicts and tuples of them a ``Dict``/``Tuple`` space gives; it returns the action(s) as the
    env takes them: numpy (an ``int`` for one ``Discrete`` action) for numpy input, a tensor for tensor input.
    ``action_mask=``: the legal actions, where the env gives them in ``info`` (in the observation, they are read
    from there). ``deterministic``: the policy's mode (default) or an action sampled from it (with torch's RNG:
    ``torch.manual_seed`` makes it reproducible). One numpy observation of a small MLP policy (as
    :mod:`ppo_td.models.inference` runs in collection) takes its mode in numpy, a fraction of torch's per-call
    cost, within float rounding of the torch path; ``inference='torch'`` keeps every call on torch.

    A recurrent policy carries its state from call to call, one per row of the batch: call :meth:`reset` when an
    episode starts (all rows, or the rows in ``done``); the first call after it starts from a zero state.

    Example:
        >>> policy = load_policy("runs/cartpole")
        >>> env = policy.make_env()
        >>> obs, _ = env.reset(seed=0)
        >>> env.step(policy(obs))
    """

    def __init__(self, actor: TensorDictModuleBase, config: TrainConfig, layout: Layout,
                 obs_stats: dict[str, Any] | None = None, device: str | torch.device = "cpu",
                 deterministic: bool = True, inference: str = "auto",
                 transforms: list[Transform] | tuple[Transform, ...] = ()) -> None:
        super().__init__()
        if inference not in ("auto", "torch"):
            raise ValueError(f"inference={inference!r}; expected 'auto' (one observation of a small MLP policy in "
                             "numpy, within float rounding of torch) or 'torch'")
        self.config, self.layout, self.deterministic = config, layout, deterministic
        where = resolve_device(str(device), images=layout.images)
        self.actor = copy.deepcopy(actor).eval()  # a copy: the caller's module (a training actor) is left alone
        for p in self.actor.parameters():
            p.requires_grad_(False)
        self.transforms = nn.ModuleList(transforms)
        """The user's observation transforms (``env.transforms`` that read or write an observation), run on each
        observation through their ``forward`` before the normalizer, as the env ran them before its normalizer."""
        self.obs_norm: RunningObsNorm | None = None
        if config.env.normalize_observations:
            if obs_stats is None:
                raise ValueError("this policy was trained on normalized observations and no statistics were given: "
                                 "load it with ppo_td.load_policy(run folder or checkpoint)")
            self.obs_norm = RunningObsNorm(int(obs_stats["mean"].numel()), clip=config.env.obs_clip,
                                           parts=layout.normalized_parts)
            self.obs_norm.load_state_dict(obs_stats)
            self.obs_norm.freeze()
            # RunningObsNorm.normalized's float32 operands, computed once (the same operations, so the same bits);
            # buffers, so they follow .to(device) (the statistics themselves stay float64 in obs_norm)
            self.register_buffer("obs_mean", self.obs_norm.mean.to(torch.float32), persistent=False)
            self.register_buffer("obs_std", torch.sqrt(self.obs_norm.var + self.obs_norm.eps).to(torch.float32),
                                 persistent=False)
            self.register_load_state_dict_post_hook(_derive_obs_operands)  # loaded statistics: derived again
        space = layout.action_space
        if layout.clip_actions:  # Box actions clipped as the env clipped them in training
            self.register_buffer("action_low", torch.as_tensor(space.low), persistent=False)
            self.register_buffer("action_high", torch.as_tensor(space.high), persistent=False)
        self.register_buffer("anchor", torch.zeros(()), persistent=False)  # where the policy is: see device
        self.memory = dict(memory_spec(self.actor))  # a recurrent actor's state keys -> per-copy shape
        head = gsde_head(self.actor)
        self._noise_shape = None if head is None else head.noise_shape  # a gSDE actor's noise matrix, per row
        self._state: dict[str, torch.Tensor] = {}
        self._fresh: torch.Tensor | None = None
        flat = {e.key for e in layout.entries} <= {keys.OBSERVATION, MASK_KEY}
        # the plain networks of a ppo_td-built actor (inside self.actor: held in a tuple, so state_dict() lists
        # them once), for the deterministic action without the TensorDict round trip
        self._plain = (policy_net(self.actor, acting=True) if flat and not self.memory else None,
                       recurrent_parts(self.actor) if flat and self.memory else None)
        self.to(where)
        # one float32 observation's deterministic action in numpy (models/inference.py): a fraction of the torch
        # path's cost on a small MLP; the parameters it reads are checked for a move or cast at every call
        entries = layout.entries
        simple = (len(entries) == 1 and entries[0].key == keys.OBSERVATION and entries[0].dtype == torch.float32
                  and not layout.masked and layout.nest is None and self._plain[0] is not None
                  and inference == "auto" and not transforms)
        self._numpy = NumpyPolicy.of(self._plain[0], rows=1) if simple else None
        self._numpy_memory: list[int] = self._numpy_pointers() if self._numpy is not None else []

    @property
    def policy_net(self) -> PolicyNet | None:
        """The :class:`~ppo_td.models.PolicyNet` of a ppo_td-built feed-forward actor (None otherwise): the same
        network, distribution and mode as the TorchRL module, so the same actions without its TensorDict."""
        return self._plain[0]

    @property
    def recurrent_net(self) -> Recurrent | None:
        """The plain :class:`~ppo_td.models.recurrent.Recurrent` form of a ppo_td-built recurrent actor."""
        return self._plain[1]

    @property
    def device(self) -> torch.device:
        """Where the networks run (``policy.to(device)`` moves them, as any module)."""
        return self.anchor.device

    @property
    def state(self) -> dict[str, torch.Tensor]:
        """A recurrent policy's current state per key (``[batch, layers, size]``, after the last call); empty before
        the first call after a reset, and for a feed-forward policy."""
        return dict(self._state)

    @property
    def recurrent(self) -> bool:
        return bool(self.memory)

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """One copy of the env this policy was trained on, as Gymnasium gives it (the user's wrappers and the time
        limit included, none of ppo_td's adapters): the observations :meth:`forward` takes."""
        return gym_env(acting_config(self.config.env), render_mode=render_mode)

    def __repr__(self) -> str:
        """What the policy acts on and with: ``Policy(env='CartPole-v1', observation_space=..., action_space=...,
        networks=..., ...)``, not the TensorDict modules' tree (``policy.actor`` prints that)."""
        parts = [f"env={self.config.env.env_id!r}", f"observation_space={self.layout.observation_space}",
                 f"action_space={self.layout.action_space}", f"networks={_networks(self.actor)}",
                 "deterministic" if self.deterministic else "sampled"]
        if len(self.transforms):
            parts.append(f"transforms=[{', '.join(type(t).__name__ for t in self.transforms)}]")
        if self.obs_norm is not None:
            parts.append("normalized observations")
        if self.memory:
            parts.append("recurrent")
        if self.layout.masked:
            parts.append("action mask")
        return f"Policy({', '.join(parts)}, device={self.device})"

    def reset(self, done: Any = None) -> None:
        """Start new episodes: every row (``done=None``) or the rows where ``done`` is true (a recurrent policy's
        state restarts from zeros there); nothing to do for a feed-forward policy."""
        if done is None or self._fresh is None:
            self._state, self._fresh = {}, None
            return
        rows = done if isinstance(done, torch.Tensor) else torch.as_tensor(np.asarray(done))
        rows = rows.to(torch.bool).reshape(-1)
        if rows.numel() != self._fresh.shape[0]:
            raise ValueError(f"reset(done) has {rows.numel()} entries for a batch of {self._fresh.shape[0]} states")
        self._fresh |= rows.to(self._fresh.device).view_as(self._fresh)

    def _numpy_pointers(self) -> list[int]:
        """Where the numpy path's parameters and buffers live now (looked up afresh: ``.to()`` replaces buffers)."""
        buffers = [getattr(self, name, None) for name in ("obs_mean", "obs_std", "action_low", "action_high")]
        return self._numpy.memory() + [b.data_ptr() for b in buffers if b is not None]

    def _numpy_action(self, observation: np.ndarray) -> Any:
        """The deterministic action for one float observation of the trained shape, in numpy; None where the torch
        path must run (another shape or dtype; parameters moved off the CPU or cast)."""
        entry = self.layout.entries[0]
        if observation.shape != entry.shape or observation.dtype.kind != "f":
            return None
        memory = self._numpy_pointers()
        if memory != self._numpy_memory:  # moved, cast or replaced since: read them again, or leave numpy
            if self.device.type != "cpu" or not self._numpy.refresh():
                return None
            self._numpy_memory = memory
        obs = observation.astype(np.float32)[None]
        if self.obs_norm is not None:  # as observation_values, on the buffers' memory
            clip = self.obs_norm.clip
            obs = (obs - self.obs_mean.numpy()) / self.obs_std.numpy()
            np.maximum(obs, -clip, out=obs)
            np.minimum(obs, clip, out=obs)
        out = self._numpy.forward(obs)[0]
        if not np.isfinite(out).all():  # an overflowed network or a NaN observation: the torch path refuses it
            return None
        space = self.layout.action_space
        if self._numpy.kind == "categorical":  # the mode: the most probable action
            action = int(np.argmax(out))
            return action if isinstance(space, gym.spaces.Discrete) else np.asarray(action, dtype=space.dtype)
        out = out.astype(space.dtype, copy=False)  # the Gaussian's mode, its mean, in the space's dtype
        if self.layout.clip_actions:  # clipped as the env clipped it (in that dtype: a float64 bound stays exact)
            np.minimum(out, self.action_high.numpy(), out=out)
            np.maximum(out, self.action_low.numpy(), out=out)
        return out

    @torch.no_grad()
    def forward(self, observation: Any, action_mask: Any = None, deterministic: bool | None = None,
                episode_start: Any = None) -> Any:
        """The action(s) for ``observation`` (see the class). ``episode_start``: the rows whose episode starts at
        this observation (a recurrent policy starts them from a zero state; as ``reset(episode_start)`` first)."""
        if episode_start is not None:
            self.reset(episode_start)
        if (self._numpy is not None and type(observation) is np.ndarray and action_mask is None
                and (self.deterministic if deterministic is None else deterministic)):
            action = self._numpy_action(observation)
            if action is not None:
                return action
        given = _tensor_in(observation)  # a tensor's device gets the actions back; else numpy
        as_numpy = given is None
        values, single = self.observation_values(observation, action_mask)
        mode = self.deterministic if deterministic is None else deterministic
        rows = next(iter(values.values())).shape[0]
        if self.memory:
            self._carry(rows)
        rec, net = self.recurrent_net, self.policy_net
        if mode and rec is not None:
            features, state = rec.step(values[keys.OBSERVATION], [self._state[k] for k in rec.state], self._fresh)
            action = deterministic_action(rec.head.distribution(rec.head(features), values.get(MASK_KEY)))
            self._state = dict(zip(rec.state, state, strict=True))
        elif mode and net is not None:
            action = deterministic_action(net.distribution(net(values[keys.OBSERVATION]), values.get(MASK_KEY)))
        else:
            td = TensorDict(values, batch_size=[rows], device=self.device)
            if self.memory:
                td.update({IS_INIT: self._fresh.clone(), **self._state})
            if self._noise_shape is not None:  # a sampled gSDE action: a fresh matrix per call (no episode to hold)
                td.set(NOISE_KEY, torch.randn(rows, *self._noise_shape, device=self.device))
            with set_exploration_type(ExplorationType.DETERMINISTIC if mode else ExplorationType.RANDOM):
                out = self.actor(td)
            self._state = {key: out.get(("next", key)) for key in self.memory}
            action = out.get(keys.ACTION)
        if self.memory:
            self._fresh = torch.zeros_like(self._fresh)
        if self.layout.clip_actions:
            action = torch.maximum(torch.minimum(action, self.action_high), self.action_low)
        if single:
            action = action[0]
        if not as_numpy:
            return action.to(given.device)
        array = action.cpu().numpy().astype(self.layout.action_space.dtype, copy=False)
        return array.item() if isinstance(self.layout.action_space, gym.spaces.Discrete) and single else array

    def observation_values(self, observation: Any, action_mask: Any = None,
                           normalized: bool = True) -> tuple[dict, bool]:
        """The actor's inputs for ``observation`` (TensorDict key -> ``[batch, ...]`` tensor, normalized where the
        policy was trained on normalized observations, unless ``normalized=False``), and whether it was one
        observation rather than a batch."""
        layout = self.layout
        if layout.mask_from_info:
            if action_mask is None:
                raise ValueError("this policy was trained with action masks from info['action_mask']: pass "
                                 "action_mask=info['action_mask'] with the observation")
            observation = {"observation": observation, MASK_KEY: action_mask}
        elif action_mask is not None:
            if not layout.masked:
                raise ValueError("action_mask given, but this policy was trained without action masks (the env had "
                                 "none, or env.action_mask='none'); call it without action_mask")
            if not isinstance(observation, Mapping):
                observation = {"observation": observation}
            observation = {**observation, MASK_KEY: action_mask}
        if layout.nest is not None:
            observation = nest_observation(observation, layout.nest)
        elif not isinstance(observation, Mapping):
            observation = {"observation": observation}
        batch: int | None = None
        values: dict = {}
        for entry in layout.entries:
            value = _lookup(observation, entry, layout.observation_space)
            tensor, rows = _as_tensor(value, entry, layout.observation_space)
            if batch is not None and rows != batch:
                raise ValueError(f"observation entries disagree on the batch: {entry.name!r} has "
                                 f"{'one observation' if rows is None else f'{rows} rows'}, another "
                                 f"{'one observation' if batch is None else f'{batch} rows'}")
            batch = rows
            values[entry.key] = tensor
        single = batch is None
        mask = values.get(MASK_KEY)
        if mask is not None and layout.masked:
            empty = (~mask.reshape(-1, mask.shape[-1])).all(-1).nonzero().flatten().tolist()
            if empty:
                raise ValueError(f"the action mask allows no action{'' if single else f' in rows {empty}'}: every "
                                 "step needs at least one legal action (the env's mask, as training checked it)")
        for key, tensor in values.items():
            values[key] = (tensor.unsqueeze(0) if single else tensor).to(self.device)
        if len(self.transforms):
            values = self._transformed(values)
        if self.obs_norm is not None and normalized:  # RunningObsNorm.normalized on a float32 observation
            clip = self.obs_norm.clip
            for key, where in self.obs_norm_slices():
                obs = values[key].to(torch.float32)
                flat = obs.reshape(obs.shape[0], -1)
                values[key] = ((flat - self.obs_mean[where]) / self.obs_std[where]).clamp_(-clip, clip).reshape(
                    obs.shape)
        return values, single

    def obs_norm_slices(self) -> list[tuple[str | tuple[str, ...], slice]]:
        """Each normalized input's key and its slice of the statistics: ``"observation"`` and all of them, or the
        Dict entries the actor reads (an asymmetric actor's critic entries are not inputs)."""
        parts = self.obs_norm.parts if self.obs_norm is not None else ()
        if not parts:
            return [(keys.OBSERVATION, slice(None))]
        inputs, out, start = {e.key for e in self.layout.entries}, [], 0
        for name, shape in parts:
            size = math.prod(shape)
            if (keys.OBSERVATION, name) in inputs:
                out.append(((keys.OBSERVATION, name), slice(start, start + size)))
            start += size
        return out

    def _transformed(self, values: dict) -> dict:
        """``values`` through the user's observation transforms (each one's ``forward`` on a TensorDict)."""
        td = TensorDict({}, batch_size=[next(iter(values.values())).shape[0]], device=self.device)
        for key, value in values.items():
            td.set(key, value)
        for transform in self.transforms:
            td = transform(td)
        return {key: td.get(key) for key in td.keys(True, True)}

    def _carry(self, rows: int) -> None:
        """Zero states for a new batch of ``rows`` episodes (refused while other episodes are under way)."""
        if self._fresh is not None and self._fresh.shape[0] == rows:
            return
        if self._fresh is not None and not bool(self._fresh.all()):
            raise ValueError(f"this recurrent policy holds the state of {self._fresh.shape[0]} episodes and got a "
                             f"batch of {rows} observations: call policy.reset() first")
        self._state = {key: torch.zeros(rows, *shape, device=self.device) for key, shape in self.memory.items()}
        self._fresh = torch.ones(rows, 1, dtype=torch.bool, device=self.device)


def _derive_obs_operands(policy: Policy, incompatible_keys: Any) -> None:
    """After ``policy.load_state_dict``: the normalizer's float32 operands from the statistics just loaded (in
    place, so the numpy path's views stay valid)."""
    norm = policy.obs_norm
    with torch.no_grad():
        policy.obs_mean.copy_(norm.mean.to(torch.float32))
        policy.obs_std.copy_(torch.sqrt(norm.var + norm.eps).to(torch.float32))


def _tensor_in(value: Any) -> torch.Tensor | None:
    """The first tensor in an observation (a tensor, or a dict or tuple holding one), else None."""
    if isinstance(value, torch.Tensor):
        return value
    children = value.values() if isinstance(value, Mapping) else value if isinstance(value, tuple) else ()
    return next((t for t in map(_tensor_in, children) if t is not None), None)


def _lookup(observation: Mapping, entry: Entry, space: gym.Space) -> Any:
    path = (entry.key,) if isinstance(entry.key, str) else entry.key
    value: Any = observation
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            raise ValueError(f"the observation has no entry {entry.name!r}: the policy expects observations of "
                             f"{space} (got {_describe(observation)})")
        value = value[part]
    return value


def _as_tensor(value: Any, entry: Entry, space: gym.Space) -> tuple[torch.Tensor, int | None]:
    """``value`` as a tensor of ``entry``'s dtype, and its rows (None for one observation)."""
    tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
    extra = tensor.dim() - len(entry.shape)
    if entry.key == MASK_KEY and (extra not in (0, 1) or tuple(tensor.shape[extra:]) != entry.shape):
        raise ValueError(f"action_mask has shape {tuple(tensor.shape)}; the policy expects {entry.shape} (one flag "
                         f"per action choice) or (batch, *{entry.shape})")
    if extra not in (0, 1) or tuple(tensor.shape[extra:]) != entry.shape:
        raise ValueError(f"observation {entry.name!r} has shape {tuple(tensor.shape)} and dtype {_dtype(tensor)}; "
                         f"the policy expects {entry.shape} (one observation) or (batch, *{entry.shape}) of "
                         f"{_dtype_name(entry.dtype)}, as the env it was trained on emits ({space})")
    if tensor.dtype.is_floating_point and not (entry.dtype.is_floating_point or entry.dtype == torch.bool):
        raise ValueError(f"observation {entry.name!r} has dtype {_dtype(tensor)}; the policy expects "
                         f"{_dtype_name(entry.dtype)} (shape {entry.shape}), as the env it was trained on emits: "
                         f"pass the env's raw observation, not a scaled one")
    return tensor.to(entry.dtype), (int(tensor.shape[0]) if extra else None)


def _dtype(tensor: torch.Tensor) -> str:
    return _dtype_name(tensor.dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    shape = getattr(value, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else type(value).__name__


def acting_config(env: Any) -> Any:
    """The env config a trained policy acts in: as evaluation, whole games (no end of episode at a lost life)."""
    return dataclasses.replace(env, episodic_life=False)


def load_policy(path: str | os.PathLike, *, which: str = "last", device: str | torch.device = "cpu",
                deterministic: bool = True, inference: str = "auto") -> Policy | Any:
    """The :class:`Policy` of a run folder (its ``checkpoint.pt``, or with ``which='best'`` its ``best.pt``: the
    best evaluation during training, ``eval_every``) or a checkpoint file: the actor and the frozen
    observation statistics, checked against the env rebuilt from the checkpoint's config. A multi-agent run gives
    an :class:`~ppo_td.deploy.agents.AgentsPolicy` (the agents' observations in, their actions out), or with
    several agent groups a :class:`~ppo_td.deploy.agents.TeamPolicy` (each group's ``AgentsPolicy``).
    ``inference='torch'`` keeps every call on torch (the default answers one observation of a small MLP policy
    in numpy, within float rounding of torch)."""
    from ppo_td.persist import checkpoint_config, checkpoint_in, load_checkpoint
    from ppo_td.persist.checkpoint import check_compatible, load_weights

    if inference not in ("auto", "torch"):
        raise ValueError(f"inference={inference!r}; expected 'auto' (one observation of a small MLP policy in "
                         "numpy, within float rounding of torch) or 'torch'")
    state = load_checkpoint(checkpoint_in(path, which))
    config = checkpoint_config(state)
    if config.env.multiagent:  # an agent group: each agent's observation in, each agent's action out
        from ppo_td.deploy.agents import load_agents_policy

        return load_agents_policy(state, config, device=device, deterministic=deterministic)
    one = dataclasses.replace(config.env, num_envs=1)
    built = build_env(one)
    try:
        check_compatible(state, built.description)
        actor, _ = make_actor_critic(built.description, config.model)
        layout = Layout.of(built, config)
        # acting keeps env.transforms only: a second env without env.train_transforms where the run has some
        evaluation = build_env(one, training=False) if config.env.train_transforms else built
        try:
            load_transform_states(evaluation, state.get("transform_states", []))
            transforms = [made.clone() for made in observation_transforms(evaluation)]  # without the closed env
        finally:
            if evaluation is not built:
                evaluation.close()
    finally:
        built.close()
    load_weights(actor, state, "actor")
    return Policy(actor, config, layout, state["obs_stats"], device=device, deterministic=deterministic,
                  inference=inference, transforms=transforms)


def _cast_dtype(spec: Any, raw: Any, key: Any) -> torch.dtype:
    """The dtype of observation entry ``key`` after ppo_td's casts (DoubleToFloat, the mask to bool): the env's
    final spec where it still has the raw shape, else (a user's transform reshaped it) the raw dtype, cast."""
    final = spec.get(key, None)
    if final is not None and final.shape == raw[key].shape:
        return final.dtype
    return torch.float32 if raw[key].dtype == torch.float64 else raw[key].dtype


def observation_transforms(built: BuiltEnv) -> list[Transform]:
    """The user's transforms of ``built`` that evaluation applies and that read or write an observation entry:
    what :class:`Policy` runs on each observation (through the transform's ``forward``, TorchRL's offline call).

    Raises:
        ValueError: one of them changes actions (``in_keys_inv``): a Policy would return actions in another space.
    """
    acting = [user.name for user, made in built.user_transforms
              if user.evaluation and (made.in_keys_inv or made.out_keys_inv)]
    if acting:
        raise ValueError(f"the env's transforms {acting} change the actions on their way to the env (in_keys_inv), "
                         "which a Policy cannot do for you: act through the env (ppo-td eval, or "
                         "ppo_td.training.evaluate), or make them train-only (env.train_transforms) or part of the env")
    observed = set(built.env.observation_spec.keys(True, True)) | set(built.env.base_env.observation_spec.keys(True,
                                                                                                            True))
    return [made for user, made in built.user_transforms
            if user.evaluation and any(k in observed for k in (*made.in_keys, *made.out_keys))]


def one_agent(policy: Any, what: str) -> None:
    """Refuse an :class:`~ppo_td.deploy.agents.AgentsPolicy` where only a one-agent :class:`Policy` goes."""
    if not isinstance(policy, Policy):
        raise ValueError(f"{what} takes one-agent policies; this is the policy of an agent group "
                         f"({type(policy).__name__}): {what} for multi-agent runs is not supported yet "
                         "(docs/multi-agent.md)")


def policy_of(pipeline: Any, **kwargs: Any) -> Policy | Any:
    """A :class:`Policy` of a training pipeline's actor as it is now (a copy: training goes on undisturbed), with
    its observation statistics of the moment (an :class:`~ppo_td.deploy.agents.AgentsPolicy` for an agent group).
    The pipeline's env must be one ppo_td built from its config."""
    if pipeline.config.env.multiagent:
        from ppo_td.deploy.agents import AgentsPolicy, TeamPolicy, agent_names, team_agents

        if pipeline.description.teams:
            return TeamPolicy(pipeline.actor, pipeline.config, pipeline.description,
                              team_agents(pipeline.config, pipeline.description), **kwargs)
        names = agent_names(pipeline.config, pipeline.description.num_agents)
        return AgentsPolicy(pipeline.actor, pipeline.config, pipeline.description, names, **kwargs)
    if pipeline.built is None:
        raise ValueError("the pipeline's env was passed in, not built from its config: a Policy needs the env "
                         "ppo_td builds from config.env (give the env as an id or factory in EnvConfig)")
    if pipeline.appended:
        raise ValueError(f"the pipeline's env has transforms appended after it was built "
                         f"({', '.join(type(t).__name__ for t in pipeline.appended)}), which a Policy cannot place: "
                         "give them as transforms= factories (or env.transforms)")
    layout = Layout.of(pipeline.built, pipeline.config)
    transforms = [copy.deepcopy(made.clone()) for made in observation_transforms(pipeline.built)]  # own buffers
    return Policy(pipeline.actor, pipeline.config, layout, pipeline.observation_stats(), transforms=transforms,
                  **kwargs)


def _networks(module: nn.Module) -> str:
    """The layers of ``module`` in brief: consecutive Linear layers as their widths (``Linear 4-64-64-2``), each
    other parametrized layer by its type (``Conv2d 4->32``, ``LSTM 64``)."""
    out: list[str] = []
    widths: list[int] = []
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            if widths and widths[-1] == layer.in_features:
                widths.append(layer.out_features)
                continue
            if widths:
                out.append("Linear " + "-".join(map(str, widths)))
            widths = [layer.in_features, layer.out_features]
        elif isinstance(layer, nn.Conv2d):
            out.append(f"Conv2d {layer.in_channels}->{layer.out_channels}")
        elif isinstance(layer, (nn.LSTM, nn.GRU)):
            out.append(f"{type(layer).__name__} {layer.hidden_size}")
    if widths:
        out.append("Linear " + "-".join(map(str, widths)))
    return ", ".join(out) or type(module).__name__
