"""Batched simulators, made with the batch ppo_td asks for (``env.num_envs``).

``ppo-td train --env.env-id ppo_td.envs.simulators:brax_batch --env.kwargs env_name=ant --env.num-envs 4096``

Each factory takes ``num_envs``, which ppo_td passes from ``env.num_envs`` (any TorchRL factory with a
``num_envs`` parameter gets it: write your own for Isaac Lab, Genesis or mjlab the same way), and returns one TorchRL
env of ``batch_size=[num_envs]``: the simulator steps the whole batch in one call (``jax.vmap`` under ``jit`` for
Brax and MuJoCo Playground), no Python per copy. ``device`` is where the simulator's tensors come back (through
DLPack, so on a GPU they stay there). Episodes end by the simulator's termination, and by ``env.max_episode_steps``
(ppo_td's ``StepCounter``, a truncation that bootstraps; Brax's training episode length is 1,000).

- :func:`brax_batch`: ppo_td's :class:`BraxBatch` (``pip install 'ppo_td[brax]'``; JAX's CPU backend here,
  ``jax[cuda12]`` on a GPU): the simulator's state kept in JAX, its own reset of the copies that ended.
- :func:`brax`: TorchRL's ``BraxEnv`` (what ``simulators:brax`` built before ``brax_batch`` existed, so a recorded run
  is rebuilt as it ran). TorchRL 0.14 clears JAX's compilation cache every 20 steps unless told not to (its
  ``cache_clear_frequency``, documented as off, defaults to 20 in the code), which recompiles the step and the
  reset (about 10 s each on a CPU, measured 2026-12-06): this factory turns it off.
- :func:`playground`: TorchRL's ``MujocoPlaygroundEnv`` (``pip install 'ppo_td[playground]'``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import EnvBase


def brax(env_name: str = "ant", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> EnvBase:
    """Brax's ``env_name`` (``ant``, ``halfcheetah``, ``humanoid``, ``inverted_pendulum``, ...) as TorchRL's
    ``BraxEnv`` of ``num_envs`` copies on ``device`` (the simulator's state carried in the TensorDict, every reset
    through TorchRL's), with its compilation cache kept; ``kwargs`` go to it (``backend='mjx'``, ...). What runs
    recorded with ``simulators:brax`` were built with, and are rebuilt with."""
    _needs("brax", "brax", "Brax")
    from torchrl.envs.libs.brax import BraxEnv

    kwargs.setdefault("cache_clear_frequency", False)
    return BraxEnv(env_name, batch_size=[num_envs], device=device, **kwargs)


def brax_batch(env_name: str = "ant", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> EnvBase:
    """Brax's ``env_name`` as a :class:`BraxBatch` of ``num_envs`` copies on ``device`` (the simulator's state kept
    in JAX, its own reset of the copies that ended); ``kwargs`` go to ``brax.envs.get_environment``."""
    _needs("brax", "brax", "Brax")
    return BraxBatch(env_name, num_envs, device, **kwargs)


class BraxBatch(EnvBase):
    """``num_envs`` copies of a Brax env as one TorchRL env, stepped by one compiled call a step.

    The simulator's state stays in JAX, held here (TorchRL's ``BraxEnv`` carries it in the TensorDict and turns it
    to tensors and back every step: about 11 KB a frame on Ant). A step resets the copies that ended in it (Brax's
    own reset, fresh random keys, run only on steps where one ended), while the step's ``("next", "observation")``
    is still the last one of the ended episode, as TorchRL's convention wants; the reset TorchRL then asks for
    returns those copies' new first observations without calling the simulator again. A copy
    cut by a time limit (``env.max_episode_steps``) is reset there. Observations and rewards reach torch through
    DLPack (on a GPU they stay on it), actions the same way back. Episodes end by the simulator's termination only
    (Brax's raw envs have no time limit). Its state is not saved: a resumed run starts fresh episodes.
    """

    def __init__(self, env_name: str = "ant", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> None:
        import jax
        from brax import envs
        from torchrl.data import Bounded, Composite, Unbounded

        super().__init__(batch_size=torch.Size([num_envs]), device=device)
        self.env_name, self._jax = env_name, jax
        simulator = envs.get_environment(env_name, **kwargs)
        n, size = num_envs, simulator.observation_size
        self.observation_spec = Composite(observation=Unbounded((n, size), device=self.device), shape=(n,))
        self.action_spec = Bounded(-1.0, 1.0, (n, simulator.action_size), device=self.device)
        self.reward_spec = Unbounded((n, 1), device=self.device)
        reset, step = jax.vmap(simulator.reset), jax.vmap(simulator.step)

        def where(rows: Any, new: Any, old: Any) -> Any:
            return jax.tree_util.tree_map(
                lambda a, b: jax.numpy.where(rows.reshape(rows.shape + (1,) * (a.ndim - 1)), a, b), new, old)

        def typed_step(state: Any, action: Any) -> Any:
            # the state's types kept as the reset's (a step's reward and done are weakly typed, which would make
            # the next call compile the step again)
            return jax.tree_util.tree_map(lambda new, old: jax.lax.convert_element_type(new, old.dtype),
                                          step(state, action), state)

        def reset_all(key: Any) -> tuple[Any, Any]:
            key, fresh = jax.random.split(key)
            return reset(jax.random.split(fresh, n)), key

        # three compilations: the step, the reset, and the choice of rows (no physics)
        self._step_jit, self._reset_all, self._where = jax.jit(typed_step), jax.jit(reset_all), jax.jit(where)
        self._where_jax = _jax_device(jax, self.device)  # the simulator's arrays all committed to it
        self._key = self._committed(jax.random.PRNGKey(0))
        self._state: Any = None
        self._fresh = torch.zeros(n, dtype=torch.bool)
        """Copies the last step reset (their episode ended in it): the reset TorchRL asks for next leaves them."""

    def _committed(self, tree: Any) -> Any:
        """``tree``'s arrays placed on the simulator's JAX device: every call of the compiled step then sees the
        same placement (an uncommitted reset's state against a committed action compiled the step twice)."""
        return self._jax.device_put(tree, self._where_jax)

    def _torch(self, array: Any) -> torch.Tensor:
        """A torch copy of a JAX array (through DLPack, on its device): TorchRL writes into the tensors a step
        returns (a partial reset's merge), and a view would write into JAX's immutable buffers."""
        return torch.from_dlpack(array).to(self.device, copy=True)

    def _out(self, **entries: torch.Tensor) -> TensorDict:
        return TensorDict(entries, batch_size=self.batch_size, device=self.device)

    def _reset_rows(self, rows: torch.Tensor) -> None:
        """The copies in ``rows`` (a boolean tensor) from Brax's reset with fresh keys, the others as they are."""
        fresh, self._key = self._committed(self._reset_all(self._key))
        # a copy of its own: JAX may read a numpy array in place, and later, where the caller's tensor has changed
        self._state = self._where(self._committed(self._jax.numpy.asarray(rows.cpu().numpy().copy())), fresh,
                                  self._state)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDict:
        rows = tensordict.get("_reset", None) if tensordict is not None else None
        if self._state is None or rows is None:
            self._state, self._key = self._committed(self._reset_all(self._key))
        else:
            stale = rows.reshape(-1).cpu() & ~self._fresh  # asked for and not reset in the step (a time limit)
            if stale.any():
                self._reset_rows(stale)
        self._fresh.zero_()
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        return self._out(observation=self._torch(self._state.obs), done=done, terminated=done.clone())

    def _step(self, tensordict: TensorDictBase) -> TensorDict:
        # the action shared with JAX through DLPack is a copy nothing else holds (JAX computes later, in place)
        action = self._committed(self._jax.dlpack.from_dlpack(tensordict.get("action").detach().clone()))
        self._state = stepped = self._jax.block_until_ready(self._step_jit(self._state, action))
        done = self._torch(stepped.done > 0.5).reshape(*self.batch_size, 1)
        self._fresh = done.reshape(-1).cpu().clone()  # its own: TorchRL's time limit writes truncations into done
        if self._fresh.any():  # the simulator's own reset of the copies that ended, before TorchRL asks for it
            self._reset_rows(self._fresh)
        return self._out(observation=self._torch(stepped.obs),
                         reward=self._torch(stepped.reward).reshape(*self.batch_size, 1), done=done,
                         terminated=done.clone())

    def _set_seed(self, seed: int | None) -> None:
        self._key = self._committed(self._jax.random.PRNGKey(0 if seed is None else int(seed)))
        self._fresh.zero_()  # the next reset comes from the new key alone


def _jax_device(jax: Any, device: torch.device) -> Any:
    """JAX's device for torch's ``device`` (the CPU, or the CUDA card of that index).

    Raises:
        ValueError: JAX has no such device here (a CPU-only JAX asked for ``cuda``), naming the way out.
    """
    platform = "cpu" if device.type == "cpu" else "gpu"
    try:
        found = jax.devices(platform)
    except RuntimeError:
        found = []
    index = device.index or 0
    if index >= len(found):
        raise ValueError(f"device={str(device)!r}: JAX has no {platform} device {index} here (its devices: "
                         f"{jax.devices()}); install jax[cuda12] for a GPU, or pass device='cpu'")
    return found[index]


def playground(env_name: str = "CartpoleBalance", num_envs: int = 1, device: str = "cpu", **kwargs: Any) -> EnvBase:
    """MuJoCo Playground's ``env_name`` as TorchRL's ``MujocoPlaygroundEnv`` of ``num_envs`` copies on ``device``."""
    _needs("mujoco_playground", "playground", "MuJoCo Playground")
    from torchrl.envs.libs.mujoco_playground import MujocoPlaygroundEnv

    return MujocoPlaygroundEnv(env_name, batch_size=[num_envs], device=device, **kwargs)


def _needs(module: str, extra: str, name: str) -> None:
    if importlib.util.find_spec(module) is None or importlib.util.find_spec("jax") is None:
        raise ImportError(f"{name} is not installed here: pip install 'ppo_td[{extra}]' (JAX's CPU build; on a GPU "
                          "add jax[cuda12])")
