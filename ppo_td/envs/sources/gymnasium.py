"""Gymnasium envs (a registered id, ``module:EnvId``, a factory ``module:function``; Atari and MinAtar ids
included): ``env.num_envs`` copies in a Gymnasium vector env (the numpy-vectorized CartPole, or synchronous or
asynchronous copies each wrapped for error context, action clipping, the mask lift and nesting), in TorchRL's
``GymWrapper`` with ppo_td's info reader, then the source's own first transforms: multi-discrete entries indexed,
the finite check, the action mask, float64 cast to float32."""

from __future__ import annotations

import copy
import multiprocessing
import signal
from collections.abc import Callable
from functools import partial

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torchrl.envs import ActionMask, DoubleToFloat, EnvBase, GymWrapper

from ppo_td import keys
from ppo_td.config import EnvConfig
from ppo_td.envs.atari import atari_wrappers
from ppo_td.envs.games import GAME_DEFAULTS, TurnBased, fixed_opponents, is_turn_based, opponents_named
from ppo_td.envs.ids import EnvId, env_factory, resolve
from ppo_td.envs.imports import env_kwargs_of, import_attr, split_entry
from ppo_td.envs.info import InfoReader
from ppo_td.envs.masking import MASK_KEY, MaskCheck
from ppo_td.envs.sources.base import Base
from ppo_td.envs.transforms import FiniteCheck, IndexObservations
from ppo_td.envs.vector import PartialResetCartPole, numpy_vectorized
from ppo_td.envs.wrappers import StepLimit, adapted, unencodable


def build(config: EnvConfig, env_id: EnvId, seed: int | None) -> Base:
    """``config.num_envs`` copies of the env ``env_id`` names as one batched TorchRL env (:func:`vector_env`, then
    :func:`wrap`; ``seed`` is the standard layers')."""
    check(config)
    return wrap(config, vector_env(config, env_id))


def check(config: EnvConfig) -> None:
    """No setting that only a TorchRL env reads (the id itself is checked where it is read, :func:`~ppo_td.envs.ids.
    resolve`)."""
    if config.observation_keys:
        raise ValueError(f"env.observation_keys={list(config.observation_keys)} chooses a TorchRL env's entries; "
                         f"{config.env_id!r} is a Gymnasium env: choose its Dict entries with a wrapper "
                         "(env.wrappers, e.g. a gymnasium.wrappers.FilterObservation subclass)")
    if config.observation_dict:
        raise ValueError(f"env.observation_dict keeps a TorchRL env's entries apart; {config.env_id!r} is a Gymnasium "
                         "env, whose Dict observation stays a Dict already: leave env.observation_dict off")
    if opponents_named(config):  # one copy made to see that it is a turn-based game (copy_maker refuses others)
        copy_maker(config)().close()


def wrap(config: EnvConfig, vec: gym.vector.VectorEnv) -> Base:
    """A Gymnasium vector env of ``config``'s copies in TorchRL's ``GymWrapper`` (the env's info values read in its
    own step: ``env.info_keys``, and ``is_success`` unasked), with the first transforms (closes ``vec`` on error)."""
    try:
        _check_spaces(config.env_id, vec)
        base = GymWrapper(vec, categorical_action_encoding=True)
        base.set_info_dict_reader(InfoReader.for_env(config.info_keys, config.num_envs))
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
    except BaseException:
        vec.close()
        raise
    return Base(env=base, close=vec.close, first=stack, vector=vec)


def ends_by_itself(config: EnvConfig) -> bool:
    """Whether a factory's env ends its episodes by itself: Gymnasium's ``TimeLimit`` (or ppo_td's ``StepLimit``)
    in its wrappers, or a spec with a limit (one copy is made to look). False for a registered id (its limit is
    read from the registry) and for a factory making a TorchRL env."""
    factory = None if config.multiagent else env_factory(config.env_id)
    if factory is None:
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


