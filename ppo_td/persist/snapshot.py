"""The live state of a run between iterations, so a resumed run continues bit for bit.

Weights and optimizer state are not enough for an exact resume: the next batch
also depends on torch's RNG (action sampling, minibatch order), on each
simulator's state and RNG, and on the collector's current step (observation,
episode step count and return so far). This module captures and restores those.

Exact only with ppo_td's fast collector over an env ppo_td built (the default): it
gives its current step through a public ``state_dict``. TorchRL's ``Collector`` has no
public way to read or set its current step, and worker collectors keep their
simulators in the workers; those runs resume from the last completed iteration with
fresh episodes (``exact`` is False in the snapshot and the resume says so).
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils import EzPickle

from ppo_td.collect import FastCollector
from ppo_td.envs import PartialResetCartPole
from ppo_td.training import Pipeline

# CartPoleVectorEnv's public state arrays (the numpy-vectorized simulator); its RNG is its np_random property
_ARRAY_ENV_STATE = ("state", "steps", "prev_done", "steps_beyond_terminated")


def is_exact(pipeline: Pipeline) -> bool:
    """True when :func:`capture` can record everything the next batch depends on."""
    return (isinstance(pipeline.collector, FastCollector) and pipeline.built is not None
            and restorable(pipeline.built.vector))


def restorable(vec: gym.vector.VectorEnv) -> bool:
    """True when pickling the simulators keeps their state: ppo_td's numpy CartPole, or per-copy envs that are
    not ``EzPickle`` (MuJoCo and Box2D envs are: they pickle their constructor arguments only, so an unpickled
    copy is a fresh, unreset simulator)."""
    if isinstance(vec, PartialResetCartPole):
        return True
    envs = getattr(vec, "envs", None)
    return envs is not None and not any(isinstance(env.unwrapped, EzPickle) for env in envs)


def _sim_state(vec: gym.vector.VectorEnv) -> Any:
    """What to pickle: the per-copy envs of a sync vector env, or the numpy-vectorized simulator's state."""
    if isinstance(vec, PartialResetCartPole):
        cart = vec.unwrapped
        state = {k: np.copy(getattr(cart, k)) for k in _ARRAY_ENV_STATE if getattr(cart, k, None) is not None}
        return {**state, "np_random": cart.np_random}
    return vec.envs


def _set_sim_state(vec: gym.vector.VectorEnv, state: Any) -> None:
    if isinstance(vec, PartialResetCartPole):
        cart = vec.unwrapped
        for key in _ARRAY_ENV_STATE:
            if key in state:
                np.copyto(getattr(cart, key), state[key])
        cart.np_random = state["np_random"]
        return
    if len(state) != len(vec.envs):
        raise ValueError(f"checkpoint holds {len(state)} env copies, the pipeline has {len(vec.envs)}")
    vec.envs[:] = state


def capture(pipeline: Pipeline) -> dict[str, Any]:
    """RNG, simulator and collector state of ``pipeline`` (call between iterations); see the module docstring."""
    exact, sim = is_exact(pipeline), None
    if exact:
        try:
            sim = pickle.dumps(_sim_state(pipeline.built.vector))
        except (pickle.PicklingError, TypeError, AttributeError) as err:  # e.g. a wrapper holding a lambda
            logging.getLogger("ppo_td").warning("checkpoint without simulator state (a resume will start fresh "
                                                "episodes): the env cannot be pickled: %s", err)
            exact = False
    return {
        "exact": exact,
        "torch_rng": torch.get_rng_state(),
        # pickled simulator state as bytes, so the checkpoint stays weights_only-loadable
        "sim_envs": torch.frombuffer(bytearray(sim), dtype=torch.uint8) if sim is not None else None,
        "collector": pipeline.collector.state_dict() if exact else None,
    }


def restore_snapshot(pipeline: Pipeline, snapshot: dict[str, Any]) -> bool:
    """Put a :func:`capture` back into a freshly built pipeline (after its collector exists).

    Returns True when the resume is exact (both runs collect with ppo_td's fast collector).
    The simulator state is unpickled: resume only from checkpoints you wrote.
    """
    torch.set_rng_state(snapshot["torch_rng"])
    if not (snapshot["exact"] and is_exact(pipeline)):
        return False
    _set_sim_state(pipeline.built.vector, pickle.loads(snapshot["sim_envs"].numpy().tobytes()))
    pipeline.collector.load_state_dict(snapshot["collector"])
    return True
