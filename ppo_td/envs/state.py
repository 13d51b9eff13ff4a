"""Env state as plain data: what a checkpoint records so that a resume steps the very same simulators,
without pickling an environment.

A resume can be exact when every layer of every env copy is one ppo_td reads and writes through public APIs:

- ppo_td's numpy-vectorized CartPole (:class:`~ppo_td.envs.PartialResetCartPole`): its state arrays;
- Gymnasium's MuJoCo envs: MuJoCo's integration state (``mj_getState`` / ``mj_setState``) and the
  kinematics the envs read before a step (body positions, contact forces, ...);
- Gymnasium's classic-control envs: their ``state`` array;
- **any env or wrapper with ``state_dict()`` and ``load_state_dict(state)`` methods**: the way to make a user
  env resume exactly (``examples/trading.py`` has them). The state holds numbers, strings, numpy arrays,
  tensors, numpy ``Generator`` objects, and lists, tuples and dicts of those;
- wrappers that hold no state (ppo_td's own, Gymnasium's observation/action/reward transforms and checkers).

Each env's ``np_random`` is recorded too. Anything else (a Box2D world, an Atari emulator, a user wrapper
that counts) cannot be read: :func:`why_not_restorable` names it and the resume continues with fresh
episodes, saying so.
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control import CartPoleEnv, MountainCarEnv, PendulumEnv

from ppo_td.envs.games import TurnBased
from ppo_td.envs.masking import InfoMaskToObservation
from ppo_td.envs.vector import PartialResetCartPole
from ppo_td.envs.wrappers import ClipToBounds, NestObservation, StepLimit

# wrappers whose behaviour depends on nothing but their construction arguments (a function given to a Transform*
# wrapper is taken to be a function of its input only: a closure that counts would not be recorded)
STATELESS_WRAPPERS: tuple[type, ...] = (
    ClipToBounds, InfoMaskToObservation, NestObservation,
    gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker,
    gym.wrappers.TransformObservation, gym.wrappers.TransformAction, gym.wrappers.TransformReward,
    gym.wrappers.ClipAction, gym.wrappers.RescaleAction, gym.wrappers.ClipReward,
    gym.wrappers.FlattenObservation, gym.wrappers.ReshapeObservation, gym.wrappers.RescaleObservation,
    gym.wrappers.DtypeObservation, gym.wrappers.FilterObservation,
)
# classic-control envs whose dynamics state is their public ``state`` array, of one dtype from reset to step, so
# it is restored in place (CartPole's ``steps_beyond_terminated`` is set only after a termination, which ppo_td
# resets at once). Acrobot's and MountainCarContinuous' arrays change dtype between reset and step: not listed.
_STATE_ARRAY_ENVS = (CartPoleEnv, PendulumEnv, MountainCarEnv)
# PartialResetCartPole's simulator arrays (CartPoleVectorEnv's public attributes)
_CARTPOLE_ARRAYS = ("state", "steps", "prev_done", "steps_beyond_terminated")
# MuJoCo data Gymnasium's envs read between steps; mj_step recomputes it from the state, but an env may read
# it before stepping (Ant's and Humanoid's rewards use the positions computed during the previous step)
_MUJOCO_DERIVED = ("xpos", "xipos", "xquat", "xmat", "ximat", "cfrc_ext", "cfrc_int", "cvel", "cinert", "cacc",
                   "ten_length", "ten_velocity", "qfrc_actuator", "qfrc_constraint", "site_xpos", "site_xmat",
                   "geom_xpos", "geom_xmat", "subtree_com", "sensordata", "actuator_force")


class UnreadableState(TypeError):
    """A state holding something a checkpoint cannot store as plain data."""


class StateMismatch(ValueError):
    """A recorded env state that does not fit the env it should be loaded into (its wrappers or limits changed)."""


def _mujoco_env(env: gym.Env) -> bool:
    if "mujoco" not in sys.modules:  # no MuJoCo env can exist
        return False
    from gymnasium.envs.mujoco import MujocoEnv

    return isinstance(env, MujocoEnv)


def _has_protocol(obj: Any) -> bool:
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _layers(env: gym.Env) -> list[gym.Env]:
    """``env``'s wrappers, outermost first, then the unwrapped env."""
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def _why_not_layer(layer: gym.Env) -> str | None:
    if _has_protocol(layer) or isinstance(layer, STATELESS_WRAPPERS):
        return None
    if isinstance(layer, gym.Wrapper):
        return (f"its wrapper {type(layer).__qualname__} may hold state ppo_td cannot read (give it "
                "state_dict()/load_state_dict(state) methods)")
    if isinstance(layer, _STATE_ARRAY_ENVS) or _mujoco_env(layer):
        return None
    if isinstance(layer, TurnBased):
        return "a PettingZoo game's state is not recorded (its games start afresh)"
    return (f"{type(layer).__module__}.{type(layer).__qualname__} exposes no state ppo_td can read (give it "
            "state_dict()/load_state_dict(state) methods, as examples/trading.py does)")


