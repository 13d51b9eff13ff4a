"""Videos of a trained policy: the env's ``rgb_array`` frames, written by Gymnasium's ``save_video``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import torch

from ppo_td.config import EnvConfig
from ppo_td.deploy.policy import Policy, acting_config, one_agent
from ppo_td.envs import gym_env
from ppo_td.training import step_cap

MAX_FRAMES = 5_000
"""Frames kept per video (held in memory until the file is written): 100 s at 50 frames/s."""


class VideoError(ValueError):
    """The env cannot be recorded (no ``rgb_array`` rendering, or the video extra is missing)."""


def render_env(config: EnvConfig) -> gym.Env:
    """The user-level env of ``config`` rendering ``rgb_array`` frames, or a :class:`VideoError` naming the env
    and the render modes it has."""
    env_id = config.env_id
    try:
        env = gym_env(config, render_mode="rgb_array")
    except TypeError as err:  # an env (or factory) without a render_mode argument
        plain = gym_env(config)
        modes = list(plain.metadata.get("render_modes", []))
        plain.close()
        raise VideoError(f"env {env_id!r} cannot render 'rgb_array' frames for a video: it takes no render_mode "
                         f"argument and its render modes are {modes or 'none'} ({err}). Record an env that renders "
                         "'rgb_array' (gymnasium.make(..., render_mode='rgb_array'))") from err
    except gym.error.DependencyNotInstalled as err:
        raise VideoError(f"env {env_id!r} needs a package to render: {err}. pip install 'ppo_td[video]'") from err
    modes = list(env.metadata.get("render_modes", []))
    if env.render_mode != "rgb_array":
        env.close()
        raise VideoError(f"env {env_id!r} cannot render 'rgb_array' frames for a video: its render modes are "
                         f"{modes or 'none'}. Record an env that has 'rgb_array', or add it to the env's render()")
    return env


class RecordedEpisode(NamedTuple):
    """One episode :func:`record_video` wrote: its video file, the reward summed over its steps, and whether it
    was cut at the step cap (then ``total`` is the reward so far, not an episode return)."""

    path: Path
    total: float
    cut: bool
    steps: int


def record_video(policy: Policy, folder: str | os.PathLike, *, episodes: int = 1, seed: int = 0,
                 name_prefix: str = "episode", deterministic: bool | None = None, as_evaluation: bool = False,
                 max_frames: int = MAX_FRAMES, max_steps: int | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 on_frames: Callable[[list[Any], int], None] | None = None) -> list[RecordedEpisode]:
    """Run ``episodes`` episodes of ``policy`` on its env rendering ``rgb_array`` frames and write one video
    each into ``folder`` (Gymnasium's ``save_video``: MP4 through moviepy, the ``video`` extra), named
    ``{name_prefix}-episode-{i}.mp4`` (an earlier file of that name is replaced). Returns what each file shows.

    The first episode starts from ``reset(seed=seed)``; with ``as_evaluation``, the env is seeded as ppo_td's
    evaluation seeds its first copy, so the first video is the first episode ``evaluate(..., seed=seed)`` runs
    where evaluation steps each copy as its own env (not with Gymnasium's numpy-vectorized CartPole, which draws
    all copies' start states at once).
    Sampled actions (``deterministic=False``) come from torch's RNG seeded with ``seed`` (the caller's RNG is
    restored). A video holds at most ``max_frames`` frames. An episode runs to its end, or is cut after the env's
    own time limit or, on an env without one, ``max_steps`` steps (default: the run's ``eval_max_steps``).
    Where ``should_stop()`` turns true (checked every step), or on an interrupt, the episode being recorded is
    dropped unwritten: the videos already written are returned, or the interrupt goes on. ``on_frames(frames, fps)``
    gets each written episode's frames (``H x W x 3`` arrays) too: the loggers that take videos."""
    if episodes < 1 or max_frames < 1:
        raise ValueError(f"episodes={episodes} and max_frames={max_frames} must be >= 1")
    one_agent(policy, "record_video")
    save_video = _video_writer()
    folder = Path(folder)
    env_id = policy.config.env.env_id
    limit = step_cap(policy.config.env, max_steps or policy.config.eval_max_steps)[0]  # evaluation's cap
    stop = should_stop or (lambda: False)
    env = render_env(acting_config(policy.config.env))
    fps = env.metadata.get("render_fps") or 30
    sampled = not (policy.deterministic if deterministic is None else deterministic)
    out: list[RecordedEpisode] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            if as_evaluation:
                _reset(env, seed, env_id)  # as TorchRL's set_seed seeds an eval env: its episodes are the next resets
            for episode in range(episodes):
                policy.reset()
                obs, info, frame = _reset(env, seed if episode == 0 and not as_evaluation else None, env_id, True)
                frames = [frame]
                total, steps, ended = 0.0, 0, False
                while steps < limit and not ended:
                    if stop():
                        return out
                    obs, reward, terminated, truncated, info = env.step(_act(policy, obs, info, not sampled))
                    total, steps, ended = total + float(reward), steps + 1, terminated or truncated
                    if len(frames) < max_frames:
                        frames.append(env.render())
                save_video(frames, str(folder), episode_trigger=lambda _: True, name_prefix=name_prefix,
                           episode_index=episode, fps=fps)
                if on_frames is not None:
                    on_frames(frames, fps)
                out.append(RecordedEpisode(folder / f"{name_prefix}-episode-{episode}.mp4", total, not ended, steps))
        finally:
            env.close()
    return out


def _video_writer() -> Callable[..., None]:
    """Gymnasium's ``save_video``, or a :class:`VideoError` when moviepy is missing."""
    try:
        from gymnasium.utils.save_video import save_video
    except gym.error.DependencyNotInstalled as err:
        raise VideoError(f"videos need moviepy: pip install 'ppo_td[video]' ({err})") from err
    return save_video


def _reset(env: gym.Env, seed: int | None, env_id: str, render: bool = False) -> tuple[Any, dict, Any]:
    """``env.reset(seed=seed)`` and, with ``render``, its first frame; an OpenGL backend that cannot render
    off-screen (it fails at the first reset or frame) is a :class:`VideoError` naming the fix."""
    try:
        obs, info = env.reset(seed=seed)
        return obs, info, env.render() if render else None
    except Exception as err:
        if "OpenGL" not in str(err) and "GL" not in type(err).__name__:
            raise
        raise VideoError(f"env {env_id!r} could not render off-screen: {str(err).splitlines()[0]}. Without a display, "
                         "choose MuJoCo's headless OpenGL backend: MUJOCO_GL=egl (or osmesa)") from err


def headless_rendering() -> None:
    """For ppo-td's own commands (never on import): without a display, MuJoCo renders through EGL and pygame
    without a window system, unless the user chose otherwise (``MUJOCO_GL``, ``SDL_VIDEODRIVER``), so ``--video``
    works on a server as it does on a desktop."""
    if not sys.platform.startswith("linux") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return  # a desktop (or macOS, Windows): the default backends
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame's frames (classic control) need no window system


def _act(policy: Policy, obs: Any, info: dict, deterministic: bool | None) -> Any:
    mask = info.get("action_mask") if policy.layout.mask_from_info else None
    return policy(obs, action_mask=mask, deterministic=deterministic)


class VideoRecorder:
    """Training callback: every ``every`` iterations, a video of one evaluation episode of the current policy (its
    mode, from ``reset(seed=seed)``) in ``folder`` (``iter_NNNNNN-episode-0.mp4``). The recording's time counts in
    the run's training time. ``should_stop`` (e.g. a stop the user asked for with Ctrl-C) drops the video being
    recorded at once, unwritten, so the run can stop."""

    def __init__(self, folder: str | os.PathLike, every: int, seed: int = 0,
                 should_stop: Callable[[], bool] | None = None,
                 sinks: Sequence[Callable[[list[Any], int, float], None]] = ()) -> None:
        if every < 1:
            raise ValueError(f"video every={every} must be >= 1 iteration")
        self.folder, self.every, self.seed, self.should_stop = Path(folder), every, seed, should_stop
        self.sinks = list(sinks)
        """Called as ``sink(frames, step, fps)`` with each video's frames (a run's loggers that take videos)."""
        self.written: list[Path] = []
        self.failed = False

    def check(self, config: Any) -> None:
        """Refuse now what would fail at the first video: an env without ``rgb_array`` frames, no moviepy."""
        import importlib.util

        if importlib.util.find_spec("moviepy") is None:
            raise VideoError("videos need moviepy: pip install 'ppo_td[video]'")
        env = render_env(acting_config(config.env))
        try:
            _reset(env, 0, config.env.env_id, render=True)  # pygame or an OpenGL backend missing shows here, not
            # at the first video
        finally:
            env.close()

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        if metrics["iteration"] % self.every:
            return
        from ppo_td.deploy.policy import policy_of

        if self.failed:
            return
        prefix = f"iter_{metrics['iteration']:06d}"
        try:
            step = int(metrics["frames"])
            videos = record_video(policy_of(pipeline), self.folder, seed=self.seed, name_prefix=prefix,
                                  should_stop=self.should_stop,
                                  on_frames=lambda frames, fps: [sink(frames, step, fps) for sink in self.sinks])
        except Exception as err:  # noqa: BLE001 - a video must never cost the training run
            self.failed = True
            print(f"warning: no more videos this run: the one at iteration {metrics['iteration']} failed "
                  f"({type(err).__name__}: {err})", file=sys.stderr)
            return
        self.written += [video.path for video in videos]
