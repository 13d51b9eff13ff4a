"""The plain-tensor form of an actor or critic that ppo_td's factories built.

ppo_td's fast collector and fast loss skip TensorDict dispatch and call the networks
directly. They do so only for modules shaped exactly as :func:`~ppo_td.models.wrap_policy`
and :func:`~ppo_td.models.wrap_value` build them (checked here through public
attributes); for anything else these functions return None and the caller runs the
TorchRL module itself. Forward hooks registered on the networks (or their layers) run
on both paths (in collection only with ``collector.inference='torch'``: the default samples a small MLP
policy in numpy, :mod:`ppo_td.models.inference`); hooks on the TorchRL wrappers run only when the wrapper runs (set
``collector.step_loop='torchrl'`` and ``loss.fast_forward=False`` to keep them).
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.modules import ProbabilisticActor, ValueOperator

from ppo_td import keys
from ppo_td.envs import MASK_KEY
from ppo_td.models.gsde import NOISE_KEY, GSDEHead
from ppo_td.models.networks import PARAM_KEYS, PolicyNet, ValueNet


def policy_net(actor: nn.Module, acting: bool = False) -> PolicyNet | None:
    """The :class:`PolicyNet` that ``actor`` runs, when ``actor`` is exactly a ppo_td-built policy; else None.

    ``acting``: also a gSDE actor (:mod:`ppo_td.models.gsde`), whose samples read a noise matrix from the
    TensorDict: its network called on observations alone gives the deterministic action, the log-probs and the
    entropy (a deployed policy, an export, the fast loss); called with each env copy's matrix too, the samples'
    noise (the fast collector)."""
    if type(actor) is not ProbabilisticActor or len(actor.module) != 2:
        return None
    wrapper, dist_module = actor.module[0], actor.module[1]
    net = getattr(wrapper, "module", None)
    if type(wrapper) is not TensorDictModule or not isinstance(net, PolicyNet):
        return None
    param_keys = [PARAM_KEYS[name] for name in net.param_names]
    inputs = [keys.OBSERVATION] + ([NOISE_KEY] if acting and isinstance(net.head, GSDEHead) else [])
    reads = inputs + ([MASK_KEY] if net.masked else [])
    writes = param_keys + [keys.ACTION, dist_module.log_prob_key]
    same = (list(wrapper.in_keys) == inputs and list(wrapper.out_keys) == param_keys
            and sorted(actor.in_keys) == sorted(reads) and list(actor.out_keys) == writes
            and dist_module.distribution_class is net.distribution_class
            and _same_kwargs(dist_module.distribution_kwargs, net.distribution_kwargs)
            and dist_module.return_log_prob and dist_module.num_samples is None)
    return net if same else None


def _same_kwargs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k] is b[k] or (not torch.is_tensor(a[k]) and a[k] == b[k]) for k in a)


def value_net(critic: nn.Module) -> ValueNet | None:
    """The :class:`ValueNet` that ``critic`` runs, when ``critic`` is exactly a ppo_td-built critic; else None."""
    if type(critic) is not ValueOperator or not isinstance(critic.module, ValueNet):
        return None
    if list(critic.in_keys) != [keys.OBSERVATION] or list(critic.out_keys) != [keys.STATE_VALUE]:
        return None
    return critic.module