def why_not_restorable(vec: gym.vector.VectorEnv) -> str | None:
    """None when :func:`read_state` records everything ``vec``'s next steps depend on; else the reason."""
    if isinstance(vec, PartialResetCartPole):
        return None
    envs = getattr(vec, "envs", None)
    if envs is None:
        return f"{type(vec).__qualname__} steps its env copies where ppo_td cannot read them"
    for layer in _layers(envs[0]):
        why = _why_not_layer(layer)
        if why is not None:
            return why
    return None


def read_state(vec: gym.vector.VectorEnv) -> dict[str, Any]:
    """The state of every env copy of ``vec`` as plain data (tensors, numbers, strings; loadable with
    ``torch.load(weights_only=True)``). Raises :class:`UnreadableState` when a user ``state_dict`` holds
    something else. Check :func:`why_not_restorable` first."""
    if isinstance(vec, PartialResetCartPole):
        cart = vec.unwrapped
        arrays = {k: encode(getattr(cart, k)) for k in _CARTPOLE_ARRAYS if getattr(cart, k, None) is not None}
        return {"cartpole": arrays, "np_random": encode(cart.np_random)}
    return {"copies": [[_read_layer(layer) for layer in _layers(env)] for env in vec.envs],
            "layers": [type(layer).__qualname__ for layer in _layers(vec.envs[0])]}


def load_state(vec: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    """Put a :func:`read_state` back into ``vec`` (a freshly built vector env of the same env, already reset).
    Raises :class:`StateMismatch`, having loaded nothing, when the state does not fit ``vec``."""
    check_fits(vec, state)
    if isinstance(vec, PartialResetCartPole):
        cart = vec.unwrapped
        for key, value in state["cartpole"].items():
            np.copyto(getattr(cart, key), decode(value))
        cart.np_random = decode(state["np_random"])
        return
    for i, (env, layers) in enumerate(zip(vec.envs, state["copies"], strict=True)):
        for layer, layer_state in zip(_layers(env), layers, strict=True):
            try:
                _load_layer(layer, layer_state)
            except Exception as err:
                raise RuntimeError(f"loading the checkpoint's env state into copy {i}, layer "
                                   f"{type(layer).__qualname__}, failed: {err}") from err


def check_fits(vec: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    """Raise :class:`StateMismatch` when ``state`` was read from an env other than ``vec``'s (number of copies,
    wrapper classes, time limit, array shapes and dtypes): nothing is loaded then."""
    if isinstance(vec, PartialResetCartPole) != ("cartpole" in state):
        raise StateMismatch("the checkpoint's env and this env are not the same kind (numpy-vectorized or not)")
    if isinstance(vec, PartialResetCartPole):
        cart = vec.unwrapped
        for key, value in state["cartpole"].items():
            _check_array(f"CartPole's {key}", getattr(cart, key), decode(value))
        return
    copies = state["copies"]
    if len(copies) != len(vec.envs):
        raise StateMismatch(f"the checkpoint holds {len(copies)} env copies, this env has {len(vec.envs)}")
    if "layers" not in state:
        raise StateMismatch("the checkpoint's env state was written in an earlier format")
    for i, (env, layers) in enumerate(zip(vec.envs, copies, strict=True)):
        mine = _layers(env)
        names = [type(layer).__qualname__ for layer in mine]
        if names != state["layers"] or len(layers) != len(mine):
            raise StateMismatch(f"the env's wrappers changed since the checkpoint: {' > '.join(state['layers'])} "
                                f"then, {' > '.join(names)} now (copy {i})")
        for layer, layer_state in zip(mine, layers, strict=True):
            _check_layer(layer, layer_state)


def _check_layer(layer: gym.Env, state: dict[str, Any]) -> None:
    if isinstance(layer, StepLimit):
        then = decode(state.get("state_dict") or {}).get("max_episode_steps")
        if then != layer.max_episode_steps:
            raise StateMismatch(f"the time limit changed since the checkpoint: {then} steps then, "
                                f"{layer.max_episode_steps} now")
    if "state" in state:
        _check_array(f"{type(layer).__name__}'s state", layer.state, decode(state["state"]))
    if "mujoco" in state:
        import mujoco

        size = mujoco.mj_stateSize(layer.model, mujoco.mjtState.mjSTATE_INTEGRATION)
        if state["mujoco"].numel() != size:
            raise StateMismatch(f"{type(layer).__name__}'s MuJoCo state has {state['mujoco'].numel()} numbers in the "
                                f"checkpoint, {size} in this env (another model or MuJoCo version)")
        for key, value in state["derived"].items():
            _check_array(f"{type(layer).__name__}'s {key}", getattr(layer.data, key, None), decode(value))


def _check_array(what: str, current: Any, recorded: np.ndarray) -> None:
    if not isinstance(current, np.ndarray) or current.shape != recorded.shape or current.dtype != recorded.dtype:
        got = f"{current.dtype}{list(current.shape)}" if isinstance(current, np.ndarray) else type(current).__name__
        raise StateMismatch(f"{what} is {got} in this env, {recorded.dtype}{list(recorded.shape)} in the checkpoint: "
                            "it cannot be restored in place")


def _read_layer(layer: gym.Env) -> dict[str, Any]:
    if _has_protocol(layer):
        out = {"state_dict": encode(layer.state_dict(), f"{type(layer).__qualname__}.state_dict()")}
    elif isinstance(layer, gym.Wrapper):
        return {}
    elif _mujoco_env(layer):
        import mujoco

        model, data = layer.model, layer.data
        flat = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION))
        mujoco.mj_getState(model, data, flat, mujoco.mjtState.mjSTATE_INTEGRATION)
        out = {"mujoco": torch.from_numpy(flat),
               "derived": {k: encode(getattr(data, k)) for k in _MUJOCO_DERIVED if hasattr(data, k)}}
    else:  # a classic-control env (MountainCar's step leaves a tuple: recorded as the array its reset makes)
        out = {"state": encode(np.asarray(layer.state))}
    out["np_random"] = encode(layer.np_random) if not isinstance(layer, gym.Wrapper) else None
    return out


