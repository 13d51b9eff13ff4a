"""GAE and the clipped PPO loss, with every coefficient explicit."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.modules.distributions.utils import has_analytic_entropy
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.ppo import PPOLoss
from torchrl.objectives.utils import _clip_value_loss, distance_loss
from torchrl.objectives.value import GAE

from ppo_td import keys
from ppo_td.config import LossConfig
from ppo_td.lean import LeanModule, LeanUnsupported

# CleanRL ppo.py: (adv - adv.mean()) / (adv.std() + 1e-8), std with Bessel's correction.
# TorchRL's own normalize_advantage uses the population std clamped at 1e-4.
ADVANTAGE_EPS = 1e-8


def make_advantage(critic: TensorDictModule, config: LossConfig) -> GAE:
    """TorchRL's GAE over ``[env, time]`` batches.

    It cuts the bootstrap at ``("next", "terminated")`` and the lambda-trace at
    ``("next", "done")``, so a time-limit truncation bootstraps from V(final obs).
    Call it under ``torch.no_grad()`` on collector output before flattening.
    """
    return GAE(gamma=config.gamma, lmbda=config.gae_lambda, value_network=critic, average_gae=False)


def normalized_advantage(advantage: torch.Tensor) -> torch.Tensor:
    """CleanRL's per-minibatch advantage normalization: (A - mean) / (std + 1e-8)."""
    return (advantage - advantage.mean()) / (advantage.std() + ADVANTAGE_EPS)


def kl_k3(log_weight: torch.Tensor) -> torch.Tensor:
    """CleanRL's approx_kl, mean of (r - 1) - log r with r = exp(log_weight), without gradient."""
    with torch.no_grad():
        return (log_weight.exp() - 1 - log_weight).mean()


