"""GAE and the clipped PPO loss, with every coefficient explicit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from torch import nn
from torchrl.modules import IndependentNormal, MaskedCategorical, TanhNormal
from torchrl.modules.distributions.utils import sample_and_log_prob
from torchrl.objectives import ClipPPOLoss, LossModule
from torchrl.objectives.common import AUTO_LOSS_MASK_KEYS
from torchrl.objectives.utils import distance_loss
from torchrl.objectives.value import GAE, ValueEstimatorBase

from ppo_td import keys
from ppo_td.config import LossConfig
from ppo_td.envs import MASK_KEY
from ppo_td.models import ClosedForm, MaskedMultiCategorical, PolicyNet, ValueNet, policy_net, value_net
from ppo_td.models.multiagent import GroupPolicy, group_networks, team_members
from ppo_td.models.networks import SharedFeatures
from ppo_td.models.recurrent import IS_INIT, Recurrent, is_recurrent, pieces, recurrent_parts
from ppo_td.training.symmetry import Mirror, cat_halves, repeated

# CleanRL ppo.py: (adv - adv.mean()) / (adv.std() + 1e-8), std with Bessel's correction.
# TorchRL's own normalize_advantage uses the population std clamped at 1e-4.
ADVANTAGE_EPS = 1e-8

Across = Callable[[torch.Tensor], torch.Tensor]
"""Sums a tensor over the ranks of a run (:meth:`ppo_td.training.ranks.Ranks.sum`)."""


def make_advantage(critic: TensorDictModule, config: LossConfig, group: str | None = None) -> GAE:
    """TorchRL's GAE over ``[env, time]`` batches, with the values from :class:`OnePassGAE`.

    It cuts the bootstrap at ``("next", "terminated")`` and the lambda-trace at
    ``("next", "done")``, so a time-limit truncation bootstraps from V(final obs).
    Call it under ``torch.no_grad()`` on collector output before flattening.
    ``group`` (a multi-agent env's agent group): GAE per agent, on the group's entries (:class:`AgentGAE`).
    ``config.normalize_values``: the critic works in the units of a :class:`ValueNorm` the estimator keeps.
    """
    value_norm = ValueNorm() if config.normalize_values else None
    if group is not None:
        return AgentGAE(critic, gamma=config.gamma, lmbda=config.gae_lambda, group=group, value_norm=value_norm)
    return OnePassGAE(critic, gamma=config.gamma, lmbda=config.gae_lambda, value_norm=value_norm,
                      direct=config.fast_forward)


def make_team_advantage(critic: TensorDictModuleBase, config: LossConfig, groups: list[str]) -> TeamAdvantage:
    """GAE for each agent group of ``critic`` (a team critic, :func:`~ppo_td.models.multiagent.team_members`):
    each group's :class:`AgentGAE` on its own critic, rewards and flags."""
    critics = team_members(critic, groups, keys.STATE_VALUE)
    return TeamAdvantage({g: make_advantage(critics[g], config, g) for g in groups})


class TeamAdvantage(nn.Module):
    """The advantages of several agent groups: each group's estimator (:class:`AgentGAE`) in turn on the batch.
    Its ``value_norm``: the groups' value statistics (a ``ModuleDict``, what a checkpoint saves), or None."""

    def __init__(self, estimators: dict[str, ValueEstimatorBase]) -> None:
        super().__init__()
        self.estimators = nn.ModuleDict(estimators)
        norms = {g: e.value_norm for g, e in estimators.items() if getattr(e, "value_norm", None) is not None}
        self.value_norm = nn.ModuleDict(norms) if norms else None
        self.learning: tuple[str, ...] | None = None
        """The groups whose advantages are estimated (team self-play's learning group, as :attr:`TeamLoss.learning`:
        the others' steps came from past snapshots, and their value statistics are left as they are); None: every
        group."""

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for group, estimator in self.estimators.items():
            if self.learning is None or group in self.learning:
                estimator(tensordict)
        return tensordict


def group_keys(group: str) -> dict[str, tuple[str, str]]:
    """The value-estimator and loss keys of an agent group's entries (TorchRL's ``set_keys`` names)."""
    names = {"value": keys.STATE_VALUE, "reward": "reward", "done": "done", "terminated": "terminated",
             "advantage": keys.ADVANTAGE, "value_target": keys.VALUE_TARGET}
    return {name: (group, key) for name, key in names.items()}


class ValueNorm(nn.Module):
    """Running statistics of the value targets: MAPPO's value normalization (Yu et al. 2022, "The Surprising
    Effectiveness of PPO in Cooperative Multi-Agent Games", sec. 4.1 and appendix A).

    The critic's outputs are values in these units: :class:`OnePassGAE` maps them back (:meth:`denormalize`)
    before GAE, then updates the statistics with the batch's value targets (:meth:`update`) and hands the loss the
    targets standardized by them (:meth:`normalize`), and the rollout's values in the same units: value clipping
    and the explained variance compare like with like (the paper's code keeps the rollout's outputs in the units
    of the statistics before the update; at beta 0.99999 the two differ only in the first batches). The mean
    and mean square are exponential averages with weight ``beta`` per update, debiased as Adam's moments are; at
    the paper's beta 0.99999 they are, within 1e-5 per update, the plain average of every update so far, so the
    critic's units settle instead of following the latest batch. The variance is floored at ``min_var`` (the
    paper's code: 1e-2); before the first update the mean is 0 and the scale 0.1.

    One update per batch here (the paper's code updates once per minibatch, from the minibatch's targets).
    Kept in checkpoints, so a resumed critic keeps its units.
    """

    def __init__(self, beta: float = 0.99999, min_var: float = 1e-2, eps: float = 1e-5) -> None:
        super().__init__()
        if not 0.0 < beta < 1.0:
            raise ValueError(f"ValueNorm(beta={beta}): beta must be in (0, 1)")
        self.beta, self.min_var, self.eps = beta, min_var, eps
        self.register_buffer("mean_avg", torch.zeros(()))
        self.register_buffer("square_avg", torch.zeros(()))
        self.register_buffer("debias", torch.zeros(()))  # 1 - beta ** updates
        self.across: Across | None = None
        """A run over several ranks: sums a tensor over them, so each update folds in the whole batch's targets (the
        ranks' batches are of equal size); None: one process."""

    def _follow(self, x: torch.Tensor) -> None:
        if self.mean_avg.device != x.device:  # the statistics go where the values are computed
            self.to(x.device)

    @torch.no_grad()
    def update(self, targets: torch.Tensor) -> None:
        """Fold one batch of value targets (all entries) into the running statistics."""
        self._follow(targets)
        t = targets.detach().float()
        mean, square = t.mean(), t.square().mean()
        if self.across is not None:
            mean, square, ranks = self.across(torch.stack([mean, square, torch.ones_like(mean)]))
            mean, square = mean / ranks, square / ranks
        self.mean_avg.mul_(self.beta).add_(mean, alpha=1.0 - self.beta)
        self.square_avg.mul_(self.beta).add_(square, alpha=1.0 - self.beta)
        self.debias.mul_(self.beta).add_(1.0 - self.beta)

    def stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The debiased mean and standard deviation."""
        weight = self.debias.clamp(min=self.eps)
        mean = self.mean_avg / weight
        var = (self.square_avg / weight - mean.square()).clamp(min=self.min_var)
        return mean, var.sqrt()

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        """Values in the critic's units: (values - mean) / std."""
        self._follow(values)
        mean, std = self.stats()
        return ((values - mean) / std).to(values.dtype)

    def denormalize(self, values: torch.Tensor) -> torch.Tensor:
        """The critic's outputs as values: outputs * std + mean."""
        self._follow(values)
        mean, std = self.stats()
        return (values * std + mean).to(values.dtype)


class OnePassGAE(GAE):
    """TorchRL's ``GAE``, given V(s) and V(s') from one critic pass over the batch's observations.

    TorchRL's GAE with a value network runs it on every observation and every next observation. Within an
    env copy's row of an ``[env, time]`` batch, the next observation of step t is the observation of step
    t + 1, except where an episode ended (the final observation, which a truncation bootstraps from) and at
    the last step; so V(s') is V(s) shifted by one step, plus one critic call on those few next
    observations (checked: rows that are not consecutive get both passes in full). V(s) itself comes from
    the batch when ppo_td's fast collector recorded it (``("collector", "state_value")``, from a trunk the
    critic shares with the actor; used once, then dropped), else from one critic pass. The advantages are
    GAE's own (``tests/test_gae.py`` checks them against a reference loop and against
    ``GAE(value_network=critic)``); the cost is in ``docs/fast-paths.md``. ``direct`` (``loss.fast_forward``): ppo_td's
    own critic's network runs directly, not through TensorDictModule's forward, which passes each output through
    ``TensorDict.from_any`` (tensordict 0.14): its first call imports pandas where it is installed (0.2-0.33 s of a
    run's first iteration), and it looks for pandas on every call where it is not (about 80 us a call). The
    wrapper's own hooks then do not fire (the network's do); ``direct=False`` runs the wrapper.
    """

    def __init__(self, critic: TensorDictModule, gamma: float, lmbda: float,
                 value_norm: ValueNorm | None = None, direct: bool = True) -> None:
        # vectorized: TorchRL's closed-form recursion (vec_generalized_advantage_estimate), 6-30x faster than its
        # step-by-step loop, the default (16 ms vs 0.5 ms on a 2,048-step HalfCheetah batch); equal to the loop
        # within float32 rounding (tests/test_gae.py). It fails for gamma * lambda below about 1e-7 (its series
        # of powers is then empty), where the loop runs.
        super().__init__(gamma=gamma, lmbda=lmbda, value_network=None, average_gae=False,
                         vectorized=gamma * lmbda > 1e-6)
        self.critic = critic
        self.direct = direct
        self.value_norm = value_norm
        """Value normalization (``loss.normalize_values``): the critic's outputs are in its units; None: values."""

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        with torch.no_grad():
            self.fill_values(tensordict)
            if self.value_norm is not None:
                self._to_values(tensordict)
        if tensordict.device is None or tensordict.device.type != "cuda":
            out = super().forward(tensordict, *args, **kwargs)
        else:
            cudnn = torch.backends.cudnn  # the vectorized recursion is a convolution: in float32, not TF32 (1e-3)
            with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                             allow_tf32=False):
                out = super().forward(tensordict, *args, **kwargs)
        if self.value_norm is not None:
            with torch.no_grad():
                self._to_critic_units(out)
        return out

    def _to_values(self, batch: TensorDictBase) -> None:
        """Map the critic's outputs for V(s) and V(s') to values, for GAE."""
        key = self.tensor_keys.value
        batch.set(key, self.value_norm.denormalize(batch.get(key)))
        nxt = batch.get("next")
        nxt.set(key, self.value_norm.denormalize(nxt.get(key)))

    def _to_critic_units(self, batch: TensorDictBase) -> None:
        """After GAE: update the statistics with the value targets, then give the loss the targets and the
        rollout's V(s) in the updated statistics' units (the critic's outputs are compared with both)."""
        target_key, value_key = self.tensor_keys.value_target, self.tensor_keys.value
        targets = batch.get(target_key)
        self.value_norm.update(targets)
        batch.set(target_key, self.value_norm.normalize(targets))
        batch.set(value_key, self.value_norm.normalize(batch.get(value_key)))

    def fill_values(self, batch: TensorDictBase) -> None:
        """Write ``"state_value"`` and ``("next", "state_value")`` into ``batch`` (``[env, time]``)."""
        value_key = self.tensor_keys.value
        collected = batch.get(("collector", value_key), None)
        if collected is not None:  # V(s) the fast collector recorded with these weights: used once
            batch.set(value_key, collected)
            batch.del_(("collector", value_key))
        else:
            self._values(batch)
        value = batch.get(value_key)
        nxt = batch.get("next")
        if batch.batch_dims != 2 or batch.names[1] not in ("time", None) or value.shape[:2] != batch.batch_size:
            self._values(nxt)
            return
        need = nxt.get("done").reshape(batch.batch_size).clone()  # episode ends: their final observation
        need[:, -1] = True  # the batch's last step: its next observation is the next batch's first
        reads = [(key, batch.get(key, None), nxt.get(key, None)) for key in self.critic.in_keys]
        missing = [key for key, now, then in reads if now is not None and then is None]
        if missing:  # the critic would read something else there (a recurrent state filled with zeros)
            raise KeyError(f"the critic reads {missing} at each step but the batch's next steps lack them")
        if not self._consecutive(reads, ~need[:, :-1]):  # not a collector's rows: both passes in full
            self._values(nxt)
            return
        next_value = torch.empty_like(value)
        next_value[:, :-1] = value[:, 1:]
        # the critic's inputs at those steps only, entry by entry, and the comparison on tensors: selecting and
        # indexing whole TensorDicts was a quarter of a small batch's GAE (0.83 against 0.59 ms on
        # MountainCarContinuous's batches of 8 frames)
        ends = TensorDict(batch_size=[int(need.sum())], device=nxt.device)
        for key, _, then in reads:
            if then is not None:
                ends.set(key, then[need])
        self._values(ends)
        next_value[need] = ends.get(value_key)
        nxt.set(value_key, next_value)

    def _values(self, td: TensorDictBase) -> None:
        """The critic's values of ``td``'s rows into ``td``, as ``self.critic(td)`` writes them (ppo_td's own critic's
        network run directly, with ``direct``; the critic is looked up at each call, so a critic set later counts)."""
        net = value_net(self.critic) if self.direct else None
        if net is None:
            self.critic(td)
        else:
            td.set(keys.STATE_VALUE, net(td.get(keys.OBSERVATION)))

    @staticmethod
    def _consecutive(reads: list[tuple[Any, Any, Any]], goes_on: torch.Tensor) -> bool:
        """True when every next observation the critic reads equals the following step's, wherever the episode
        goes on (what collectors write; a comparison, far cheaper than the critic pass it saves). ``reads``: each
        critic input's key, its ``[env, time]`` entry and its next-step entry (None where a step lacks it: an entry
        only the next steps carry is not compared)."""
        for _, now, then in reads:
            if now is None:
                continue
            now, then = now[:, 1:][goes_on], then[:, :-1][goes_on]
            if isinstance(now, TensorDictBase):  # a Dict observation's entries
                if not all(torch.equal(now.get(k), then.get(k)) for k in now.keys(True, True)):
                    return False
            elif not torch.equal(now, then):
                return False
        return True


