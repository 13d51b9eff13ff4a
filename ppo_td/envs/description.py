"""The one description of a built env that the layers above read: observation, action, mask.

The env layer reads the TorchRL env's public specs once (:func:`describe`) and hands
the result up. Models size their networks from it, checkpoints store its
:meth:`EnvDescription.signature`, evaluation rebuilds from it; nobody asks the env
again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import torch
from torchrl.data import Categorical, Composite, MultiCategorical, TensorSpec
from torchrl.data.tensor_specs import ContinuousBox
from torchrl.envs import Compose, EnvBase, TransformedEnv

from ppo_td import keys
from ppo_td.envs.masking import MASK_KEY
from ppo_td.envs.transforms import ReturnScaling, RunningObsNorm

ActionKind = Literal["discrete", "multi_discrete", "box"]
ObservationKind = Literal["vector", "discrete", "multi_discrete", "image", "dict"]

@dataclass(frozen=True)
class ObservationSpace:
    """One copy's observation, as plain data: what the encoders of :mod:`ppo_td.models.encoders` are built from.

    ``kind`` is how ppo_td reads it:

    - ``"vector"``: numbers of any shape (float or integer ``Box``, ``MultiBinary``), cast to float and flattened;
    - ``"discrete"``: one index in ``[0, n)`` (Gymnasium ``Discrete``, TorchRL ``Categorical``), ``nvec == (n,)``;
    - ``"multi_discrete"``: indices, each in ``[0, nvec[i])`` (``MultiDiscrete``, TorchRL ``MultiCategorical``);
    - ``"image"``: ``uint8``/``bool`` of 2 or 3 dims, or float of 3 dims (HWC or CHW): a CNN;
    - ``"dict"``: named ``entries`` (a ``Dict`` or ``Tuple`` space; a tuple's entries are named "0", "1", ...).
    """

    kind: ObservationKind
    shape: tuple[int, ...] = ()
    """One copy's shape (``()`` for a dict)."""
    dtype: str = "float32"
    """The torch dtype's name (``uint8``, ``int64``, ``float32``...)."""
    nvec: tuple[int, ...] | None = None
    """Discrete kinds: choices per entry."""
    entries: tuple[tuple[str, ObservationSpace], ...] = ()
    """Dict kind: (key, space) pairs, sorted by key."""

    def __str__(self) -> str:
        if self.kind == "dict":
            return "Dict(" + ", ".join(f"{k}={v}" for k, v in self.entries) + ")"
        if self.kind == "discrete":
            return f"Discrete({self.nvec[0]})"
        if self.kind == "multi_discrete":
            return f"MultiDiscrete({list(self.nvec)})"
        return f"{self.kind}({self.dtype}{list(self.shape)})"

    @property
    def is_flat_float(self) -> bool:
        """A float32 vector: the observation ppo_td's MLPs read as it is (no encoder; other dtypes are cast)."""
        return self.kind == "vector" and len(self.shape) == 1 and self.dtype == "float32"

    def images(self) -> list[ObservationSpace]:
        """Every image in this space (itself, or its entries')."""
        if self.kind == "image":
            return [self]
        return [img for _, entry in self.entries for img in entry.images()]


def observation_space(spec: TensorSpec, batch_dims: int = 0) -> ObservationSpace:
    """Read a TorchRL observation spec (one entry, or a ``Composite``) into an :class:`ObservationSpace`.

    Raises:
        ValueError: a spec kind no encoder reads (the message names it).
    """
    if isinstance(spec, Composite):
        entries = tuple((str(k), observation_space(spec[k], batch_dims)) for k in sorted(spec.keys()))
        if not entries:
            raise ValueError("the observation is an empty Dict")
        return ObservationSpace("dict", entries=entries)
    shape, dtype = tuple(int(d) for d in spec.shape[batch_dims:]), spec.dtype
    name = str(dtype).removeprefix("torch.")
    if isinstance(spec, MultiCategorical):
        nvec = spec.nvec.reshape(-1, _numel(shape))[0] if shape else spec.nvec.reshape(-1)[:1]
        return ObservationSpace("multi_discrete", shape, name, tuple(int(n) for n in nvec.tolist()))
    if isinstance(spec, Categorical):
        n = int(spec.space.n)
        return (ObservationSpace("discrete", shape, name, (n,)) if not shape
                else ObservationSpace("multi_discrete", shape, name, (n,) * _numel(shape)))
    if dtype.is_complex:
        raise ValueError(f"complex observations ({name}{list(shape)}) have no encoder")
    image = (dtype in (torch.uint8, torch.bool) and len(shape) in (2, 3)) or (dtype.is_floating_point
                                                                              and len(shape) == 3)
    if image:
        return ObservationSpace("image", shape, name)
    return ObservationSpace("vector", shape, name)


def _numel(shape: tuple[int, ...]) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


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
    observation: ObservationSpace | None = None
    """What ``"observation"`` holds, for the encoders (None: a float vector of ``observation_shape``)."""
    group: str | None = None
    """A multi-agent env: the agent group whose entries hold the observations, actions and rewards (``"agents"``);
    the shapes above are one agent's. None: a one-agent env."""
    num_agents: int = 1
    """Agents in the group (1 for a one-agent env)."""
    state_shape: tuple[int, ...] | None = None
    """A multi-agent env with a global ``"state"`` entry: its shape (None without one)."""
    teams: tuple[EnvDescription, ...] = ()
    """A multi-agent env with several agent groups: each group's description, in the env's order (``group`` is
    then None, and the fields above are the first group's: read each group's from here)."""

    @property
    def group_names(self) -> list[str]:
        """The names of the agent groups: each of ``teams``, else ``[group]``; [] for a one-agent env."""
        return [team.group for team in self.teams] if self.teams else [self.group] if self.group is not None else []

    @property
    def multiagent(self) -> bool:
        """The env has agent groups (one: ``group``; several: ``teams``)."""
        return self.group is not None or bool(self.teams)

    def with_agents(self, group: str, num_agents: int, state_shape: tuple[int, ...] | None) -> EnvDescription:
        """This description as one agent's of ``group`` (``num_agents`` of them)."""
        return dataclasses.replace(self, group=group, num_agents=num_agents, state_shape=state_shape)

    @property
    def observation_space(self) -> ObservationSpace:
        """:attr:`observation`, or the float vector of ``observation_shape`` when not given."""
        return self.observation or ObservationSpace("vector", self.observation_shape)

    @property
    def observation_size(self) -> int:
        """Numbers in one observation tensor (the product of its shape; 1 for a dict observation)."""
        return _numel(self.observation_shape)

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
        if self.teams:
            return {"groups": {team.group: team.signature() for team in self.teams}}
        out = {"observation_shape": list(self.observation_shape), "action_space": action}
        if self.group is not None:
            out.update(group=self.group, num_agents=self.num_agents)
        if not self.observation_space.is_flat_float:
            out["observation_space"] = str(self.observation_space)
        return out


def describe(env: EnvBase) -> EnvDescription:
    """Read ``env``'s public specs into an :class:`EnvDescription` (any TorchRL env with an ``"observation"``;
    a multi-agent env's group is described by :func:`ppo_td.envs.multiagent.describe_agents`).

    Raises:
        ValueError: the env has no ``"observation"`` key or an action spec ppo_td's policies do not handle.
    """
    obs_spec = env.observation_spec
    if keys.OBSERVATION not in obs_spec.keys():
        grouped = [k for k in obs_spec.keys()
                   if hasattr(obs_spec[k], "keys") and keys.OBSERVATION in obs_spec[k].keys()]
        if grouped:
            raise ValueError(f"the env is a multi-agent env (its agent groups {grouped} hold the observations): set "
                             "env.suite to 'vmas' or 'pettingzoo' (ppo_td.envs.multiagent), or use a multi-agent "
                             "preset such as vmas-navigation")
        raise ValueError(f"the env's observation spec has keys {list(obs_spec.keys())}; ppo_td's networks read "
                         f"{keys.OBSERVATION!r}. Rename the entry with torchrl.envs.RenameTransform")
    batch_dims = len(env.batch_size)
    return describe_spec(observation=obs_spec[keys.OBSERVATION], action=env.action_spec_unbatched,
                         batch_dims=batch_dims, num_envs=int(env.batch_size.numel()) if batch_dims else 1,
                         action_mask=MASK_KEY in obs_spec.keys() and obs_spec[MASK_KEY].dtype == torch.bool)


def describe_spec(observation: TensorSpec, action: TensorSpec, batch_dims: int, num_envs: int,
                  action_mask: bool, agent_dims: int = 0) -> EnvDescription:
    """An :class:`EnvDescription` from one observation spec (with ``batch_dims`` leading dimensions: the env's
    batch, then ``agent_dims`` agent dimensions) and the unbatched action spec (one copy's: with ``agent_dims``
    leading agent dimensions, which are indexed away to describe one agent)."""
    observation_desc = observation_space(observation, batch_dims)
    spec = action
    for _ in range(agent_dims):
        spec = spec[0]
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
        num_envs=num_envs,
        observation_shape=tuple(observation.shape[batch_dims:]),
        observation=None if observation_desc.is_flat_float else observation_desc,
        action_kind=kind,
        action_nvec=nvec,
        action_shape=tuple(spec.shape),
        action_low=low,
        action_high=high,
        action_mask=action_mask,
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
    vector: gym.vector.VectorEnv | None
    """None for a multi-agent env (see :attr:`simulator`)."""
    description: EnvDescription
    obs_norm: RunningObsNorm | None = None
    return_scaling: ReturnScaling | None = None
    config: Any = None
    """The :class:`~ppo_td.config.EnvConfig` it was built from (what rebuilds it)."""
    simulator: Any = None
    """The VMAS ``Environment`` under a VMAS env (ppo_td built it and handed it to TorchRL's ``VmasWrapper``):
    what :class:`~ppo_td.collect.AgentsCollector` steps. None for any other env."""
    user_transforms: tuple = ()
    """The user's transforms in the env, in order: (its :class:`~ppo_td.envs.custom.UserTransform`, the transform
    made from it) pairs."""

    notes: list = dataclasses.field(default_factory=list)
    """Lines for the user about how the env was read (a TorchRL env's observation entries, a missing time limit):
    said once by the pipeline that trains on it."""
    built_with: tuple = dataclasses.field(init=False, default=())
    """The env's transforms when it was built (:meth:`appended` are those added since)."""

    def __post_init__(self) -> None:
        self.built_with = tuple(_stack(self.env))

    def appended(self) -> list[Any]:
        """Transforms added to :attr:`env` after it was built (``env.append_transform``): the config does not record
        them, so an evaluation env built from it lacks them."""
        known = {id(t) for t in self.built_with}
        return [t for t in _stack(self.env) if id(t) not in known]

    def user_transform_states(self) -> list[dict[str, Any]]:
        """``state_dict()`` of each of the user's transforms that evaluation applies, in order: what an evaluation
        env loads (a stateful transform's statistics, as the observation normalizer's)."""
        return [made.state_dict() for user, made in self.user_transforms if user.evaluation]

    def close(self) -> None:
        if not self.env.is_closed:
            self.env.close()


def _stack(env: Any) -> list[Any]:
    """The transforms of a ``TransformedEnv``, in order (a ``Compose``'s parts, or the one)."""
    transform = getattr(env, "transform", None)
    if transform is None:
        return []
    return list(transform) if isinstance(transform, Compose) else [transform]
