"""Gymnasium id -> batched TorchRL env with the transforms PPO needs."""

from __future__ import annotations

import dataclasses
import difflib
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torchrl.envs import (
    ActionMask,
    Compose,
    DoubleToFloat,
    EnvBase,
    GymWrapper,
    RewardClipping,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs.atari import FRAME_SKIP, atari_wrappers, import_ale
from ppo_td.envs.custom import UserTransform, from_config, initialize_statistics, needing_statistics, with_statistics
from ppo_td.envs.description import BuiltEnv, describe, observation_space
from ppo_td.envs.imports import env_kwargs_of, import_attr, import_from_cwd, register_minatar
from ppo_td.envs.info import InfoReader, watched
from ppo_td.envs.masking import MASK_KEY, InfoMaskToObservation, MaskCheck
from ppo_td.envs.torchrl_envs import batched, close, observation_transforms, torchrl_factory
from ppo_td.envs.transforms import FiniteCheck, IndexObservations, ReturnScaling, RunningObsNorm
from ppo_td.envs.vector import PartialResetCartPole, numpy_vectorized
from ppo_td.envs.wrappers import (
    NestObservation,
    StepErrorContext,
    StepLimit,
    clip_box_actions,
    needs_nesting,
    unencodable,
)


def _check_env_id(env_id: str) -> None:
    """Known id, Gymnasium's ``module:EnvId`` form whose module registers it when imported (that
    form also reaches worker processes, which do not share this process's registrations), or
    ``module:function``, a factory returning one env copy (see :func:`env_factory`)."""
    register_packaged(env_id)
    module, sep, name = env_id.rpartition(":")
    if sep:
        try:
            import_from_cwd(module)
        except ImportError as err:
            raise ValueError(f"env id {module}:{name}: cannot import {module!r} ({err}); it must be importable "
                             "from the current folder or PYTHONPATH where training runs (and in every worker)") from err
    if name in gym.registry or env_factory(env_id) is not None:
        return
    close = difflib.get_close_matches(name, list(gym.registry), n=3)
    hint = f" Close matches: {close}." if close else ""
    raise ValueError(
        f"unknown Gymnasium env id {name!r}.{hint} Check the spelling and version suffix, "
        "or import the package that registers it before building the env"
        + (f" (or give module:function, a function of {module!r} returning the env)." if sep else ".")
    )


def register_packaged(env_id: str) -> None:
    """Register the ids of a package that does not register them by itself for Gymnasium's ``module:EnvId`` form:
    Atari's ``ALE/...`` (``ale_py`` registers them on import) and ``MinAtar/...`` (``minatar.gym.register_envs``).
    Called where an id is first read, so every process (workers, evaluation, a resume) registers them too."""
    import_ale(env_id)
    register_minatar(env_id)


def env_factory(env_id: str) -> Callable[..., gym.Env] | None:
    """The user's env factory when ``env_id`` is ``module:function`` (or ``module:Class``) naming a callable of
    that module rather than a registered id: each env copy is ``function(**env.kwargs)``. None otherwise."""
    module, sep, name = env_id.rpartition(":")
    if not sep or name in gym.registry:
        return None
    try:
        import_from_cwd(module)
    except ImportError:
        return None
    found = getattr(sys.modules[module], name, None)
    return found if callable(found) and not isinstance(found, gym.Env) else None


def episode_limit(config: EnvConfig) -> int | None:
    """The env's time limit: ``max_episode_steps``, else the registered one (None for a factory without one)."""
    if config.max_episode_steps is not None or config.multiagent or env_factory(config.env_id) is not None:
        return config.max_episode_steps
    return gym.spec(config.env_id.rpartition(":")[2]).max_episode_steps


def own_step_limit(config: EnvConfig) -> int | None:
    """The steps after which the env ends an episode by itself: its time limit (:func:`episode_limit`), else an
    Atari game's (ALE's ``max_num_frames_per_episode`` over ppo_td's frame skip); None for an env whose episodes
    may never end."""
    register_packaged(config.env_id)
    limit = episode_limit(config)
    if limit is not None or not config.atari or env_factory(config.env_id) is not None:
        return limit
    kwargs = {**gym.spec(config.env_id.rpartition(":")[2]).kwargs, **env_kwargs_of(config)}
    frames = kwargs.get("max_num_frames_per_episode")
    return -(-int(frames) // FRAME_SKIP) if frames else None


def ends_episodes(config: EnvConfig) -> bool:
    """Whether the env ends its episodes by itself: a time limit ppo_td reads (:func:`own_step_limit`), or a
    factory's env with Gymnasium's ``TimeLimit`` in its wrappers (one copy is made to look)."""
    if own_step_limit(config) is not None:
        return True
    if config.suite == "pettingzoo":  # a PettingZoo env with a step limit of its own (MPE's max_cycles)
        return _pettingzoo_cycles(config) is not None
    factory = env_factory(config.env_id)
    if factory is None or config.multiagent:
        return False
    env = factory(**env_kwargs_of(config))
    try:
        if not isinstance(env, gym.Env):
            return False
        layer = env
        while isinstance(layer, gym.Wrapper):
            if isinstance(layer, (gym.wrappers.TimeLimit, StepLimit)):
                return True
            layer = layer.env
        return env.spec is not None and env.spec.max_episode_steps is not None
    finally:
        env.close()


def _pettingzoo_cycles(config: EnvConfig) -> int | None:
    """The ``max_cycles`` of a PettingZoo env (MPE and butterfly envs end their episodes there), or None."""
    from ppo_td.envs.multiagent import pettingzoo_maker

    try:
        env = pettingzoo_maker(config.env_id)(**env_kwargs_of(config))
    except Exception:  # noqa: BLE001 - the env's own error is said where it is built
        return None
    try:
        cycles = getattr(env.unwrapped, "max_cycles", None)
        return cycles if isinstance(cycles, int) and cycles > 0 else None
    finally:
        env.close()


def _check_spaces(env_id: str, vec: gym.vector.VectorEnv) -> None:
    action_space = vec.single_action_space
    box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    multi = isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.nvec.shape) == 1
    if not (isinstance(action_space, gym.spaces.Discrete) or box or multi):
        raise ValueError(
            f"env {env_id!r} has action space {action_space}; ppo_td's policies handle Discrete actions "
            "(Categorical), 1-D MultiDiscrete actions and 1-D Box actions (Gaussian). Wrap the env to expose one."
        )
    if box and not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        raise ValueError(f"env {env_id!r} has unbounded Box actions {action_space}; ppo_td needs finite bounds")
    obs_space = vec.single_observation_space
    if isinstance(obs_space, gym.spaces.Dict) and keys.OBSERVATION in obs_space.spaces:
        obs_space = obs_space[keys.OBSERVATION]  # as NestObservation or InfoMaskToObservation put it
    bad = unencodable(obs_space)
    if bad:
        raise ValueError(
            f"env {env_id!r}: its {bad}, which no encoder reads (ppo_td encodes Box, Discrete, MultiDiscrete, "
            "MultiBinary, and Dict and Tuple spaces of those). Drop that entry or turn it into one of those in a "
            "wrapper (env.wrappers, e.g. a gymnasium.wrappers.FilterObservation subclass)"
        )


def _nvec_of(space: gym.Space) -> list[int]:
    return [int(space.n)] if isinstance(space, gym.spaces.Discrete) else [int(n) for n in space.nvec]


def _mask_size(space: gym.Space) -> int:
    return sum(_nvec_of(space))


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
    """Build ``config.num_envs`` copies of a Gymnasium env as one batched TorchRL env, with its parts.

    The copies run in this process without autoreset: TorchRL resets finished envs
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
    if config.multiagent:  # TorchRL's VMAS / PettingZoo wrappers (ppo_td.envs.multiagent)
        from ppo_td.envs.multiagent import build_agents_env

        return build_agents_env(config, seed)
    _check_env_id(config.env_id)
    torchrl = torchrl_factory(env_factory(config.env_id), env_kwargs_of(config))
    if torchrl is not None:
        return _build_torchrl(config, torchrl, seed, gamma, training, transforms)
    if config.observation_keys:
        raise ValueError(f"env.observation_keys={list(config.observation_keys)} chooses a TorchRL env's entries; "
                         f"{config.env_id!r} is a Gymnasium env: choose its Dict entries with a wrapper "
                         "(env.wrappers, e.g. a gymnasium.wrappers.FilterObservation subclass)")
    vec = _make_vector_env(config)
    try:
        _check_spaces(config.env_id, vec)
    except ValueError:
        vec.close()
        raise
    base = GymWrapper(vec, categorical_action_encoding=True)
    # the env's info values per copy (env.info_keys, and is_success unasked), in its own step (ppo_td.envs.info)
    base.set_info_dict_reader(InfoReader(watched(config.info_keys), config.num_envs, asked=config.info_keys))
    stack: list = [FiniteCheck(config.env_id)] if config.check_finite else []
    indices = _multi_discrete_entries(vec.single_observation_space)
    if indices:
        stack.insert(0, IndexObservations(indices))
    if config.action_mask != "none" and MASK_KEY in base.observation_spec.keys():
        stack.append(MaskCheck(config.env_id, _nvec_of(vec.single_action_space)))
        if isinstance(vec.single_action_space, gym.spaces.Discrete):
            stack.append(ActionMask(action_key=keys.ACTION, mask_key=MASK_KEY))  # the spec half
    elif config.action_mask == "observation":
        raise ValueError(f"env {config.env_id!r} has no {MASK_KEY!r} observation entry (env.action_mask="
                         "'observation'); use 'info' if the env puts the mask in info, or 'none'")
    doubles = [k for k, spec in base.observation_spec.items(True, True)
               if k != MASK_KEY and spec.dtype == torch.float64]
    if doubles:
        stack.append(DoubleToFloat() if doubles == [keys.OBSERVATION] else DoubleToFloat(in_keys=doubles))
    users = [u for u in (from_config(config.transforms, config.train_transforms) if transforms is None
                         else transforms) if training or u.evaluation]
    if users:
        return _with_user_transforms(config, seed, gamma, vec, base, stack, users, vec.close)
    obs_norm = scaling = None
    if config.normalize_observations:
        space = observation_space(base.observation_spec[keys.OBSERVATION], 1)  # before DoubleToFloat
        if not (space.kind == "vector" and len(space.shape) == 1 and space.dtype in ("float32", "float64")):
            vec.close()
            raise ValueError(f"env {config.env_id!r}: env.normalize_observations standardizes float vector "
                             f"observations, and this one is {space}. Set it to False (images are scaled by 1/255 "
                             "in the encoder), or flatten the observation in a wrapper")
        obs_dim = base.observation_spec[keys.OBSERVATION].shape[-1]
        obs_norm = RunningObsNorm(obs_dim, clip=config.obs_clip)
        stack.append(obs_norm)
    stack += [StepCounter(), RewardSum()]
    if config.atari:  # after RewardSum: returns count the raw score
        stack.append(RewardClipping(-1.0, 1.0))
    if config.normalize_rewards:
        scaling = ReturnScaling(gamma=gamma, clip=config.reward_clip)
        stack.append(scaling)
    try:
        env = TransformedEnv(base, Compose(*stack))
        if seed is not None:
            env.set_seed(seed)
        return BuiltEnv(env=env, vector=vec, description=describe(env), obs_norm=obs_norm, return_scaling=scaling,
                        config=config)
    except BaseException:
        vec.close()
        raise


def _build_torchrl(config: EnvConfig, factory: Callable[[], EnvBase], seed: int | None, gamma: float,
                   training: bool, transforms: Sequence[UserTransform] | None) -> BuiltEnv:
    """``config.num_envs`` copies of the TorchRL env ``factory`` makes (:mod:`ppo_td.envs.torchrl_envs`): its
    observation entries as one ``"observation"``, then the stack of :func:`_with_user_transforms` (no Gymnasium
    vector env: TorchRL's ``Collector`` steps it)."""
    said: list[str] = []
    if config.info_keys:
        raise ValueError(f"env.info_keys={list(config.info_keys)} reads a Gymnasium env's info; {config.env_id} is a "
                         "TorchRL env, whose values are in its TensorDict: write them with a transform, or leave "
                         "env.info_keys empty")
    env = batched(with_statistics(factory, f"env {config.env_id}", said), config.num_envs, config.env_id)
    try:
        first, read = observation_transforms(env, config.observation_keys)
    except BaseException:
        close(env)
        raise
    if config.check_finite:
        first.append(FiniteCheck(config.env_id))
    notes = [*said, *([f"env {config.env_id}: {read}"] if read else [])]
    if config.max_episode_steps is None:
        notes.append(f"env {config.env_id} is a TorchRL env without a time limit ppo_td can read: its episodes end "
                     "only when it says so (set env.max_episode_steps to truncate them)")
    users = [u for u in (from_config(config.transforms, config.train_transforms) if transforms is None
                         else transforms) if training or u.evaluation]
    built = _with_user_transforms(config, seed, gamma, None, env, first, users, lambda: close(env),
                                  limit=config.max_episode_steps)
    built.notes = notes + built.notes
    return built


def _with_user_transforms(config: EnvConfig, seed: int | None, gamma: float, vec: gym.vector.VectorEnv | None,
                          base: EnvBase, first: list, users: list[UserTransform], close: Callable[[], None],
                          limit: int | None = None) -> BuiltEnv:
    """:func:`build_env`'s stack with the user's transforms: ppo_td's checks and casts, ``StepCounter`` (truncating
    at ``limit``) and ``RewardSum``, the user's, then the normalizers (of what the user's transforms made) and
    Atari's reward clip."""
    try:
        env = TransformedEnv(base, Compose(*first, StepCounter(max_steps=limit), RewardSum()))
        made, notes = [], []
        for user in users:
            transform = user.make()
            env.append_transform(transform)
            made.append(transform)
            if needing_statistics(transform):
                if seed is not None:  # the random steps are the seed's: a rebuild gets the same statistics
                    env.set_seed(seed)
                setting = "env.transforms" if user.evaluation else "env.train_transforms"
                notes.append(initialize_statistics(transform, f"{setting} {user.name}", env.batch_size.numel(), seed))
        obs_norm = scaling = None
        if config.normalize_observations:
            spec = env.observation_spec.get(keys.OBSERVATION, None)
            space = observation_space(spec, 1) if spec is not None else None
            if space is None or not (space.kind == "vector" and len(space.shape) == 1):
                raise ValueError(f"env {config.env_id!r}: env.normalize_observations standardizes a float vector "
                                 f"'observation', and after the env's transforms it is {space}. Set it to False, or "
                                 "make the transforms emit one")
            obs_norm = RunningObsNorm(spec.shape[-1], clip=config.obs_clip)
            env.append_transform(obs_norm)
        if config.atari:
            env.append_transform(RewardClipping(-1.0, 1.0))
        if config.normalize_rewards:
            scaling = ReturnScaling(gamma=gamma, clip=config.reward_clip)
            env.append_transform(scaling)
        if seed is not None:
            env.set_seed(seed)
        return BuiltEnv(env=env, vector=vec, description=describe(env), obs_norm=obs_norm, return_scaling=scaling,
                        config=config, user_transforms=tuple(zip(users, made, strict=True)), notes=notes)
    except BaseException:  # the copies (a SerialEnv's, an AsyncVectorEnv's processes) do not outlive the error
        close()
        raise


def _make_vector_env(config: EnvConfig) -> gym.vector.VectorEnv:
    """Gymnasium's numpy-vectorized implementation where ppo_td can step it (``vectorization``), else
    a synchronous vector env of per-copy envs, each wrapped for error context and action clipping.

    The per-copy envs are made without Gymnasium's ``TimeLimit``: :class:`StepLimit` takes its place (same
    semantics, public step count), so a checkpoint can record where each episode is.
    """
    if config.vectorization == "numpy" or (config.vectorization == "auto" and _plain_numpy(config)):
        if not _plain_numpy(config):
            raise ValueError(f"env {config.env_id!r} has no numpy-vectorized implementation ppo_td can step "
                             "(Gymnasium 1.x has one for CartPole-v1, without env.kwargs or env.wrappers); use "
                             "env.vectorization='sync'")
        kwargs = {} if config.max_episode_steps is None else {"max_episode_steps": config.max_episode_steps}
        vec = gym.make_vec(config.env_id, num_envs=config.num_envs, vectorization_mode="vector_entry_point",
                           **kwargs)
        return PartialResetCartPole(vec)
    if config.vectorization == "envpool":  # Atari in EnvPool's threads, its preprocessing set to ppo_td's
        from ppo_td.envs.envpool import envpool_atari

        return envpool_atari(config, env_kwargs_of(config))
    wrappers: list = [partial(StepErrorContext, env_id=config.env_id)]  # ppo_td's, around the user's env
    if config.clip_actions:
        wrappers.append(clip_box_actions)
    if config.action_mask in ("auto", "info") and _mask_in_info(config, partial(gym_env, config)):
        wrappers.append(lambda e: InfoMaskToObservation(e, _mask_size(e.action_space)))
    wrappers.append(_nest_if_needed)

    def make_copy() -> gym.Env:
        env = gym_env(config)
        for wrapper in wrappers:
            env = wrapper(env)
        return env
    if config.vectorization == "async":
        return gym.vector.AsyncVectorEnv([partial(_in_worker, make_copy)] * config.num_envs, shared_memory=True,
                                         autoreset_mode=AutoresetMode.DISABLED)
    return gym.vector.SyncVectorEnv([make_copy] * config.num_envs, autoreset_mode=AutoresetMode.DISABLED)


def _in_worker(make_copy: Callable[[], gym.Env]) -> gym.Env:
    """One env copy in an ``AsyncVectorEnv`` worker process: Ctrl-C is the learner's to handle (it finishes the
    iteration and checkpoints), so the worker, in the terminal's process group too, ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return make_copy()


def _plain_numpy(config: EnvConfig) -> bool:
    """Gymnasium's numpy-vectorized env applies: an id it has one for, without kwargs, wrappers or a factory."""
    return (not (config.kwargs or config.wrappers or config.atari) and env_factory(config.env_id) is None
            and numpy_vectorized(config.env_id))


def gym_env(config: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """One copy of the env as the user sees it: the registered env or the factory's, with ``env.kwargs``, the
    user's ``env.wrappers`` (and the Atari preprocessing) and the time limit, but none of ppo_td's adapters.

    Its observations are what :class:`ppo_td.deploy.Policy` takes and its actions what the policy gives; ppo_td's
    vector env adds error context, action clipping, the mask lift and nesting around copies of it.
    ``render_mode`` (e.g. ``"rgb_array"`` for videos) is passed to ``gymnasium.make`` or the factory.
    """
    _check_env_id(config.env_id)
    factory = env_factory(config.env_id)
    limit = episode_limit(config)
    kwargs = env_kwargs_of(config)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if factory is None:
        spec = dataclasses.replace(gym.spec(config.env_id.rpartition(":")[2]), max_episode_steps=None)
        env = gym.make(spec, disable_env_checker=True, **kwargs)
    else:
        env = factory(**kwargs)
        if isinstance(env, EnvBase):
            env.close()
            raise ValueError(f"env {config.env_id} is a TorchRL env: this needs a Gymnasium env (one copy as "
                             "Gymnasium gives it, for a Policy or a video); evaluate TorchRL envs with ppo-td eval "
                             "or ppo_td.training.evaluate, and act with the TensorDict actor (ppo_td.persist."
                             "load_actor)")
        if not isinstance(env, gym.Env):
            raise TypeError(f"env factory {config.env_id} returned a {type(env).__name__}; it must return one "
                            "gymnasium.Env (ppo_td makes env.num_envs copies)")
    for path in config.wrappers:
        env = import_attr(path, "env.wrappers")(env)
    if config.atari:
        env = atari_wrappers(env, episodic_life=config.episodic_life)
    return StepLimit(env, max_episode_steps=limit) if limit is not None else env


def _multi_discrete_entries(space: gym.Space, key: tuple[str, ...] = ()) -> dict:
    """Keys of the observation's ``MultiDiscrete`` entries (as GymWrapper names them) -> their ``nvec``."""
    if isinstance(space, gym.spaces.Dict):
        return {k: v for name, sub in space.spaces.items() if name != MASK_KEY or key
                for k, v in _multi_discrete_entries(sub, (*key, name)).items()}
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        name = key if key else (keys.OBSERVATION,)
        return {name[0] if len(name) == 1 else name: tuple(int(n) for n in space.nvec)}
    return {}


def _nest_if_needed(env: gym.Env) -> gym.Env:
    return NestObservation(env) if needs_nesting(env.observation_space) else env


def _mask_in_info(config: EnvConfig, make_one: Callable[[], gym.Env]) -> bool:
    """Whether the env gives its action mask in ``info["action_mask"]`` (Gymnasium's convention, e.g. Taxi):
    one copy is made and reset to see. ``action_mask='info'`` on an env without one is refused."""
    env = make_one()
    try:
        obs_space, action_space = env.observation_space, env.action_space
        in_obs = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        found = False
        if isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)) and not in_obs:
            try:
                found = MASK_KEY in env.reset(seed=0)[1]
            except Exception:
                if config.action_mask == "info":
                    raise
                # the env's own reset reports this with the env id and seed (StepErrorContext)
    finally:
        env.close()
    if config.action_mask == "info" and not found:
        raise ValueError(f"env {config.env_id!r} has no {MASK_KEY!r} in the info of its reset (env.action_mask='info')"
                         f"{'; its mask is in the observation: use auto' if in_obs else ''}; use env.action_mask="
                         "'auto' (finds a mask in the observation or the info) or 'none'")
    return found


def find_transform(env: EnvBase, cls: type) -> Transform | None:
    """The first transform of type ``cls`` in ``env``'s transform stack, or None."""
    transform = getattr(env, "transform", None)
    stack = list(transform) if isinstance(transform, Compose) else [transform] if transform is not None else []
    return next((t for t in stack if isinstance(t, cls)), None)


def observation_stats(env: BuiltEnv | EnvBase) -> dict[str, Any] | None:
    """State of ``env``'s observation normalizer (None without one): what evaluation must reuse, frozen."""
    norm = env.obs_norm if isinstance(env, BuiltEnv) else find_transform(env, RunningObsNorm)
    return norm.state_dict() if norm is not None else None
