"""Generalized state-dependent exploration (gSDE; Raffin, Kober and Stulp 2022, SB3's ``use_sde``), for Box actions.

A Gaussian policy draws a new noise at every step, which averages out over the few steps a slow system (a car on
a hill, a robot's joints) takes to respond: MountainCarContinuous's car learns to stand still. gSDE makes the noise
a function of the state, held for several steps: the action is ``loc + z(s) @ (eps * std)``, where ``z(s)`` is the
policy's last hidden features (held out of the gradient, SB3's ``learn_features=False``), ``std`` a learned
``[features, actions]`` matrix (``exp`` of its log, SB3's ``full_std``) and ``eps`` a standard-normal matrix of
the same shape per env copy, drawn at each episode start and every ``model.sde_sample_every`` steps (by default
once per rollout, SB3's ``sde_sample_freq=-1``). Given the state, that action is Gaussian with mean ``loc`` and
variance ``z(s)^2 @ std^2`` per action: the log-prob and the entropy PPO uses are that Gaussian's.

The pieces are TorchRL's way of carrying exploration noise (its ``gSDEModule`` and ``gSDENoise``): ``eps`` lives in
the TensorDict (``"gsde_noise"``), an env transform (:class:`ExplorationNoise`) draws it, and the policy reads it
beside the observation. :func:`add_noise` adds the transform to an env built for such an actor (training,
evaluation, worker processes, a resume). ppo_td's fast collector steps the transform by its own code
(:meth:`ExplorationNoise.stepped` and :meth:`ExplorationNoise.restarted`) and samples the actor on plain tensors; the
fast loss scores it from the observations alone, as the log-prob and the entropy do not depend on ``eps``
(:func:`~ppo_td.models.plain.policy_net` with ``acting=True``).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, Transform, TransformedEnv
from torchrl.modules import IndependentNormal

from ppo_td.config import TrainConfig

NOISE_KEY = "gsde_noise"
"""The TensorDict entry of each env copy's noise matrix ``eps`` (``[*batch, features, actions]``)."""

VARIANCE_EPS = 1e-6
"""Added to the variance before its square root (SB3's ``StateDependentNoiseDistribution.epsilon``)."""


class GSDEHead(nn.Module):
    """Features -> ``(loc, scale, noise)``: ``body`` (the hidden layers; None: the features themselves) gives
    ``z(s)``, ``mean`` the action mean; ``scale`` is ``sqrt(z^2 @ std^2 + 1e-6)`` and ``noise`` is
    ``z @ (eps * std)`` for the ``eps`` given (zeros without one: the mean action).

    ``log_std`` (``[features, actions]``) starts at ``log_std_init`` everywhere (SB3's ``log_std_init``)."""

    def __init__(self, body: nn.Module | None, mean: nn.Linear, log_std_init: float) -> None:
        super().__init__()
        self.body = body
        self.mean = mean
        self.log_std = nn.Parameter(torch.full((mean.in_features, mean.out_features), float(log_std_init)))

    @property
    def noise_shape(self) -> tuple[int, int]:
        """The shape of one env copy's ``eps``: (features, actions)."""
        return tuple(self.log_std.shape)

    def forward(self, features: torch.Tensor,
                eps: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        latent = features if self.body is None else self.body(features)
        loc = self.mean(latent)
        held = latent.detach()  # the exploration does not train the features (SB3's learn_features=False)
        std = self.log_std.exp()
        scale = (held.square() @ std.square() + VARIANCE_EPS).sqrt()
        if eps is None:
            return loc, scale, torch.zeros_like(loc)
        noise = (held.unsqueeze(-2) @ (eps * std)).squeeze(-2)
        return loc, scale, noise


class GSDENormal(IndependentNormal):
    """TorchRL's ``IndependentNormal(loc, scale)`` whose sample is ``loc + noise`` (the state-dependent noise
    :class:`GSDEHead` computed from the env copy's ``eps``), not a fresh draw: log-prob, entropy and the
    deterministic action (``loc``) are the Gaussian's."""

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor, noise: torch.Tensor, **kwargs) -> None:
        super().__init__(loc, scale, **kwargs)
        self.noise = noise

    def sample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: torch.Size | tuple = ()) -> torch.Tensor:
        action = self.base_dist.loc + self.noise
        return action.expand(*sample_shape, *action.shape) if sample_shape else action