def _load_layer(layer: gym.Env, state: dict[str, Any]) -> None:
    if "state_dict" in state:
        layer.load_state_dict(decode(state["state_dict"]))
    elif "mujoco" in state:
        import mujoco

        model, data = layer.model, layer.data
        mujoco.mj_setState(model, data, state["mujoco"].numpy(), mujoco.mjtState.mjSTATE_INTEGRATION)
        mujoco.mj_forward(model, data)
        for key, value in state["derived"].items():
            np.copyto(getattr(data, key), decode(value))
    elif "state" in state:
        np.copyto(layer.state, decode(state["state"]))
    if state.get("np_random") is not None:
        layer.np_random = decode(state["np_random"])


def encode(value: Any, where: str = "state") -> Any:
    """``value`` as data ``torch.load(weights_only=True)`` reads: numpy arrays and scalars become tagged tensors
    (their dtype kept), numpy generators their bit generator's state. Raises :class:`UnreadableState` naming the
    first part it cannot store."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        try:
            tensor = torch.from_numpy(np.array(array, copy=True))
        except (TypeError, ValueError, RuntimeError) as err:
            raise UnreadableState(f"{where} is a numpy {array.dtype} value, which a tensor cannot hold "
                                  f"({err})") from err
        return {"__ndarray__" if isinstance(value, np.ndarray) else "__npscalar__": tensor}
    if isinstance(value, np.random.Generator):
        kind = type(value.bit_generator)
        if getattr(np.random, kind.__name__, None) is not kind:
            raise UnreadableState(f"{where} is a Generator over {kind.__qualname__}, not one of numpy's bit generators")
        return {"__np_generator__": encode(value.bit_generator.state, f"{where}.bit_generator.state")}
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is dict:
        if not all(type(k) in (str, int) for k in value):
            raise UnreadableState(f"{where} has a dict key that is not a string or an integer")
        return {k: encode(v, f"{where}[{k!r}]") for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(encode(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise UnreadableState(f"{where} holds a {type(value).__qualname__}; a checkpoint stores numbers, strings, "
                          "numpy arrays and scalars, tensors, numpy Generators, and lists, tuples and dicts of those "
                          "(not their subclasses, such as namedtuples)")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`."""
    if type(value) is dict:
        if set(value) == {"__ndarray__"}:
            return value["__ndarray__"].numpy()
        if set(value) == {"__npscalar__"}:
            return value["__npscalar__"].numpy()[()]
        if set(value) == {"__np_generator__"}:
            state = decode(value["__np_generator__"])
            kind = getattr(np.random, str(state.get("bit_generator")), None)
            if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
                raise ValueError(f"not a numpy bit generator: {state.get('bit_generator')!r}")
            bit_generator = kind()
            bit_generator.state = state
            return np.random.Generator(bit_generator)
        return {k: decode(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(decode(v) for v in value)
    return value
