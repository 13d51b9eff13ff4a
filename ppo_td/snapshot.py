"""The live state of a run between iterations, so a resumed run continues bit for bit.

Weights and optimizer state are not enough for an exact resume: the next batch
also depends on torch's RNG (action sampling, minibatch order), on each
simulator's state and RNG, and on the collector's current step (observation,
episode step count and return so far). This module captures and restores those.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch
from tensordict import TensorDict

from ppo_td.pipeline import Pipeline


def _gym_vector_env(pipeline: Pipeline) -> Any | None:
    base = getattr(pipeline.env, "base_env", pipeline.env)
    vec = getattr(base, "_env", None)
    return vec if hasattr(vec, "envs") else None


def capture(pipeline: Pipeline) -> dict[str, Any]:
    """RNG, simulator and collector state of ``pipeline`` (call between iterations).

    Parts ppo_td did not build (a custom env or collector) are skipped: a resume
    then restores weights, optimizer and counters but not the exact next batch.
    """
    vec = _gym_vector_env(pipeline)
    carrier = getattr(pipeline.collector, "_carrier", None)
    return {
        "torch_rng": torch.get_rng_state(),
        # pickled gymnasium envs (state and np_random) as bytes, so the checkpoint stays weights_only-loadable
        "sim_envs": torch.frombuffer(bytearray(pickle.dumps(vec.envs)), dtype=torch.uint8) if vec else None,
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
        envs = pickle.loads(snapshot["sim_envs"].numpy().tobytes())
        if len(envs) != len(vec.envs):
            raise ValueError(f"checkpoint holds {len(envs)} env copies, the pipeline has {len(vec.envs)}")
        vec.envs[:] = envs
    carrier = getattr(pipeline.collector, "_carrier", None)
    if carrier is not None and snapshot["carrier"] is not None:
        carrier.update(TensorDict(snapshot["carrier"], batch_size=snapshot["carrier_batch"]))
