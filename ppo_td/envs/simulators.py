"""Batched simulators through TorchRL's wrappers, made with the batch ppo_td asks for (``env.num_envs``).

``ppo-td train --env.env-id ppo_td.envs.simulators:brax --env.kwargs env_name=ant --env.num-envs 4096``

Each factory takes ``num_envs``, which ppo_td passes from ``env.num_envs`` (any TorchRL factory with a
``num_envs`` parameter gets it: write your own for Isaac Lab, Genesis or mjlab the same way), and returns one TorchRL
env of ``batch_size=[num_envs]``: the simulator steps the whole batch in one call (``jax.vmap`` under ``jit`` for
Brax and MuJoCo Playground), no Python per copy. ``device`` is where the simulator's tensors come back (JAX's arrays
are shared with torch through DLPack, so on a GPU they stay there). Episodes end by the simulator's termination, and
by ``env.max_episode_steps`` (ppo_td's ``StepCounter``, a truncation that bootstraps; Brax's training episode
length is 1,000).

- :func:`brax`: TorchRL's ``BraxEnv`` (``pip install 'ppo_td[brax]'``; JAX's CPU backend here, ``jax[cuda12]`` on
  a GPU). TorchRL 0.14 clears JAX's compilation cache every 20 steps unless told not to (its
  ``cache_clear_frequency``, documented as off, defaults to 20 in the code), which recompiles the step and the
  reset (about 10 s each on a CPU, measured 2026-12-06): this factory turns it off.
- :func:`playground`: TorchRL's ``MujocoPlaygroundEnv`` (``pip install 'ppo_td[playground]'``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from torchrl.envs import EnvBase


def brax(env_name: str = "ant", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> EnvBase:
    """Brax's ``env_name`` (``ant``, ``halfcheetah``, ``humanoid``, ``inverted_pendulum``, ...) as TorchRL's
    ``BraxEnv`` of ``num_envs`` copies on ``device``; ``kwargs`` go to it (``backend='mjx'``, ...)."""
    _needs("brax", "brax", "Brax")
    from torchrl.envs.libs.brax import BraxEnv

    kwargs.setdefault("cache_clear_frequency", False)
    return BraxEnv(env_name, batch_size=[num_envs], device=device, **kwargs)


def playground(env_name: str = "CartpoleBalance", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> EnvBase:
    """MuJoCo Playground's ``env_name`` as TorchRL's ``MujocoPlaygroundEnv`` of ``num_envs`` copies on ``device``."""
    _needs("mujoco_playground", "playground", "MuJoCo Playground")
    from torchrl.envs.libs.mujoco_playground import MujocoPlaygroundEnv

    return MujocoPlaygroundEnv(env_name, batch_size=[num_envs], device=device, **kwargs)


def _needs(module: str, extra: str, name: str) -> None:
    if importlib.util.find_spec(module) is None or importlib.util.find_spec("jax") is None:
        raise ImportError(f"{name} is not installed here: pip install 'ppo_td[{extra}]' (JAX's CPU build; on a GPU "
                          "add jax[cuda12])")
