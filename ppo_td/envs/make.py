"""A config -> a built env: the source that takes it (:mod:`ppo_td.envs.sources`), then ppo_td's standard layers
(:mod:`ppo_td.envs.layers`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torchrl.envs import Compose, EnvBase, Transform, TransformedEnv

from ppo_td.config import EnvConfig
from ppo_td.envs import layers, sources
from ppo_td.envs.custom import UserTransform, from_config
from ppo_td.envs.description import BuiltEnv
from ppo_td.envs.transforms import RunningObsNorm


def make_env(config: EnvConfig, seed: int | None = None, gamma: float = 0.99) -> TransformedEnv:
    """``config.num_envs`` copies of a Gymnasium env as one batched TorchRL env (see :func:`build_env`).

    Example:
        >>> env = make_env(EnvConfig("CartPole-v1", num_envs=4), seed=0)
        >>> env.batch_size
        torch.Size([4])
    """
    return build_env(config, seed, gamma).env


def build_env(config: EnvConfig, seed: int | None = None, gamma: float = 0.99, *, training: bool = True,
              transforms: Sequence[UserTransform] | None = None) -> BuiltEnv:
    """Build ``config.num_envs`` copies of the env ``config`` names as one batched TorchRL env, with its parts.

    Top to bottom: the user's transforms read from the config; the first source of
    :data:`ppo_td.envs.sources.SOURCES` that takes the config builds the copies (VMAS, PettingZoo, a TorchRL env,
    EnvPool, else Gymnasium); :mod:`ppo_td.envs.layers` adds ppo_td's standard layers. For a Gymnasium env:
    the copies run in this process without autoreset: TorchRL resets finished envs
    itself, so ``("next", "observation")`` is the true final observation and
    time-limit truncation can be bootstrapped. Where Gymnasium has a numpy-vectorized
    implementation (CartPole-v1) all copies step as arrays (:mod:`ppo_td.vector`);
    otherwise a synchronous vector env steps each copy, wrapped so an exception in its
    ``step`` names the env id and step (:class:`EnvStepError`) and Box actions are
    clipped to their bounds (``clip_actions``). Transforms, in order:

    - ``FiniteCheck``: NaN/inf guard on the raw output (``check_finite``);
    - ``MaskCheck`` + ``ActionMask``: the action mask, validated and cast to bool, and the action
      spec that follows it (when observations carry ``action_mask``, see ``EnvConfig.action_mask``);
    - ``DoubleToFloat``: float64 observations to float32;
    - ``RunningObsNorm``: observation normalization and clipping (``normalize_observations``);
    - ``StepCounter``, ``RewardSum``: episode length and (raw) return;
    - ``ReturnScaling``: reward scaling by the discounted return's std, with ``gamma`` (``normalize_rewards``).

    The user's transforms (``env.transforms``, then ``env.train_transforms`` unless ``training`` is False; or
    ``transforms``, made from Python objects: :mod:`ppo_td.envs.custom`) come after ``RewardSum``, so returns stay
    raw, and before ``RunningObsNorm``, which normalizes what they make.

    Returns the :class:`~ppo_td.envs.BuiltEnv`: the TorchRL env, the Gymnasium vector env
    under it (what ppo_td's fast collector steps), the stateful transforms and the
    env's :class:`~ppo_td.envs.EnvDescription`.
    """
    users = [u for u in (from_config(config.transforms, config.train_transforms) if transforms is None
                         else transforms) if training or u.evaluation]
    base = sources.build(config, seed)  # by the first source of ppo_td.envs.sources.SOURCES that takes the config
    if config.multiagent:
        return layers.agents(config, base)
    return layers.one_agent(config, base, users, seed, gamma)


def find_transform(env: EnvBase, cls: type) -> Transform | None:
    """The first transform of type ``cls`` in ``env``'s transform stack, or None."""
    transform = getattr(env, "transform", None)
    stack = list(transform) if isinstance(transform, Compose) else [transform] if transform is not None else []
    return next((t for t in stack if isinstance(t, cls)), None)


def observation_stats(env: BuiltEnv | EnvBase) -> dict[str, Any] | None:
    """State of ``env``'s observation normalizer (None without one): what evaluation must reuse, frozen."""
    norm = env.obs_norm if isinstance(env, BuiltEnv) else find_transform(env, RunningObsNorm)
    return norm.state_dict() if norm is not None else None
