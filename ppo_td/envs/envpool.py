"""Atari through EnvPool (``env.vectorization='envpool'``): the copies stepped by EnvPool's C++ threads, with its own
Atari preprocessing set to ppo_td's (:mod:`ppo_td.envs.atari`), as one Gymnasium vector env that ppo_td's step loop
and TorchRL's ``GymWrapper`` step like the others.

EnvPool's Atari options are set to what ``env.atari`` does with Gymnasium's wrappers: up to 30 no-ops at reset,
frame skip 4 max-pooled over the last two frames, 84x84 grayscale ``uint8`` (area interpolation, as Gymnasium's
``AtariPreprocessing``), the last 4 frames stacked, FIRE at reset for games that wait for it, a lost life ending
the learner's episode in training only (``env.episodic_life``; the game goes on), raw rewards (ppo_td clips them
for the learner after ``RewardSum``), and ALE v5's limit of 108,000 frames a game (27,000 steps). The ``env.kwargs``
ALE takes (``repeat_action_probability``, ``full_action_space``, ``mode``, ``difficulty``, ``frameskip=1``) map to
EnvPool's; any other is refused by name.

:class:`EnvPoolAtari` has ``AutoresetMode.DISABLED`` semantics, as the other vector envs ppo_td steps: a finished
copy is reset when ppo_td asks (``reset(options={"reset_mask": ...})``, EnvPool's ``reset(env_id)``), never by
itself. The same game under Gymnasium and under EnvPool is played by other emulator streams (EnvPool seeds each
copy its own way), so the two are compared by their statistics, not step by step (``tests/test_envpool.py``).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from ppo_td.config import EnvConfig
from ppo_td.envs.atari import FRAME_SKIP, FRAME_STACK, NOOP_MAX, SCREEN_SIZE

ALE_V5_MAX_FRAMES = 108_000
"""ALE v5's default ``max_num_frames_per_episode``: the game's limit in emulator frames."""

_KWARGS = {"repeat_action_probability": "repeat_action_probability", "full_action_space": "full_action_space",
           "mode": "mode", "difficulty": "difficulty"}
"""ALE's ``gym.make`` keywords that EnvPool takes too (its names)."""


def available() -> bool:
    """EnvPool is installed."""
    return importlib.util.find_spec("envpool") is not None


def task_id(env_id: str) -> str:
    """EnvPool's id for an ALE v5 id (``ALE/Pong-v5`` -> ``Pong-v5``).

    Raises:
        ValueError: ``env_id`` is not an ALE v5 id EnvPool has.
    """
    import envpool

    bare = env_id.rpartition(":")[2]
    game = bare.removeprefix("ALE/")
    if not bare.startswith("ALE/") or game not in envpool.list_all_envs():
        raise ValueError(f"env.vectorization='envpool' takes an ALE v5 Atari id EnvPool has (e.g. ALE/Pong-v5); "
                         f"{env_id!r} is not one: use env.vectorization='sync' or 'async'")
    return game


def pool_kwargs(config: EnvConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
    """EnvPool's Atari options for ``config`` (see the module), from ``config``'s ``env.kwargs`` (``kwargs``).

    Raises:
        ValueError: a keyword EnvPool has no counterpart for, or ``frameskip`` other than 1.
    """
    given = dict(kwargs)
    if given.pop("frameskip", 1) != 1:
        raise ValueError("env.atari skips frames itself (4, max-pooled): make the env with --env.kwargs frameskip=1")
    unknown = sorted(set(given) - set(_KWARGS))
    if unknown:
        raise ValueError(f"env.kwargs {unknown} have no EnvPool counterpart (it takes {sorted(_KWARGS)} and "
                         "frameskip=1): drop them, or use env.vectorization='sync' or 'async'")
    steps = config.max_episode_steps if config.max_episode_steps is not None else ALE_V5_MAX_FRAMES // FRAME_SKIP
    return {**{_KWARGS[k]: v for k, v in given.items()}, "num_envs": config.num_envs, "batch_size": config.num_envs,
            "episodic_life": config.episodic_life, "reward_clip": False, "noop_max": NOOP_MAX,
            "frame_skip": FRAME_SKIP, "img_height": SCREEN_SIZE, "img_width": SCREEN_SIZE, "stack_num": FRAME_STACK,
            "gray_scale": True, "use_inter_area_resize": True, "use_fire_reset": True,
            "zero_discount_on_life_loss": False, "max_episode_steps": steps}


class EnvPoolAtari(gym.vector.VectorEnv):
    """``num_envs`` Atari copies in one EnvPool, as a Gymnasium vector env without autoreset (see the module).

    A ``reset(seed=...)`` makes the pool again with that seed (EnvPool takes its seed when it is made), so a seeded
    reset starts the same games every time; ``reset(options={"reset_mask": mask})`` resets the copies where
    ``mask`` is True.
    """

    def __init__(self, task: str, kwargs: dict[str, Any], seed: int = 0) -> None:
        self.task, self.kwargs = task, kwargs
        self.num_envs = kwargs["num_envs"]
        self.pool = self._make(seed)
        self.single_observation_space = self.pool.observation_space
        self.single_action_space = self.pool.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.DISABLED}
        self.autoreset_mode = AutoresetMode.DISABLED
        self.render_mode = None
        self.ids = np.arange(self.num_envs, dtype=np.int32)
        self.last_obs: np.ndarray | None = None

    def _make(self, seed: int) -> Any:
        import envpool

        return envpool.make_gymnasium(self.task, seed=int(seed), **self.kwargs)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        if seed is not None:  # a seeded reset starts the same games every time: the pool made again with it
            first = seed[0] if isinstance(seed, (list, tuple)) else seed
            self.pool.close()
            self.pool = self._make(int(first))
        mask = None if options is None else options.get("reset_mask")
        if mask is None or self.last_obs is None:
            obs, _ = self.pool.reset()
        else:
            ids = self.ids[np.asarray(mask, dtype=bool)]
            obs = self.last_obs.copy()
            if len(ids):
                fresh, _ = self.pool.reset(ids)
                obs[ids] = fresh
        self.last_obs = obs
        return obs, {}

    def step(self, actions: Any):
        obs, reward, terminated, truncated, _ = self.pool.step(np.asarray(actions), self.ids)
        self.last_obs = obs
        return obs, reward.astype(np.float64), terminated, truncated, {}

    def close_extras(self, **kwargs: Any) -> None:
        self.pool.close()


def envpool_atari(config: EnvConfig, kwargs: dict[str, Any]) -> EnvPoolAtari:
    """The :class:`EnvPoolAtari` of ``config`` (``env.atari`` with ``env.vectorization='envpool'``).

    Raises:
        ValueError: EnvPool is not installed, the id is not an Atari game it has, or a keyword has no counterpart.
    """
    if not available():
        raise ValueError("env.vectorization='envpool' needs EnvPool: pip install envpool (or pip install -e "
                         "'.[envpool]'), or use env.vectorization='sync' or 'async'")
    if not config.atari:
        raise ValueError("env.vectorization='envpool' steps Atari games with ppo_td's Atari preprocessing: set "
                         "env.atari=True (the atari preset), or use env.vectorization='sync' or 'async'")
    return EnvPoolAtari(task_id(config.env_id), pool_kwargs(config, kwargs))
