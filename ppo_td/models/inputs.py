"""The entries a policy reads beside the observation, and the env transforms that write them.

A recurrent actor or critic reads ``"is_init"`` and its states (:func:`~ppo_td.models.recurrent.add_memory`), a
gSDE actor each env copy's noise matrix (:func:`~ppo_td.models.gsde.add_noise`). Every env that feeds such a
policy (training, evaluation, a resume) takes them through :func:`add_policy_inputs`.
"""

from __future__ import annotations

from torch import nn
from torchrl.envs import EnvBase

from ppo_td.models.gsde import add_noise
from ppo_td.models.recurrent import add_memory


def add_policy_inputs(env: EnvBase, actor: nn.Module, critic: nn.Module | None = None, every: int = 0) -> EnvBase:
    """``env`` with the transforms that write what ``actor`` and ``critic`` read, where it lacks them (a
    ``TransformedEnv`` is extended in place and returned): a recurrent model's ``InitTracker`` and states' primer,
    a gSDE actor's :class:`~ppo_td.models.gsde.ExplorationNoise` drawing every ``every`` steps (0: at episode
    starts only). Raises ValueError, naming the transforms to append, for an env that cannot take them."""
    env = add_memory(env, *(m for m in (actor, critic) if m is not None))
    return add_noise(env, actor, every)
