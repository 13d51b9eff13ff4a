"""Atari the way the published PPO runs play it (Mnih et al. 2015; Machado et al. 2018; CleanRL's
``ppo_atari.py``; SB3's ``AtariWrapper``), from Gymnasium's wrappers where Gymnasium has them.

:func:`atari_wrappers` (``env.atari=True``) puts around each copy of an ``ale-py`` env made without frame
skip (``frameskip=1``):

1. Gymnasium's ``AtariPreprocessing``: up to 30 no-op actions at reset, frame skip 4 with the max of
   the last two frames, 84x84 grayscale ``uint8`` (not scaled: the encoder divides by 255);
2. :class:`EpisodicLife` (``env.episodic_life``, training only): a lost life ends the learner's episode;
   the game goes on, and only a game over resets the emulator;
3. :class:`FireReset` for games that wait for FIRE (Breakout...);
4. Gymnasium's ``FrameStackObservation``: the last 4 frames, ``[4, 84, 84]``.

Rewards are clipped to [-1, 1] for the learner (their sign, Atari scores being integers) by TorchRL's
``RewardClipping`` after ``RewardSum``: episode returns count the raw score (per life while training
with episodic life; evaluation plays whole games).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

NOOP_MAX = 30
FRAME_SKIP = 4
SCREEN_SIZE = 84
FRAME_STACK = 4


class EpisodicLife(gym.Wrapper):
    """A lost life is a termination for the learner; ``reset`` right after one continues the same game (one
    no-op step). Any other reset (a game over, a time limit outside this wrapper, a seed) resets the emulator.
    Lives come from ALE's public ``lives()``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.life_lost = False  # the last step ended the learner's episode at a lost life, the game going on

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        self.life_lost = 0 < lives < self.lives and not (terminated or truncated)
        if self.life_lost:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any):
        if not self.life_lost or kwargs.get("seed") is not None:
            obs, info = self.env.reset(**kwargs)
        else:  # a life was lost: go on from where the game is
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.life_lost = False
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE (then action 2) after each reset, for games that stand still until FIRE is pressed."""

    def reset(self, **kwargs: Any):
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                self.env.reset(**kwargs)
        return obs, info


def needs_fire(env: gym.Env) -> bool:
    """The game's second action is FIRE and it has at least three (CleanRL's and SB3's test)."""
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def atari_wrappers(env: gym.Env, episodic_life: bool = True) -> gym.Env:
    """The standard Atari preprocessing around one ``ale-py`` env copy (see the module docstring)."""
    if not hasattr(env.unwrapped, "ale"):
        raise ValueError(f"env.atari: {env.spec.id if env.spec else env} is not an ale-py Atari env")
    if _frameskip(env) != 1:
        raise ValueError(f"env.atari: {env.spec.id if env.spec else 'the env'} skips frames itself; ppo_td's Atari "
                         "preprocessing does (4, max-pooled): make it with --env.kwargs frameskip=1")
    env = gym.wrappers.AtariPreprocessing(env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP, screen_size=SCREEN_SIZE,
                                          terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    if episodic_life:
        env = EpisodicLife(env)
    if needs_fire(env):
        env = FireReset(env)
    return gym.wrappers.FrameStackObservation(env, FRAME_STACK)


def _frameskip(env: gym.Env) -> Any:
    spec = env.spec
    return spec.kwargs.get("frameskip", 1) if spec is not None else 1


def import_ale(env_id: str) -> None:
    """Import ``ale_py`` (which registers the Atari ids) for an ``ALE/...`` or ``...NoFrameskip-v4`` id not
    registered yet; a clear error without it."""
    bare = env_id.rpartition(":")[2]
    if bare in gym.registry or not (bare.startswith("ALE/") or "NoFrameskip" in bare):
        return
    try:
        importlib.import_module("ale_py")
    except ImportError as err:
        raise ValueError(f"env {env_id!r} is an Atari game: install ale-py (ROMs included) with "
                         "pip install -e '.[atari]'") from err
