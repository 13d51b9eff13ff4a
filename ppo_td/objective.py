"""GAE and the clipped PPO loss, with every coefficient explicit."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from ppo_td import keys
from ppo_td.config import LossConfig

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


class PPOObjective(ClipPPOLoss):
    """``ClipPPOLoss`` with CleanRL's advantage normalization and a k3 KL estimate.

    Outputs ``loss_objective``, ``loss_critic``, ``loss_entropy`` (already
    weighted; their sum is the loss to minimize) and the diagnostics
    ``kl_approx`` (k1: mean of log(pi_old/pi)), ``kl_approx_k3`` (mean of
    (r - 1) - log r, CleanRL's approx_kl), ``clip_fraction``, ``entropy`` and
    ``explained_variance``. Modules run as plain ``nn.Module``s (non-functional),
    so optimizer, actor and critic share the very same parameters.
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

    def _log_weight(self, tensordict: TensorDictBase, adv_shape: torch.Size):
        log_weight, dist, kl_approx, log_is_weight = super()._log_weight(tensordict, adv_shape)
        with torch.no_grad():
            self._kl_k3 = (log_weight.exp() - 1 - log_weight).mean()
        return log_weight, dist, kl_approx, log_is_weight

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        if self.normalize_advantage_per_minibatch:
            advantage = tensordict.get(self.tensor_keys.advantage)
            tensordict = tensordict.clone(False)
            normalized = (advantage - advantage.mean()) / (advantage.std() + ADVANTAGE_EPS)
            tensordict.set(self.tensor_keys.advantage, normalized)
        out = super().forward(tensordict)
        out.set("kl_approx_k3", self._kl_k3)
        return out


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