class PPOObjective(ClipPPOLoss):
    """``ClipPPOLoss`` with CleanRL's advantage normalization and a k3 KL estimate.

    Outputs ``loss_objective``, ``loss_critic``, ``loss_entropy`` (already
    weighted; their sum is the loss to minimize) and the diagnostics
    ``kl_approx`` (k1: mean of log(pi_old/pi)), ``kl_approx_k3`` (mean of
    (r - 1) - log r, CleanRL's approx_kl), ``clip_fraction``, ``entropy`` and
    ``explained_variance``. Modules run as plain ``nn.Module``s (non-functional),
    so optimizer, actor and critic share the very same parameters.

    With ``config.lean_forward`` (default) the forward runs on plain tensors where
    :class:`LeanForward` can run the actor and critic (ppo_td's own modules): the same
    operations as ``ClipPPOLoss.forward`` in the same order, without its TensorDict
    bookkeeping, so the outputs and gradients are identical (``tests/test_lean.py``).
    Otherwise, and for any minibatch it hands back, ``ClipPPOLoss.forward`` runs.
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
        self._kl_k3: torch.Tensor | None = None
        self.lean_forward = config.lean_forward
        self._lean: LeanForward | None | bool = None  # planned at the first forward; False: cannot

    def _log_weight(self, tensordict: TensorDictBase, adv_shape: torch.Size):
        log_weight, dist, kl_approx, log_is_weight = super()._log_weight(tensordict, adv_shape)
        self._kl_k3 = kl_k3(log_weight)
        return log_weight, dist, kl_approx, log_is_weight

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        if self.lean_forward:
            if self._lean is None:
                try:
                    self._lean = LeanForward(self)
                except LeanUnsupported:
                    self._lean = False
            out = self._lean(tensordict) if self._lean else None
            if out is not None:
                return out
        if self.normalize_advantage_per_minibatch:
            advantage = tensordict.get(self.tensor_keys.advantage)
            tensordict = tensordict.clone(False)
            tensordict.set(self.tensor_keys.advantage, normalized_advantage(advantage))
        out = super().forward(tensordict)
        out.set("kl_approx_k3", self._kl_k3)
        return out


class LeanForward:
    """``PPOObjective.forward`` on plain tensors: ``ClipPPOLoss.forward``'s operations, in its order.

    Runs the actor's networks and distribution and the critic's networks through
    :class:`~ppo_td.lean.LeanModule` and computes every output ``ClipPPOLoss.forward``
    writes (losses, clip fractions, KL estimates, entropy, ESS, ratio statistics) with the
    same tensor operations, so results and gradients are identical. Refuses
    (:class:`~ppo_td.lean.LeanUnsupported`) settings it does not implement: functional or
    delayed networks, importance-ratio caps, per-head entropy coefficients, asymmetric
    clipping, TorchRL's own advantage normalization or ``advantage_norm``, separate losses, a
    reduction other than the mean (checked again at every call). Returns None, and the
    caller runs ``ClipPPOLoss``, for a minibatch without an advantage or with a loss mask,
    while a forward hook sits on the actor or critic (the doctor's audit), and once a
    distribution without a closed-form entropy (or a non-finite one) was seen: those need
    ClipPPOLoss's Monte-Carlo estimate.
    """

    def __init__(self, loss: PPOObjective) -> None:
        found = self.refusals(loss)
        if found:
            raise LeanUnsupported(f"the loss uses {', '.join(found)}")
        self.loss = loss
        self._analytic_entropy: bool | None = None  # learned from the first distribution (a class property)
        self.actor = LeanModule(loss.actor_network)
        self.critic = LeanModule(loss.critic_network, distribution=False)
        k = loss.tensor_keys
        self.keys = k
        self.mask_keys = loss._loss_mask_keys()
        if k.value not in self.critic.out_keys:
            raise LeanUnsupported(f"the critic does not write {k.value!r}")

    @staticmethod
    def refusals(loss: PPOObjective) -> list[str]:
        """The settings of ``loss`` this forward does not implement (checked at every call: they can change)."""
        refusals = {
            "functional parameters": loss.functional,
            "a delayed actor": loss.delay_actor,
            "an importance-ratio cap": getattr(loss, "max_importance_ratio", None) is not None,
            "per-head entropy coefficients": loss._entropy_coeff_map is not None,
            "asymmetric clipping": loss._asymmetric_clip,
            "TorchRL's advantage normalization": loss.normalize_advantage,
            "an advantage_norm": getattr(loss, "advantage_norm", None) is not None,
            "separate losses": loss.separate_losses,
            f"reduction={loss.reduction!r}": loss.reduction != "mean",
            "no critic": not loss._has_critic,
            "a critic-input hook": type(loss)._critic_loss_inputs is not PPOLoss._critic_loss_inputs,
        }
        return [name for name, present in refusals.items() if present]

    def __call__(self, td: TensorDictBase) -> TensorDict | None:
        loss, k = self.loss, self.keys
        if self._analytic_entropy is False and loss.entropy_bonus:
            return None  # a Monte-Carlo entropy: ClipPPOLoss's sampling
        if any(td.get(key, None) is not None for key in self.mask_keys):
            return None  # a loss mask (e.g. ("collector", "mask")): ClipPPOLoss's masked reduction
        if self.actor.hooked() or self.critic.hooked() or self.refusals(loss):
            return None  # a forward hook (the doctor's audit adds some) must see the modules' own calls; or a
            # setting this forward does not implement was set after planning
        advantage = td.get(k.advantage, None)
        if advantage is None:
            return None  # ClipPPOLoss computes it with its value estimator
        if loss.normalize_advantage_per_minibatch:
            advantage = normalized_advantage(advantage)
        # _log_weight. The actor writes its networks' outputs into `values`; the critic reads from them
        # first, as ClipPPOLoss's critic reads the tensordict the actor wrote into.
        prev_log_prob = td.get(k.sample_log_prob)
        values = {key: td.get(key) for key in self.actor.in_keys}
        dist = self.actor.distribution(values)
        log_prob = dist.log_prob(td.get(k.action))
        log_weight = (log_prob - prev_log_prob).unsqueeze(-1)
        kl_approx = (prev_log_prob - log_prob).unsqueeze(-1)
        k3 = kl_k3(log_weight)
        with torch.no_grad():
            lw = log_weight.squeeze(-1)
            ess = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp()
            batch = log_weight.shape[0]
        # the clipped surrogate
        gain1 = log_weight.exp() * advantage
        log_weight_clip = log_weight.clamp(*loss._clip_bounds)
        clip_fraction = (log_weight_clip != log_weight).to(log_weight.dtype).mean()
        gain2 = log_weight_clip.exp() * advantage
        gain = torch.stack([gain1, gain2], -1).min(dim=-1).values
        out: dict[str, torch.Tensor] = {"loss_objective": -gain, "clip_fraction": clip_fraction,
                                        "kl_approx": kl_approx.detach().mean()}
        if loss.entropy_bonus:
            self._analytic_entropy = has_analytic_entropy(dist)
            if not self._analytic_entropy:
                return None
            entropy = dist.entropy()
            if not entropy.isfinite().all():
                return None
            out["entropy"] = entropy.detach().mean()
            out["loss_entropy"] = -loss.entropy_coeff * entropy
        # loss_critic
        target_return = td.get(k.value_target)
        old_state_value = td.get(k.value) if loss.clip_value else None
        values = {key: values[key] if key in values else td.get(key) for key in self.critic.in_keys}
        self.critic.run(values)
        state_value = values[k.value]
        loss_value = distance_loss(target_return, state_value, loss_function=loss.loss_critic_type)
        value_clip_fraction = None
        if loss.clip_value:
            loss_value, value_clip_fraction = _clip_value_loss(old_state_value, state_value, loss.clip_value,
                                                               target_return, loss_value, loss.loss_critic_type)
        explained = None
        if loss.log_explained_variance:
            with torch.no_grad():
                tgt, pred = target_return.detach(), state_value.detach()
                resid = torch.var(tgt - pred, correction=0, dim=0)
                explained = 1.0 - resid / (torch.var(tgt, correction=0, dim=0) + torch.finfo(tgt.dtype).eps)
        out["loss_critic"] = loss.critic_coeff * loss_value
        if value_clip_fraction is not None:
            out["value_clip_fraction"] = value_clip_fraction
        if explained is not None:
            out["explained_variance"] = explained
        out["ESS"] = ess / batch
        with torch.no_grad():
            ratio = log_weight.exp()
            out["max_ratio"], out["mean_ratio"] = ratio.max(), ratio.mean()
        for key in ("loss_objective", "loss_entropy", "loss_critic"):
            if key in out:
                out[key] = out[key].mean().squeeze(-1)
        out["kl_approx_k3"] = k3
        return TensorDict(out, batch_size=[])


def make_loss(actor: TensorDictModule, critic: TensorDictModule, config: LossConfig) -> PPOObjective:
    """The clipped PPO loss for ``actor`` and ``critic`` with ``config``'s coefficients."""
    return PPOObjective(actor, critic, config)


def total_loss(losses: TensorDictBase) -> torch.Tensor:
    """Sum of the weighted loss terms (every key starting with ``loss_``)."""
    return sum(value for key, value in losses.items() if key.startswith("loss_"))


def explained_variance(batch: TensorDictBase) -> float:
    """1 - Var(returns - values) / Var(returns) of a batch after GAE (CleanRL's definition)."""
    target = batch.get(keys.VALUE_TARGET).flatten()
    value = batch.get(keys.STATE_VALUE).flatten()
    var_target = target.var()
    if var_target == 0:
        return float("nan")
    return float(1 - (target - value).var() / var_target)
