"""The live state of a run between iterations, so a resumed run continues bit for bit.

Weights and optimizer state are not enough for an exact resume: the next batch
also depends on torch's RNG (action sampling, minibatch order), on each
simulator's state and RNG, and on the collector's current step (observation,
episode step count and return so far). This module captures and restores those,
as plain data: no environment is pickled (:mod:`ppo_td.envs.state` reads and writes them).

Exact with ppo_td's fast collector over an env ppo_td built (the default) whose every layer
has readable state (:func:`ppo_td.envs.state.why_not_restorable`). TorchRL's ``Collector``
has no public way to read or set its current step, a VMAS simulator none to read its state, and worker
collectors keep their simulators in the workers; those runs, and envs whose state cannot be read, resume from the
last completed iteration with fresh episodes (``exact`` is False in the snapshot, ``why``
says why, and the resume says so).
"""

from __future__ import annotations

import io
import logging
import weakref
from typing import Any

import torch

from ppo_td.collect import AgentsCollector, EnvLoopCollector, FastCollector
from ppo_td.envs.state import StateMismatch, check_fits, load_state, read_state, why_not_restorable
from ppo_td.training import Pipeline


def _structural(pipeline: Pipeline) -> str | None:
    if isinstance(pipeline.collector, AgentsCollector):
        return "a VMAS simulator's state (its entities, the scenario's own variables) has no public reader"
    if isinstance(pipeline.collector, EnvLoopCollector):
        return ("the env is stepped by its own TorchRL step (ppo_td's env loop), whose simulators' state no public "
                "API reads")
    if not isinstance(pipeline.collector, FastCollector):
        return ("the collector's current step is not restorable (worker processes, Ray, or TorchRL's "
                "Collector keep it where no public API reaches)")
    if pipeline.built is None:
        return "the env was passed from Python as a TorchRL env, so ppo_td cannot reach its simulators"
    why = why_not_restorable(pipeline.built.vector)
    return None if why is None else f"the env cannot be recorded: {why}"


def _read(pipeline: Pipeline) -> tuple[dict[str, Any] | None, str | None]:
    """The env state of ``pipeline`` as a checkpoint stores it, or None and why not. The state is written and
    read back as ``torch.load(weights_only=True)`` will, so a checkpoint never holds what it cannot load."""
    why = _structural(pipeline)
    if why is not None:
        return None, why
    try:
        state = read_state(pipeline.built.vector)
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    except Exception as err:  # noqa: BLE001 - a user's state_dict() may fail in any way: the run goes on
        return None, f"the env cannot be recorded: {err}"
    return state, None


def why_inexact(pipeline: Pipeline) -> str | None:
    """None when :func:`capture` records everything the next batch depends on; else the reason."""
    return _read(pipeline)[1]


def is_exact(pipeline: Pipeline) -> bool:
    """True when :func:`capture` can record everything the next batch depends on."""
    return why_inexact(pipeline) is None


_WARNED: set[int] = set()  # ids of the live pipelines whose checkpoints were said to lack env state


def capture(pipeline: Pipeline) -> dict[str, Any]:
    """RNG, simulator and collector state of ``pipeline`` (call between iterations); see the module docstring."""
    env, why = _read(pipeline)
    if why is not None and _structural(pipeline) is None and id(pipeline) not in _WARNED:
        _WARNED.add(id(pipeline))
        weakref.finalize(pipeline, _WARNED.discard, id(pipeline))
        logging.getLogger("ppo_td").warning("checkpoints without env state (a resume will start fresh episodes): "
                                            "%s", why)
    return {
        "exact": why is None,
        "why": why or "",
        "torch_rng": torch.get_rng_state(),
        "device": pipeline.device.type,
        "device_rng": _device_rng(pipeline.device),  # on a GPU, sampling and minibatch order draw from its RNG
        "env": env,
        "collector": pipeline.collector.state_dict() if why is None else None,
        "sampling": _sampling(pipeline),
        "compiled": pipeline.compiled,  # compile='auto' resolved: a resume goes on the same way (checkpoint.py)
    }


def _sampling(pipeline: Pipeline) -> str:
    """Where the fast collector samples the policy: 'numpy' or 'torch' (the two round differently)."""
    collector = pipeline.collector
    return "numpy" if isinstance(collector, FastCollector) and collector.fast_policy.numpy is not None else "torch"


def restore_snapshot(pipeline: Pipeline, snapshot: dict[str, Any]) -> bool:
    """Put a :func:`capture` back into a freshly built pipeline (after its collector exists).

    Returns True when the resume is exact: the checkpoint holds the env state and it fits this pipeline's env
    (else nothing of it is loaded and :func:`inexact_reason` says why).
    """
    torch.set_rng_state(snapshot["torch_rng"])
    if snapshot.get("device_rng") is not None and snapshot.get("device") == pipeline.device.type:
        _set_device_rng(pipeline.device, snapshot["device_rng"])
    if (snapshot.get("sampling", "torch") == "torch" and _sampling(pipeline) == "numpy"
            and pipeline.config.collector.inference == "auto"):
        # a run that sampled in torch (an earlier ppo_td's masked policy, say) goes on sampling in torch, so the
        # resume stays exact; collector.inference='numpy' asked for numpy: then fresh episodes, and the reason said
        pipeline.collector.fast_policy.sample_in_torch()
    if inexact_reason(pipeline, snapshot):
        return False
    load_state(pipeline.built.vector, snapshot["env"])
    pipeline.collector.load_state_dict(snapshot["collector"])
    return True


def inexact_reason(pipeline: Pipeline, snapshot: dict[str, Any]) -> str:
    """Why a resume of ``snapshot`` into ``pipeline`` is not exact ("" when it is)."""
    if not (snapshot["exact"] and snapshot.get("env") is not None):  # (earlier checkpoints pickled envs: never read)
        return snapshot.get("why") or "the checkpoint was written by an older ppo_td, without env state"
    why = _structural(pipeline)
    if why is not None:
        return why
    sampled, sampling = snapshot.get("sampling", "torch"), _sampling(pipeline)  # before numpy sampling: torch
    if sampled != sampling:
        return (f"the run sampled its policy in {sampled}, this one samples it in {sampling} (collector.inference): "
                "the two round the network's outputs differently")
    saved = snapshot.get("device", "cpu")  # checkpoints before devices: the CPU
    if saved != pipeline.device.type:
        return (f"the run moved from {saved} to {pipeline.device.type}: the random numbers of sampling and of the "
                "minibatch order come from another generator")
    try:
        check_fits(pipeline.built.vector, snapshot["env"])
    except StateMismatch as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a state this ppo_td cannot read: resume with fresh episodes
        return f"the checkpoint's env state cannot be checked against this env: {err}"
    return ""


def _device_rng(device: torch.device) -> torch.Tensor | None:
    """The RNG state of a GPU ``device`` (None on the CPU, whose state is ``torch_rng``)."""
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    if device.type == "mps":
        return torch.mps.get_rng_state()
    return None


def _set_device_rng(device: torch.device, state: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    elif device.type == "mps":
        torch.mps.set_rng_state(state)