class AgentGAE(OnePassGAE):
    """:class:`OnePassGAE` per agent of a group: each agent's advantage from its own reward and value
    (``[env, time, agents, 1]``), bootstrapped unless that agent's own episode terminated.

    The lambda-trace of every agent is cut where the env's episode ends (the root ``("next", "done")``: the
    next step of the row is a new episode), and where the agent's own ``done`` says so. An env whose group has no
    ``done``/``terminated`` of its own (VMAS) ends every agent's episode with the env-wide flags: they are copied
    into the group first (``("next", "agents", "done")``, ...), as TorchRL's MAPPO tutorial does. A group with its
    own flags (PettingZoo) keeps its ``terminated``, and its ``done`` is widened by the env's: TorchRL resets a
    parallel env when any agent is done, so the others are cut there and bootstrapped from their final observation.
    """

    def __init__(self, critic: TensorDictModule, gamma: float, lmbda: float, group: str,
                 value_norm: ValueNorm | None = None) -> None:
        super().__init__(critic, gamma, lmbda, value_norm)
        self.group = group
        self.set_keys(**group_keys(group))

    def forward(self, tensordict: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        nxt = tensordict.get("next")
        shape = nxt.get((self.group, "reward")).shape
        present = nxt.keys(True)
        for flag in ("done", "terminated"):
            env_wide = nxt.get(flag).unsqueeze(-2).expand(shape)
            if (self.group, flag) not in present:
                nxt.set((self.group, flag), env_wide.clone())
            elif flag == "done":
                nxt.set((self.group, flag), nxt.get((self.group, flag)) | env_wide)
        return super().forward(tensordict, *args, **kwargs)


def normalized_advantage(advantage: torch.Tensor, across: Across | None = None) -> torch.Tensor:
    """CleanRL's per-minibatch advantage normalization: (A - mean) / (std + 1e-8). ``across`` (a run over several
    ranks, each holding a share of the minibatch): the mean and the (unbiased) standard deviation of the whole
    minibatch, from the count, sum and sum of squares summed over the ranks (in float64)."""
    if across is None:
        return (advantage - advantage.mean()) / (advantage.std() + ADVANTAGE_EPS)
    count, total, squares = across(advantage_sums(advantage))
    mean = total / count
    std = ((squares - count * mean.square()) / (count - 1)).clamp_min(0.0).sqrt()
    return (advantage - mean.to(advantage.dtype)) / (std.to(advantage.dtype) + ADVANTAGE_EPS)


def advantage_sums(advantage: torch.Tensor) -> torch.Tensor:
    """The count, sum and sum of squares of ``advantage`` (float64): what ranks add up to normalize a minibatch."""
    a = advantage.detach().double()
    return torch.stack([a.new_tensor(a.numel()), a.sum(), a.square().sum()])


def kl_k3(mean_ratio: torch.Tensor, kl_k1: torch.Tensor) -> torch.Tensor:
    """CleanRL's approx_kl, mean of (r - 1) - log r, from ClipPPOLoss's public outputs: since
    ``kl_approx`` (k1) is the mean of -log r, k3 = mean(r) - 1 + k1."""
    return (mean_ratio - 1 + kl_k1).detach()


# distributions whose entropy() is closed-form and finite wherever they are defined: ClipPPOLoss uses it as is
_ANALYTIC_ENTROPY = (torch.distributions.Categorical, MaskedCategorical, MaskedMultiCategorical, IndependentNormal)


class PPOObjective(ClipPPOLoss):
    """``ClipPPOLoss`` with CleanRL's advantage normalization and a k3 KL estimate.

    Outputs ``loss_objective``, ``loss_critic``, ``loss_entropy`` (already
    weighted; their sum is the loss to minimize) and the diagnostics
    ``kl_approx`` (k1: mean of log(pi_old/pi)), ``kl_approx_k3`` (mean of
    (r - 1) - log r, CleanRL's approx_kl, which equals ``mean_ratio - 1 + kl_approx``),
    ``clip_fraction``, ``entropy`` and ``explained_variance``. Modules run as plain
    ``nn.Module``\\ s (non-functional), so optimizer, actor and critic share the very same
    parameters.

    With ``config.fast_forward`` (default) and an actor and critic built by ppo_td's
    factories, the forward is :class:`FastLoss`: the same operations as
    ``ClipPPOLoss.forward`` in the same order, on plain tensors, so the outputs and
    gradients are identical (``tests/test_fast.py``). Otherwise ``ClipPPOLoss.forward`` runs.
    """

    def __init__(self, actor: TensorDictModule, critic: TensorDictModule, config: LossConfig) -> None:
        super().__init__(
            actor,
            critic,
            clip_epsilon=config.clip_epsilon,
            entropy_bonus=True,
            entropy_coeff=config.entropy_coeff,
            critic_coeff=config.critic_coeff,
            loss_critic_type=config.loss_critic_type,
            normalize_advantage=False,  # done below with CleanRL's formula
            clip_value=config.clip_value,
            separate_losses=False,
            functional=False,
        )
        self.normalize_advantage_per_minibatch = config.normalize_advantage
        self.across: Across | None = None
        """A run over several ranks: sums a tensor over them (:meth:`ppo_td.training.ranks.Ranks.sum`), so advantage
        normalization reads the whole minibatch; None: one process."""
        self.fast = FastLoss.plan(self) if config.fast_forward else None
        """The plain-tensor forward, or None where it does not apply (the TorchRL modules run)."""
        self.mirror: Mirror | None = None
        """The task's symmetry (``loss.mirror``: :mod:`ppo_td.training.symmetry`), set by the pipeline, which
        knows the env's normalizer; None: none."""

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        if self.fast is not None and self.fast.applies(tensordict):
            return self.fast(tensordict)
        if self.mirror is not None:
            raise ValueError("loss.mirror runs in ppo_td's own loss forward, which does not apply to this minibatch "
                             "(a loss mask, or settings ClipPPOLoss alone implements): train without loss.mirror")
        if self.normalize_advantage_per_minibatch:
            advantage = tensordict.get(self.tensor_keys.advantage, None)
            if advantage is not None:
                tensordict = tensordict.clone(False)
                tensordict.set(self.tensor_keys.advantage, normalized_advantage(advantage, self.across))
        out = super().forward(tensordict)
        out.set("kl_approx_k3", kl_k3(out.get("mean_ratio"), out.get("kl_approx")))
        return out


class FastLoss:
    """``PPOObjective.forward`` on plain tensors: ``ClipPPOLoss.forward``'s operations, in its order.

    Runs ppo_td's :class:`~ppo_td.models.PolicyNet` and :class:`~ppo_td.models.ValueNet` (or an agent group's
    networks, :func:`~ppo_td.models.multiagent.group_networks`) directly and computes every output
    ``ClipPPOLoss.forward`` writes (losses, clip fractions, KL estimates, entropy, ESS, ratio statistics) with
    the same tensor operations, so results and gradients are identical. It reads the loss's settings from
    its public attributes at every call (``clip_epsilon``, ``entropy_coeff``, ...), so a
    scheduled coefficient takes effect. :meth:`applies` sends a minibatch without an
    advantage, with a loss mask, or a loss whose settings this forward does not implement
    back to ``ClipPPOLoss``.
    """

    def __init__(self, loss: PPOObjective, actor: PolicyNet, critic: ValueNet,
                 cores: tuple[Recurrent, Recurrent | None] | None = None) -> None:
        self.loss, self.actor, self.critic = loss, actor, critic
        self.cores = cores
        self.compile_tried = False
        """Whether ``compile='auto'``'s first compiled minibatch was tried (:func:`ppo_td.training.loop.update`)."""
        self._compiled: Any = None
        """A recurrent actor's and critic's encoder and core: minibatches are ``[sequences, steps]``, replayed
        from each sequence's stored state (:meth:`~ppo_td.models.recurrent.Recurrent.sequence`), the heads run on
        the memory, and the rest on the flattened steps."""
        self.keys = loss.tensor_keys
        self.group = isinstance(actor, GroupPolicy)
        """An agent group's networks (:func:`~ppo_td.models.multiagent.group_networks`): the entries are the
        group's (``("agents", "observation")``, ...), each agent's ratio, advantage and value, averaged over agents
        and steps as ClipPPOLoss averages them."""
        self.observation_key = actor.observation_key if self.group else keys.OBSERVATION
        self.mask_key = (actor.mask_key or MASK_KEY) if self.group else MASK_KEY
        self.closed_form = ClosedForm.of(actor.distribution_class, actor.distribution_kwargs, actor.masked)
        """A Gaussian, (masked) categorical or unit-bounded tanh-normal policy (one agent's or a group's) is scored
        in closed form (torch's and TorchRL's operations in their order, no distribution object: 11.5-11.7 to
        11.0-11.4 ms a vmas-navigation minibatch with its backward); any other through its distribution."""
        self.analytic_entropy = issubclass(actor.distribution_class, _ANALYTIC_ENTROPY)
        """False for a tanh-squashed Gaussian (one agent's or a group's): its entropy is estimated by sampling, as
        ClipPPOLoss estimates it (``sample_and_log_prob`` with ``samples_mc_entropy`` draws, at the same point of
        the forward, so the random stream stays the same)."""
        self.shared = actor.trunk is not None and actor.trunk is critic.trunk
        """Actor and critic share their trunk (encoder and hidden layers): it runs once per minibatch and both
        heads read its features (:class:`~ppo_td.models.networks.SharedFeatures`); ClipPPOLoss runs it once per
        network. The same values, and the same gradients up to the order of one sum."""

    @classmethod
    def plan(cls, loss: PPOObjective) -> FastLoss | None:
        """The fast forward of ``loss``, or None when its actor or critic is not ppo_td's own (or a recurrent
        policy's distribution has no closed-form entropy). A tanh-squashed Gaussian's entropy is sampled as
        ClipPPOLoss samples it."""
        cores = recurrent_parts(loss.actor_network), recurrent_parts(loss.critic_network)
        if cores[0] is not None and (cores[1] is not None or not is_recurrent(loss.critic_network)):
            actor = cores[0].head
            critic = cores[1].head if cores[1] is not None else value_net(loss.critic_network)
        else:
            actor, critic, cores = policy_net(loss.actor_network, acting=True), value_net(loss.critic_network), None
        if isinstance(actor, PolicyNet) and isinstance(critic, ValueNet) and (
                issubclass(actor.distribution_class, _ANALYTIC_ENTROPY)
                or (cores is None and actor.distribution_class is TanhNormal)):
            return cls(loss, actor, critic, cores)
        group = group_networks(loss.actor_network, loss.critic_network) if cores is None else None
        return cls(loss, *group) if group is not None else None

    def applies(self, td: TensorDictBase) -> bool:
        """True when this forward computes what ``ClipPPOLoss.forward`` would for ``td``."""
        mask = self.loss.loss_mask_key
        mask_keys = AUTO_LOSS_MASK_KEYS if mask == "auto" else () if mask is None else (mask,)
        return (self.settings_apply() and td.get(self.keys.advantage, None) is not None
                and all(td.get(key, None) is None for key in mask_keys))

    def settings_apply(self) -> bool:
        """True when the loss's settings are ones this forward implements (what :meth:`applies` asks of the loss, not
        of a minibatch)."""
        loss = self.loss
        return (not loss.functional and not loss.normalize_advantage and not loss.separate_losses
                and loss.reduction == "mean" and loss.critic_coeff is not None and loss.critic_coeff > 0
                and getattr(loss, "advantage_norm", None) is None and not getattr(loss, "delay_actor", False)
                and getattr(loss, "max_importance_ratio", None) is None
                and getattr(loss, "clip_epsilon", None) is not None)

    def __call__(self, td: TensorDictBase) -> TensorDict:
        """Every output ``ClipPPOLoss.forward`` writes for ``td``."""
        return self._run(td, self._forward)

    def compiled_terms(self, device: torch.device, fullgraph: bool = False, cudagraphs: bool = False) -> Any:
        """:meth:`terms` through ``torch.compile``, compiled on first use and kept: the same operations, fused;
        results within float rounding of :meth:`terms`. ``fullgraph``: refuse a graph break (torch.compile's own
        error) instead of compiling the pieces apart (tests hold ppo_td's loss to one graph). ``cudagraphs``: replayed
        as CUDA graphs (the options of ``mode='reduce-overhead'``, and ``triton.cudagraph_or_error``: a piece torch
        cannot graph on CUDA is torch's error naming it, not a silent fallback; on a CPU torch.compile runs it without
        graphs): each call marks a new step (``torch.compiler.cudagraph_mark_step_begin``) and returns its terms
        copied out of the graphs' memory, since the update keeps them until the epoch's end and the next replay
        overwrites that memory; the loss itself is read (``item``, ``backward``) before the next call, and the
        gradients the backward leaves in ``.grad`` are graph memory too (:func:`~ppo_td.training.loop.update` sets
        them to None before each backward and after the update)."""
        # read here: a float() or an `if` of a tensor (the loss keeps clip_value as one) inside the compiled function
        # would break its graph in two, and cost most of the gain (a CartPole minibatch 1.60 against 1.14 ms)
        zero_entropy = bool(self.loss.entropy_bonus) and not float(self.loss.entropy_coeff)
        settings = (zero_entropy, bool(self.loss.clip_value), fullgraph, cudagraphs)
        if self._compiled is None or self._compiled[0] != settings:
            compute = functools.partial(self._terms, zero_entropy=zero_entropy, clip_value=settings[1])
            compiled = torch.compile(functools.partial(self._run, compute=compute), dynamic=False,
                                     fullgraph=fullgraph, options=_CUDA_GRAPHS if cudagraphs else None)
            self._compiled = (settings, functools.partial(_replayed, compiled) if cudagraphs else compiled)
        return self._compiled[1]

    def terms(self, td: TensorDictBase) -> tuple[torch.Tensor, LeanTerms]:
        """The loss to minimize for ``td`` (the sum :func:`total_loss` takes of :meth:`__call__`'s outputs, with
        the same gradients) and what the update's metrics need, detached, without computing those metrics: the
        update computes them for many minibatches at once (:func:`epoch_metrics`). About 0.3 ms less per minibatch on
        HalfCheetah's networks than the full outputs (a dozen diagnostics and a TensorDict of 14 entries)."""
        return self._run(td, self._terms)

    def _run(self, td: TensorDictBase, compute: Any) -> Any:
        if not self.shared:
            return self._inputs(td, compute)
        self.actor.shared_features = self.critic.shared_features = SharedFeatures()
        try:
            return self._inputs(td, compute)
        finally:
            self.actor.shared_features = self.critic.shared_features = None

    def _inputs(self, td: TensorDictBase, compute: Any) -> Any:
        """The heads' inputs: the observations, or each network's memory over a recurrent minibatch's sequences
        (computed once where the two share their core), with the minibatch's steps flattened."""
        if self.cores is None:
            obs = td.get(self.observation_key)
            return compute(td, obs, obs)
        if td.batch_dims != 2:
            raise ValueError(f"a recurrent loss reads [sequences, steps] minibatches, got batch size {td.batch_size}")
        obs, is_init = td.get(keys.OBSERVATION), td.get(IS_INIT).squeeze(-1)
        cut = pieces(is_init)  # once for both networks: they replay the same sequences
        memories = []
        for core in self.cores:
            if core is None:  # a feed-forward critic beside the recurrent actor
                memories.append(obs.flatten(0, 1))
            elif memories and core.core is self.cores[0].core and core.encoder is self.cores[0].encoder:
                memories.append(memories[0])
            else:
                memories.append(core.sequence(obs, [td.get(key) for key in core.state], is_init, cut).flatten(0, 1))
        return compute(_Steps(td), *memories)

    def _core(self, td: TensorDictBase, actor_in: torch.Tensor, critic_in: torch.Tensor,
              clip_value: bool | None = None) -> dict[str, Any]:
        """The loss terms, unreduced, and the intermediates the diagnostics read: ClipPPOLoss's operations. With
        the loss's mirror (augmenting), over the minibatch and its mirror images (:mod:`ppo_td.training.symmetry`).
        ``clip_value``: whether the value loss is clipped (None: read from the loss)."""
        loss, k = self.loss, self.keys
        advantage = td.get(k.advantage)
        if loss.normalize_advantage_per_minibatch:
            advantage = normalized_advantage(advantage, loss.across)
        action, prev_log_prob = td.get(k.action), td.get(k.sample_log_prob)
        mirror, rows = loss.mirror, prev_log_prob.shape[0]
        mask = td.get(self.mask_key, None)
        copies = 1  # the originals, and with the mirror augmenting their k images
        if mirror is not None and mirror.augment:  # the images take the originals' log-probabilities, advantages,
            same = critic_in is actor_in  # values and targets
            images, moves = mirror.observation(actor_in), mirror.action(action)
            copies = 1 + mirror.images_of(images, moves, rows)
            actor_in, action = cat_halves(actor_in, images), cat_halves(action, moves)
            if not same:
                seen = mirror.observation(critic_in)
                mirror.images_of(seen, moves, rows)
                critic_in = cat_halves(critic_in, seen)
            else:
                critic_in = actor_in
            prev_log_prob, advantage = repeated(prev_log_prob, copies), repeated(advantage, copies)
            if mask is not None:  # the images' legal actions, permuted as their actions are (an unmasked actor,
                mask = cat_halves(mask, mirror.action_mask(mask)) if self.actor.masked else None  # none to read)
        doubled = copies > 1
        # _log_weight: the actor's distribution at the stored observations, scoring the stored actions
        params = self.actor(actor_in)
        if prev_log_prob.requires_grad:
            raise RuntimeError(f"tensordict stored {k.sample_log_prob} requires grad.")  # as ClipPPOLoss
        dist = None
        if self.closed_form is not None:
            log_prob, entropy = self.closed_form.log_prob_entropy(
                params if isinstance(params, tuple) else (params,), action, mask)
        else:
            dist = self.actor.distribution(params, mask)
            log_prob, entropy = dist.log_prob(action), None
        log_weight = (log_prob - prev_log_prob).unsqueeze(-1)
        # the clipped surrogate
        gain1 = log_weight.exp() * advantage
        eps = loss.clip_epsilon
        log_weight_clip = log_weight.clamp((-eps).log1p(), eps.log1p())
        gain2 = log_weight_clip.exp() * advantage
        gain = torch.stack([gain1, gain2], -1).min(dim=-1).values
        core: dict[str, Any] = {"prev_log_prob": prev_log_prob, "log_prob": log_prob, "log_weight": log_weight,
                                "log_weight_clip": log_weight_clip, "loss_objective": -gain}
        if doubled:  # the diagnostics (KL, clip fraction, ratios) of the original half, as rsl_rl's KL
            for key in ("prev_log_prob", "log_prob", "log_weight", "log_weight_clip"):
                core[key] = core[key][:rows]
        if loss.entropy_bonus:
            # ClipPPOLoss samples the entropy when the closed form is not finite; for the distributions planned
            # here that happens only with non-finite parameters, whose losses the update reports as non-finite
            if entropy is None and self.analytic_entropy:
                entropy = dist.entropy()
            elif entropy is None:  # ClipPPOLoss._get_entropy's estimate, and its shape
                if dist is None:  # the tanh-normal's closed form
                    log_prob_mc = self.closed_form.sample_log_prob(
                        params if isinstance(params, tuple) else (params,), (loss.samples_mc_entropy,))
                else:
                    _, log_prob_mc = sample_and_log_prob(dist, (loss.samples_mc_entropy,),
                                                         reparameterize=dist.has_rsample)
                entropy = -log_prob_mc.mean(0).unsqueeze(-1)
            if doubled:  # the entropy bonus of the original half (rsl_rl's)
                entropy = entropy[:rows]
            core["entropy"] = entropy
            core["loss_entropy"] = -loss.entropy_coeff * entropy
        core.update(self._critic_core(td, critic_in, copies, clip_value))
        if mirror is not None and mirror.loss_coeff > 0:
            core["loss_mirror"] = mirror.loss_coeff * self._mirror_error(params, actor_in, rows, doubled)
        if doubled:
            for key in ("target_return", "state_value", "pre_clipped", "clipped"):  # explained variance, clips
                if key in core:
                    core[key] = core[key][:rows]
        return core

    def _mirror_error(self, params: Any, actor_in: Any, rows: int, doubled: bool) -> torch.Tensor:
        """Per sample, the mean squared difference between the policy's mean action on the mirrored observation
        and the mirror of its mean action on the original (detached): rsl_rl's mirror loss, unreduced."""
        mean = params[0] if isinstance(params, tuple) else params
        if doubled:
            original, mirrored = mean[:rows], mean[rows:]
        else:
            mirrored_params = self.actor(self.loss.mirror.observation(actor_in))
            original = mean
            mirrored = mirrored_params[0] if isinstance(mirrored_params, tuple) else mirrored_params
        target = self.loss.mirror.action(original.detach())
        self.loss.mirror.images_of(mirrored, target, rows)
        return (mirrored - target).pow(2).mean(-1, keepdim=True)

    def _critic_core(self, td: TensorDictBase, obs: Any, copies: int = 1,
                     clip_value: bool | None = None) -> dict[str, Any]:
        """ClipPPOLoss's ``loss_critic`` unreduced: the (clipped) value loss, and what its diagnostics read
        (``copies`` > 1: ``obs`` holds the minibatch and its mirror images; the targets and values are repeated)."""
        loss, k = self.loss, self.keys
        target_return = repeated(td.get(k.value_target), copies)
        state_value = self.critic(obs)  # the actor's input object: a shared trunk's features are reused
        loss_value = distance_loss(target_return, state_value, loss_function=loss.loss_critic_type)
        core: dict[str, Any] = {"target_return": target_return, "state_value": state_value}
        if bool(loss.clip_value) if clip_value is None else clip_value:
            old_state_value = repeated(td.get(k.value), copies)
            pre_clipped = state_value - old_state_value  # the most pessimistic of clipped and unclipped
            clipped = pre_clipped.clamp(-loss.clip_value, loss.clip_value)
            core["pre_clipped"], core["clipped"] = pre_clipped, clipped
            loss_clipped = distance_loss(target_return, old_state_value + clipped,
                                         loss_function=loss.loss_critic_type)
            loss_value = torch.maximum(loss_value, loss_clipped)
        core["loss_critic"] = loss.critic_coeff * loss_value
        return core

    def _terms(self, td: TensorDictBase, actor_in: torch.Tensor, critic_in: torch.Tensor,
               zero_entropy: bool | None = None, clip_value: bool | None = None) -> tuple[torch.Tensor, LeanTerms]:
        core = self._core(td, actor_in, critic_in, clip_value)
        losses = {key: core[key].mean().squeeze(-1) for key in _LOSS_ORDER if key in core}
        # in __call__'s key order, as total_loss sums them; an entropy term with coefficient 0 adds exactly 0 to the
        # loss and its gradients, so backward skips it (the MuJoCo settings: a tenth of the graph)
        if zero_entropy is None:
            zero_entropy = "loss_entropy" in losses and not float(self.loss.entropy_coeff)
        total = sum(value for key, value in losses.items() if not (zero_entropy and key == "loss_entropy"))
        with torch.no_grad():
            lean = LeanTerms(
                losses={key: value.detach() for key, value in losses.items()},
                log_weight=core["log_weight"].detach(),
                entropy=core["entropy"].detach() if "entropy" in core else None,
                pre_clipped=core["pre_clipped"].detach() if "pre_clipped" in core else None)
        return total, lean

    def _forward(self, td: TensorDictBase, actor_in: torch.Tensor, critic_in: torch.Tensor) -> TensorDict:
        loss = self.loss
        core = self._core(td, actor_in, critic_in)
        log_weight, log_weight_clip = core["log_weight"], core["log_weight_clip"]
        kl_approx = (core["prev_log_prob"] - core["log_prob"]).unsqueeze(-1)
        with torch.no_grad():
            lw = log_weight.squeeze(-1)
            ess = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp()
            batch = log_weight.shape[0]
        clip_fraction = (log_weight_clip != log_weight).to(log_weight.dtype).mean()
        out: dict[str, torch.Tensor] = {"loss_objective": core["loss_objective"], "clip_fraction": clip_fraction,
                                        "kl_approx": kl_approx.detach().mean()}
        if "entropy" in core:
            out["entropy"] = core["entropy"].detach().mean()
            out["loss_entropy"] = core["loss_entropy"]
        out["loss_critic"] = core["loss_critic"]
        if "loss_mirror" in core:
            out["loss_mirror"] = core["loss_mirror"]
        if loss.clip_value:
            with torch.no_grad():
                out["value_clip_fraction"] = (core["pre_clipped"] != core["clipped"]).to(
                    core["state_value"].dtype).mean()
        if loss.log_explained_variance:
            with torch.no_grad():
                tgt, pred = core["target_return"].detach(), core["state_value"].detach()
                resid = torch.var(tgt - pred, correction=0, dim=0)
                out["explained_variance"] = 1.0 - resid / (torch.var(tgt, correction=0, dim=0)
                                                           + torch.finfo(tgt.dtype).eps)
        out["ESS"] = ess / batch
        with torch.no_grad():
            ratio = log_weight.exp()
            out["max_ratio"], out["mean_ratio"] = ratio.max(), ratio.mean()
        for key in _LOSS_ORDER:
            if key in out:
                out[key] = out[key].mean().squeeze(-1)
        out["kl_approx_k3"] = kl_k3(out["mean_ratio"], out["kl_approx"])
        return TensorDict(out, batch_size=[])


_LOSS_ORDER = ("loss_objective", "loss_entropy", "loss_critic", "loss_mirror")
"""The loss terms in the order ClipPPOLoss writes them (and :func:`total_loss` sums them)."""


@dataclass
class LeanTerms:
    """One minibatch's loss terms (detached means) and the per-sample tensors its diagnostics read."""

    losses: dict[str, torch.Tensor]
    log_weight: torch.Tensor
    entropy: torch.Tensor | None
    pre_clipped: torch.Tensor | None


_CUDA_GRAPHS = {"triton.cudagraphs": True, "triton.cudagraph_or_error": True}
"""torch.compile's options for ``cudagraphs=True``: what ``mode='reduce-overhead'`` sets (CUDA graphs; torch.compile
takes a mode or options, not both), and an error where a piece cannot be graphed (torch only logs a warning by
default and runs that piece eager)."""


def _replayed(compiled: Any, td: TensorDictBase) -> tuple[torch.Tensor, LeanTerms]:
    """One call of a loss compiled with CUDA graphs (:meth:`FastLoss.compiled_terms`): a new step marked, the kept
    terms copied (detached) out of the memory the next replay writes. torch's step counter is the process's: once a
    step is marked, every function compiled with CUDA graphs in the process starts a new generation only at a mark
    (a backward still pending then reads overwritten memory)."""
    torch.compiler.cudagraph_mark_step_begin()
    loss, terms = compiled(td)
    return loss, copied(terms)


def copied(terms: LeanTerms) -> LeanTerms:
    """``terms`` detached and copied: what stays valid after the CUDA graph that computed them is replayed."""
    def copy(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.detach().clone()

    return LeanTerms(losses={k: copy(v) for k, v in terms.losses.items()}, log_weight=copy(terms.log_weight),
                     entropy=copy(terms.entropy), pre_clipped=copy(terms.pre_clipped))


def epoch_metrics(terms: list[LeanTerms], clip_epsilon: torch.Tensor, clip_value: float | None
                  ) -> list[dict[str, torch.Tensor]]:
    """Each minibatch's diagnostics as :class:`FastLoss`'s full outputs define them (``kl_approx``,
    ``kl_approx_k3``, ``clip_fraction``, ``entropy``, ``value_clip_fraction``), for many minibatches (an update's, or
    an epoch's) in one set of
    operations: per-minibatch means of the concatenated samples (equal to the full outputs within float
    rounding, ``tests/test_fast.py``)."""
    device = terms[0].log_weight.device
    sizes = torch.tensor([t.log_weight.shape[0] for t in terms], device=device)
    ids = torch.repeat_interleave(torch.arange(len(terms), device=device), sizes)

    def means(samples: torch.Tensor) -> torch.Tensor:  # each sample's mean (over agents), then each minibatch's
        flat = samples.mean(1)
        return torch.zeros(len(terms), dtype=flat.dtype, device=device).index_add_(0, ids, flat) / sizes

    def rows(values: list[torch.Tensor]) -> torch.Tensor:  # every minibatch's samples, one row each
        return torch.cat([v.reshape(v.shape[0], -1) for v in values])

    # per sample: [rows, 1], or [rows, agents, 1] for a group; each operation once over the samples of every
    # minibatch, not once a minibatch (the same values: each is per sample)
    log_weight = rows([t.log_weight for t in terms])
    kl = means(-log_weight)
    mean_ratio = means(log_weight.exp())
    low, high = (-clip_epsilon).log1p(), clip_epsilon.log1p()
    metrics = {"kl_approx": kl, "kl_approx_k3": kl_k3(mean_ratio, kl),
               "clip_fraction": means(((log_weight < low) | (log_weight > high)).to(log_weight.dtype))}
    if terms[0].entropy is not None:
        metrics["entropy"] = means(rows([t.entropy for t in terms]))
    if clip_value and terms[0].pre_clipped is not None:
        pre_clipped = rows([t.pre_clipped for t in terms])
        metrics["value_clip_fraction"] = means((pre_clipped.abs() > clip_value).to(pre_clipped.dtype))
    columns = {key: value.unbind(0) for key, value in metrics.items()}  # one call a metric, not one a minibatch
    return [{**t.losses, **{key: column[i] for key, column in columns.items()}} for i, t in enumerate(terms)]


class _Steps:
    """A ``[sequences, steps]`` minibatch read as its flattened steps, entry by entry: the loss reads six of its
    entries, and reshaping the whole TensorDict (the stored states among them) cost a tenth of the forward."""

    def __init__(self, td: TensorDictBase) -> None:
        self.td = td

    def get(self, key: Any, *default: Any) -> Any:
        value = self.td.get(key, *default)
        return value.flatten(0, 1) if isinstance(value, torch.Tensor) else value


def lean_of(loss: LossModule) -> FastLoss | None:
    """The lean forward an update takes its loss terms from: ppo_td's own loss's (:class:`PPOObjective`, its forward
    not replaced: a replacement runs instead), else None."""
    return loss.fast if type(loss) is PPOObjective and "forward" not in vars(loss) else None


def make_loss(actor: TensorDictModule, critic: TensorDictModule, config: LossConfig,
              group: str | None = None) -> PPOObjective:
    """The clipped PPO loss for ``actor`` and ``critic`` with ``config``'s coefficients; ``group``: on a
    multi-agent group's entries (each agent's ratio, advantage and value, averaged over agents and steps)."""
    loss = PPOObjective(actor, critic, config)
    if group is not None:  # the action and log-prob keys ClipPPOLoss reads off the actor itself
        loss.set_keys(**group_keys(group))
    return loss


def make_team_loss(actor: TensorDictModuleBase, critic: TensorDictModuleBase, config: LossConfig,
                   groups: list[str]) -> TeamLoss:
    """Each agent group's clipped PPO loss (:func:`make_loss` on the group's actor and critic, found by
    :func:`~ppo_td.models.multiagent.team_members`), summed in :class:`TeamLoss`."""
    actors = team_members(actor, groups, keys.ACTION)
    critics = team_members(critic, groups, keys.STATE_VALUE)
    return TeamLoss({g: make_loss(actors[g], critics[g], config, g) for g in groups})


TEAM_DIAGNOSTICS = ("entropy", "kl_approx", "kl_approx_k3", "clip_fraction", "value_clip_fraction",
                    "explained_variance")


class TeamLoss(LossModule):
    """The PPO losses of several agent groups, each on its own group's entries and networks (BenchMARL's
    ``group_map`` training: a group is trained on its own agents' rewards, cooperative or competing).

    Outputs each weighted term summed over the groups (``loss_objective``, ``loss_critic``, ``loss_entropy``: the
    groups' parameters are disjoint, so the sum's gradient is each group's own), the diagnostics averaged over the
    groups, and every group's own outputs under ``("groups", group)``. The update clips each group's gradient norm
    on its own (:meth:`parameter_sets`), as separate optimizers would.
    """

    def __init__(self, losses: dict[str, LossModule]) -> None:
        super().__init__()
        self.losses = nn.ModuleDict(losses)
        self._sets: list[list[nn.Parameter]] | None = None
        self.learning: tuple[str, ...] | None = None
        """The groups whose losses are computed and whose gradients are clipped (team self-play's learning group,
        set by :class:`~ppo_td.training.selfplay.TeamSelfPlay` before each batch: the others' steps were played by
        past snapshots, so their parameters get no gradient and no optimizer step); None: every group."""

    def parameter_sets(self) -> list[list[nn.Parameter]]:
        """Each learning group's trained parameters (its gradient norm is clipped on its own); found once."""
        if self._sets is None:
            self._sets = [list({id(q): q for q in loss.parameters() if q.requires_grad}.values())
                          for loss in self.losses.values()]
        return [s for g, s in zip(self.losses, self._sets, strict=True) if self.learning is None or g in self.learning]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        names = list(self.losses) if self.learning is None else self.learning
        outs = {g: self.losses[g](tensordict) for g in names}
        first = next(iter(outs.values()))
        total: dict[str, Any] = {k: sum(out.get(k) for out in outs.values())
                                 for k in first.keys() if isinstance(k, str) and k.startswith("loss_")}
        for name in TEAM_DIAGNOSTICS:
            if all(name in out.keys() for out in outs.values()):
                total[name] = torch.stack([out.get(name).detach().float().mean() for out in outs.values()]).mean()
        total["groups"] = TensorDict({g: out.detach() for g, out in outs.items()}, batch_size=[])
        return TensorDict(total, batch_size=[])


def total_loss(losses: TensorDictBase) -> torch.Tensor:
    """Sum of the weighted loss terms (every key starting with ``loss_``)."""
    return sum(value for key, value in losses.items() if key.startswith("loss_"))


def explained_variance(batch: TensorDictBase, group: str | None = None) -> float:
    """1 - Var(returns - values) / Var(returns) of a batch after GAE (CleanRL's definition); ``group``: over all
    agents' values of a multi-agent group."""
    target = batch.get(keys.VALUE_TARGET if group is None else (group, keys.VALUE_TARGET)).flatten()
    value = batch.get(keys.STATE_VALUE if group is None else (group, keys.STATE_VALUE)).flatten()
    var_target = target.var()
    if var_target == 0:
        return float("nan")
    return float(1 - (target - value).var() / var_target)