def vector_env(config: EnvConfig, env_id: EnvId | None = None) -> gym.vector.VectorEnv:
    """Gymnasium's numpy-vectorized implementation where ppo_td can step it (``vectorization``), else
    a synchronous vector env of per-copy envs, each wrapped for error context and action clipping.

    The per-copy envs are made without Gymnasium's ``TimeLimit``: :class:`StepLimit` takes its place (same
    semantics, public step count), so a checkpoint can record where each episode is. ``env_id`` is the id read
    (:func:`~ppo_td.envs.ids.resolve`; read here when not given).
    """
    env_id = env_id if env_id is not None else resolve(config, look_for_torchrl=False)
    plain_numpy = _plain_numpy(config, env_id)
    if config.vectorization == "numpy" or (config.vectorization == "auto" and plain_numpy):
        if not plain_numpy:
            raise ValueError(f"env {config.env_id!r} has no numpy-vectorized implementation ppo_td can step "
                             "(Gymnasium 1.x has one for CartPole-v1, without env.kwargs or env.wrappers); use "
                             "env.vectorization='sync'")
        kwargs = {} if config.max_episode_steps is None else {"max_episode_steps": config.max_episode_steps}
        vec = gym.make_vec(config.env_id, num_envs=config.num_envs, vectorization_mode="vector_entry_point",
                           **kwargs)
        return PartialResetCartPole(vec)
    one = copy_maker(config, env_id=env_id)
    lift_mask = config.action_mask in ("auto", "info") and _mask_in_info(config, one)
    # in this process, copies from the id resolved once; in an AsyncVectorEnv's workers, each copy resolves the id
    # itself (the worker imports the user's module, and no resolved factory or spec has to be pickled to it)
    user_env = one if config.vectorization != "async" else partial(gym_env, config)

    def make_copy() -> gym.Env:  # ppo_td's adapters around the user's env
        return adapted(user_env(), config.env_id, clip_actions=config.clip_actions, lift_mask=lift_mask)
    if config.vectorization == "async":
        return gym.vector.AsyncVectorEnv([partial(_in_worker, make_copy)] * config.num_envs, shared_memory=True,
                                         autoreset_mode=AutoresetMode.DISABLED)
    return gym.vector.SyncVectorEnv([make_copy] * config.num_envs, autoreset_mode=AutoresetMode.DISABLED)


def _in_worker(make_copy: Callable[[], gym.Env]) -> gym.Env:
    """One env copy for an ``AsyncVectorEnv``: in a worker process, Ctrl-C is the learner's to handle (it finishes
    the iteration and checkpoints), so the worker, in the terminal's process group too, ignores it. Gymnasium also
    makes one copy in the learner itself (to read the spaces), which keeps its Ctrl-C."""
    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return make_copy()


def _plain_numpy(config: EnvConfig, env_id: EnvId) -> bool:
    """Gymnasium's numpy-vectorized env applies: an id it has one for, without kwargs, wrappers or a factory."""
    return (not (config.kwargs or config.wrappers or config.atari) and env_id.factory is None
            and numpy_vectorized(config.env_id))


def gym_env(config: EnvConfig, render_mode: str | None = None) -> gym.Env:
    """One copy of the env as the user sees it: the registered env or the factory's, with ``env.kwargs``, the time
    limit under the user's ``env.wrappers`` (as ``gym.make`` puts its ``TimeLimit``; over them for a record written
    before ``env.limit_under_wrappers``, and an Atari game's over ppo_td's preprocessing), but none of ppo_td's
    adapters.

    Its observations are what :class:`ppo_td.deploy.Policy` takes and its actions what the policy gives; ppo_td's
    vector env adds error context, action clipping, the mask lift and nesting around copies of it.
    ``render_mode`` (e.g. ``"rgb_array"`` for videos) is passed to ``gymnasium.make`` or the factory.
    """
    return copy_maker(config, render_mode)()