class ExplorationNoise(Transform):
    """Each env copy's gSDE noise matrix ``eps`` (``"gsde_noise"``, standard normal ``[features, actions]``): drawn
    at every episode start and every ``every`` steps of that copy (0: at episode starts only), carried from step to
    step in between.

    The count runs over the copy's steps since the env was made (not since its episode started), so with ``every``
    equal to the steps each copy takes per batch a new ``eps`` starts each rollout, as SB3's
    ``sde_sample_freq=-1``. Unlike SB3 (which counts from each rollout's start and does not look at episodes), a
    new ``eps`` is drawn at each episode start too, and an ``every`` that does not divide the rollout is counted
    across rollouts. Draws come from torch's global generator, which the run seeds."""

    def __init__(self, shape: tuple[int, int], every: int) -> None:
        if every < 0:
            raise ValueError(f"ExplorationNoise every={every}: a number of steps, or 0 for episode starts only")
        super().__init__(in_keys=[], out_keys=[NOISE_KEY])
        self.shape = tuple(int(n) for n in shape)
        self.every = int(every)
        self.steps = torch.zeros(0, dtype=torch.long)
        """Each copy's steps so far (sized at the first reset), on the CPU wherever the env runs (no device sync per
        step); the env's ``state_dict()`` (a checkpoint's) holds it: :meth:`get_extra_state`."""

    def get_extra_state(self) -> torch.Tensor:
        """The step counts, which set when the next matrices are drawn (torch's hook for a module's own state)."""
        return self.steps.clone()

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.steps = state.to("cpu", torch.long).clone()

    def _count(self, batch: torch.Size) -> None:
        """Step counts for copies ``batch``: kept while the copies are the same, zeros for another layout."""
        if self.steps.shape != batch:
            self.steps = torch.zeros(batch, dtype=torch.long)

    def _draw(self, batch: torch.Size, device: torch.device | None) -> torch.Tensor:
        return torch.randn(*batch, *self.shape, device=device)

    def restarted(self, batch: torch.Size, device: torch.device | None = None) -> torch.Tensor:
        """New matrices for a reset of copies ``batch``, one per copy (at a partial reset only the restarting copies
        take theirs: TorchRL keeps the others' entries, as the fast collector does)."""
        self._count(batch)
        return self._draw(batch, device)

    def stepped(self, eps: torch.Tensor) -> torch.Tensor:
        """The matrices after one step of every copy: ``eps`` (``[*batch, features, actions]``), with those of the
        copies now due redrawn."""
        if not self.every:
            return eps
        batch = eps.shape[:-2]
        self._count(batch)
        self.steps += 1
        due = self.steps % self.every == 0
        if bool(due.any()):  # on the CPU: no device sync per step
            eps = torch.where(due.reshape(*batch, 1, 1).to(eps.device), self._draw(batch, eps.device), eps)
        return eps

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        tensordict_reset.set(NOISE_KEY, self.restarted(tensordict_reset.batch_size, tensordict_reset.device))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set(NOISE_KEY, self.stepped(tensordict.get(NOISE_KEY)))
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        batch = observation_spec.shape
        observation_spec[NOISE_KEY] = Unbounded(shape=(*batch, *self.shape), device=observation_spec.device)
        return observation_spec


def noise_every(config: TrainConfig) -> int:
    """Steps of each env copy between new noise matrices: ``model.sde_sample_every``, or with 0 the steps each copy
    takes per batch (a new matrix each rollout, SB3's ``sde_sample_freq=-1``)."""
    return config.model.sde_sample_every or config.steps_per_env


def gsde_head(actor: nn.Module) -> GSDEHead | None:
    """The :class:`GSDEHead` inside ``actor`` (None without one)."""
    return next((m for m in actor.modules() if isinstance(m, GSDEHead)), None)


def noise_transform(actor: nn.Module | None, every: int) -> ExplorationNoise | None:
    """The :class:`ExplorationNoise` an env needs for ``actor`` (None when it has no gSDE head)."""
    head = None if actor is None else gsde_head(actor)
    return None if head is None else ExplorationNoise(head.noise_shape, every)


def add_noise(env: EnvBase, actor: nn.Module | None, every: int) -> EnvBase:
    """``env`` with :class:`ExplorationNoise` appended where ``actor`` has a gSDE head and ``env`` does not carry
    ``"gsde_noise"`` yet (a ``TransformedEnv`` is extended in place and returned)."""
    transform = noise_transform(actor, every)
    if transform is None or NOISE_KEY in env.observation_spec.keys():
        return env
    if not isinstance(env, TransformedEnv):
        raise ValueError(f"the gSDE policy reads {NOISE_KEY!r}, which this {type(env).__name__} does not carry: wrap "
                         f"it as TransformedEnv(env) and append ppo_td.models.gsde.ExplorationNoise({transform.shape}, "
                         f"every={every})")
    env.append_transform(transform)
    return env
