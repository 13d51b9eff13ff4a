"""Videos of a trained policy: Gymnasium's ``RecordVideo`` around the env rendering ``rgb_array`` frames."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from ppo_td.config import EnvConfig
from ppo_td.deploy.policy import Policy
from ppo_td.envs import episode_limit, gym_env

DEFAULT_STEP_CAP = 100_000


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


def record_video(policy: Policy, folder: str | os.PathLike, *, episodes: int = 1, seed: int = 0,
                 name_prefix: str = "episode", deterministic: bool | None = None) -> list[tuple[Path, float]]:
    """Run ``episodes`` episodes of ``policy`` on its env rendering ``rgb_array`` frames and write one video
    each into ``folder`` (Gymnasium's ``RecordVideo``: MP4 through moviepy, the ``video`` extra). The first episode
    starts from ``reset(seed=seed)``. Returns each video file with its episode's return."""
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    folder = Path(folder)
    env = render_env(policy.config.env)
    try:
        env = gym.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda _: True, name_prefix=name_prefix,
                                       disable_logger=True)
    except gym.error.DependencyNotInstalled as err:
        env.close()
        raise VideoError(f"videos need moviepy: pip install 'ppo_td[video]' ({err})") from err
    limit = episode_limit(policy.config.env) or DEFAULT_STEP_CAP
    out: list[tuple[Path, float]] = []
    try:
        for episode in range(episodes):
            before = set(folder.glob(f"{name_prefix}*.mp4"))
            policy.reset()
            obs, info = _reset(env, seed if episode == 0 else None, policy.config.env.env_id)
            total = 0.0
            for _ in range(limit):
                obs, reward, terminated, truncated, info = env.step(_act(policy, obs, info, deterministic))
                total += float(reward)
                if terminated or truncated:
                    break
            env.stop_recording()  # writes the file now (not at the next reset)
            written = sorted(set(folder.glob(f"{name_prefix}*.mp4")) - before)
            out += [(path, total) for path in written]
    finally:
        env.close()
    return out


def _reset(env: gym.Env, seed: int | None, env_id: str) -> tuple[Any, dict]:
    try:
        return env.reset(seed=seed)  # RecordVideo renders the first frame here
    except Exception as err:
        if "OpenGL" not in str(err) and "GL" not in type(err).__name__:
            raise
        raise VideoError(f"env {env_id!r} could not render off-screen: {str(err).splitlines()[0]}. Without a display, "
                         "choose MuJoCo's headless OpenGL backend: MUJOCO_GL=egl (or osmesa)") from err


def headless_rendering() -> None:
    """For ppo-td's own commands (never on import): without a display, MuJoCo renders through EGL and pygame
    without a window system, unless the user chose otherwise (``MUJOCO_GL``, ``SDL_VIDEODRIVER``), so ``--video``
    works on a server as it does on a desktop."""
    if os.environ.get("DISPLAY"):
        return
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame's frames (classic control) need no window system


def _act(policy: Policy, obs: Any, info: dict, deterministic: bool | None) -> Any:
    mask = info.get("action_mask") if policy.layout.mask_from_info else None
    return policy(obs, action_mask=mask, deterministic=deterministic)


class VideoRecorder:
    """Training callback: every ``every`` iterations, a video of one evaluation episode of the current policy (its
    mode, from ``reset(seed=seed)``) in ``folder`` (``iter_NNNNNN-episode-0.mp4``). The recording's time counts in
    the run's training time."""

    def __init__(self, folder: str | os.PathLike, every: int, seed: int = 0) -> None:
        if every < 1:
            raise ValueError(f"video every={every} must be >= 1 iteration")
        self.folder, self.every, self.seed = Path(folder), every, seed
        self.written: list[Path] = []

    def check(self, config: Any) -> None:
        """Refuse now what would fail at the first video: an env without ``rgb_array`` frames, no moviepy."""
        import importlib.util

        if importlib.util.find_spec("moviepy") is None:
            raise VideoError("videos need moviepy: pip install 'ppo_td[video]'")
        render_env(config.env).close()

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        if metrics["iteration"] % self.every:
            return
        from ppo_td.deploy.policy import policy_of

        policy = policy_of(pipeline)
        prefix = f"iter_{metrics['iteration']:06d}"
        self.written += [path for path, _ in record_video(policy, self.folder, seed=self.seed, name_prefix=prefix)]
