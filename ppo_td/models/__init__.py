"""Models: ppo_td's networks, the TorchRL actor and critic around them, and their distributions.

Reads the env only through :class:`ppo_td.envs.EnvDescription`.
"""

from ppo_td.models.device import resolve_device, same_device
from ppo_td.models.distributions import ClosedForm, MaskedMultiCategorical
from ppo_td.models.factory import make_actor, make_actor_critic, make_critic, wrap_policy, wrap_value
from ppo_td.models.inputs import add_policy_inputs
from ppo_td.models.networks import GaussianHead, PolicyNet, ValueNet, init_orthogonal_, mlp
from ppo_td.models.plain import policy_net, value_net
from ppo_td.models.recurrent import add_memory, is_recurrent, recurrent_parts

__all__ = [
    "ClosedForm",
    "GaussianHead",
    "MaskedMultiCategorical",
    "PolicyNet",
    "add_memory",
    "add_policy_inputs",
    "ValueNet",
    "init_orthogonal_",
    "is_recurrent",
    "make_actor",
    "make_actor_critic",
    "make_critic",
    "mlp",
    "policy_net",
    "recurrent_parts",
    "resolve_device",
    "same_device",
    "value_net",
    "wrap_policy",
    "wrap_value",
]