def copy_maker(config: EnvConfig, render_mode: str | None = None, env_id: EnvId | None = None
               ) -> Callable[[], gym.Env]:
    """A function making copies of :func:`gym_env`, the id (``env_id``: read here when not given), factory, limit
    and wrappers resolved once (not per copy); picklable by cloudpickle, as Gymnasium's ``AsyncVectorEnv`` sends it
    to its workers."""
    env_id = env_id if env_id is not None else resolve(config, look_for_torchrl=False)
    factory, spec, limit = env_id.factory, env_id.spec, env_id.limit
    kwargs = dict(env_id.kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    wrappers = [(import_attr(path, "env.wrappers"), arguments) for path, arguments in map(split_entry, config.wrappers)]

    def make() -> gym.Env:
        own = copy.deepcopy(kwargs)  # each copy its own values (a list an env mutates is not its siblings')
        if factory is None:
            env = gym.make(spec, disable_env_checker=True, **own)
        else:
            env = factory(**own)
            if isinstance(env, EnvBase):
                env.close()
                raise ValueError(f"env {config.env_id} is a TorchRL env: this needs a Gymnasium env (one copy as "
                                 "Gymnasium gives it, for a Policy or a video); evaluate TorchRL envs with ppo-td "
                                 "eval or ppo_td.training.evaluate, and act with the TensorDict actor (ppo_td.persist."
                                 "load_actor)")
            if is_turn_based(env):  # a PettingZoo AEC game: the learner's seat, the others played by an opponent
                env = TurnBased(env, opponent=fixed_opponents(config),
                                negative_reward_scale=config.negative_reward_scale)
            if not isinstance(env, gym.Env):
                raise TypeError(f"env factory {config.env_id} returned a {type(env).__name__}; it must return one "
                                "gymnasium.Env (ppo_td makes env.num_envs copies) or a PettingZoo AEC game")
        game = env.unwrapped
        if (isinstance(game, TurnBased) and config.negative_reward_scale != 1.0
                and game.negative_reward_scale != config.negative_reward_scale):
            env.close()
            raise ValueError(f"env.negative_reward_scale={config.negative_reward_scale!r}, but env {config.env_id} "
                             f"returned a TurnBased game weighing losses by {game.negative_reward_scale!r}: set the "
                             "weight in one place (TurnBased(..., negative_reward_scale=...) or the config)")
        named = opponents_named(config)
        if named and not isinstance(game, TurnBased):
            env.close()
            raise ValueError(f"{named}; env {config.env_id} is not one (a PettingZoo AEC game, or "
                             f"ppo_td.envs.games.TurnBased): {GAME_DEFAULTS}")
        under = limit is not None and not config.atari and config.limit_under_wrappers
        if under:  # where gym.make puts its TimeLimit: under the user's wrappers, which see it (TimeAwareObservation)
            env = StepLimit(env, max_episode_steps=limit)
        for (wrapper, arguments), entry in zip(wrappers, config.wrappers, strict=True):
            try:
                env = wrapper(env, **copy.deepcopy(arguments))
            except TypeError as err:
                raise ValueError(f"env.wrappers: {entry} failed: {err}. Check the wrapper's keyword arguments, given "
                                 "as KEY=VALUE after its path") from err
        if config.atari:  # an Atari game's limit counts the agent's steps, after the frame skip
            env = atari_wrappers(env, episodic_life=config.episodic_life)
        return StepLimit(env, max_episode_steps=limit) if limit is not None and not under else env

    return make


def _multi_discrete_entries(space: gym.Space, key: tuple[str, ...] = ()) -> dict:
    """Keys of the observation's ``MultiDiscrete`` entries (as GymWrapper names them) -> their ``nvec``."""
    if isinstance(space, gym.spaces.Dict):
        return {k: v for name, sub in space.spaces.items() if name != MASK_KEY or key
                for k, v in _multi_discrete_entries(sub, (*key, name)).items()}
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.nvec.shape) == 1:
        name = key if key else (keys.OBSERVATION,)
        return {name[0] if len(name) == 1 else name: tuple(int(n) for n in space.nvec)}
    return {}


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
