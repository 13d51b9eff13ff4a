"""The live state of a run between iterations, so a resumed run continues bit for bit.

Weights and optimizer state are not enough for an exact resume: the next batch
also depends on torch's RNG (action sampling, minibatch order), on each
simulator's state and RNG, and on the collector's current step (observation,
episode step count and return so far). This module captures and restores those.
"""

from __future__ import annotations

import pickle
from typing import Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from ppo_td.pipeline import Pipeline
from ppo_td.workers import is_multi_worker


def _gym_vector_env(pipeline: Pipeline) -> Any | None:
    base = getattr(pipeline.env, "base_env", pipeline.env)
    vec = getattr(base, "_env", None)
    return vec if isinstance(vec, gym.vector.VectorEnv) else None


def _sim_state(vec: Any) -> Any:
    """What to pickle: the per-copy envs of a sync vector env, or a numpy-vectorized env's own attributes."""
    if hasattr(vec, "envs"):
        return vec.envs
    return {k: v for k, v in vars(vec.unwrapped).items() if k in _ARRAY_ENV_STATE}


def _set_sim_state(vec: Any, state: Any) -> None:
    if hasattr(vec, "envs"):
        if len(state) != len(vec.envs):
            raise ValueError(f"checkpoint holds {len(state)} env copies, the pipeline has {len(vec.envs)}")
        vec.envs[:] = state
    else:
        vars(vec.unwrapped).update(state)


_ARRAY_ENV_STATE = ("state", "steps", "prev_done", "_np_random", "_np_random_seed", "steps_beyond_terminated")


def capture(pipeline: Pipeline) -> dict[str, Any]:
    """RNG, simulator and collector state of ``pipeline`` (call between iterations).

    Parts ppo_td did not build (a custom env or collector) are skipped: a resume
    then restores weights, optimizer and counters but not the exact next batch. So are
    worker collectors' simulators (they live in the workers): such a resume starts new episodes.
    """
    vec = None if is_multi_worker(pipeline.collector) else _gym_vector_env(pipeline)
    carrier = getattr(pipeline.collector, "_carrier", None)
    return {
        "torch_rng": torch.get_rng_state(),
        # pickled gymnasium envs (state and np_random) as bytes, so the checkpoint stays weights_only-loadable
        "sim_envs": torch.frombuffer(bytearray(pickle.dumps(_sim_state(vec))), dtype=torch.uint8) if vec else None,
        "carrier": carrier.to_dict() if carrier is not None else None,
        "carrier_batch": list(carrier.batch_size) if carrier is not None else None,
    }


def restore_snapshot(pipeline: Pipeline, snapshot: dict[str, Any]) -> None:
    """Put a :func:`capture` back into a freshly built pipeline (after its collector exists).

    The simulator state is unpickled: resume only from checkpoints you wrote.
    """
    torch.set_rng_state(snapshot["torch_rng"])
    vec = _gym_vector_env(pipeline)
    if vec is not None and snapshot["sim_envs"] is not None:
        _set_sim_state(vec, pickle.loads(snapshot["sim_envs"].numpy().tobytes()))
    carrier = getattr(pipeline.collector, "_carrier", None)
    if carrier is not None and snapshot["carrier"] is not None:
        carrier.update(TensorDict(snapshot["carrier"], batch_size=snapshot["carrier_batch"]))
