"""User extensions for `ppo-td doctor` tests: one buggy, one correct."""

from tensordict import TensorDictBase

from ppo_td.training import PPOObjective


class UndetachedAdvantageLoss(PPOObjective):
    """A custom loss that recomputes the advantage from the live critic, without .detach()."""

    def forward(self, tensordict: TensorDictBase):
        tensordict = tensordict.clone(False)
        value = self.critic_network(tensordict.clone(False)).get("state_value")
        tensordict.set("advantage", tensordict.get("value_target") - value)  # the bug
        return super().forward(tensordict)


def buggy_loss(actor, critic, config):
    return UndetachedAdvantageLoss(actor, critic, config.loss)


def correct_loss(actor, critic, config):
    return PPOObjective(actor, critic, config.loss)


def returns_none(env, config):
    """A factory that forgot its return statement."""


def returns_a_linear(env, config):
    """A factory that returns a plain network instead of a TensorDict module."""
    import torch

    return torch.nn.Linear(4, 2)
