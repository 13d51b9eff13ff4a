"""A run's sizes against the machine's memory, checked before anything big is made.

A count a user types (``env.num_envs``, ``frames_per_batch``, ``model.hidden_sizes``) sets how much memory the run
takes. A value the machine cannot hold would otherwise fail deep inside torch with an allocator traceback, or,
where the pages are only touched later, grow memory until the machine runs out. The estimates here are lower
bounds (the least a run of that size needs), so only what surely cannot fit is refused, in one line naming the
field, what it needs and what the machine has.
"""

from __future__ import annotations

import math
import os

import torch

from ppo_td.config import TrainConfig
from ppo_td.envs import EnvDescription
from ppo_td.envs.description import ObservationSpace

COPY_BYTES = 2_048
"""The least one env copy holds (a Gymnasium env object and its vector env's slot: several KB in practice)."""
FRAME_BYTES = 64
"""The least one frame of a batch holds before the observation size is known (flags, reward, action, log-prob)."""
COPIES_OF_BATCH = 3
"""A batch exists in the collector's buffer, the replay buffer's storage and, a minibatch at a time, the update."""
PARAMETER_COPIES = 4
"""Each parameter is held with its gradient and Adam's two moments."""


def available_bytes() -> int | None:
    """Memory the machine has available now (Linux: ``MemAvailable``), else its physical memory; None where
    neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _refuse_above(needs: dict[str, int], what: str) -> None:
    have = available_bytes()
    total = sum(needs.values())
    if have is None or total <= have:
        return
    field = max(needs, key=needs.get)
    parts = ", ".join(f"{name} {_gib(b)}" for name, b in sorted(needs.items(), key=lambda kv: -kv[1]))
    raise ValueError(f"{what} needs at least {_gib(total)} of memory ({parts}) and this machine has {_gib(have)} "
                     f"available: lower {field}")


def _gib(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:,.1f} GiB"
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


def check_before_envs(config: TrainConfig) -> None:
    """Refuse ``env.num_envs`` and ``frames_per_batch`` that cannot fit, before any env copy is made.

    Raises:
        ValueError: naming the field that needs the most and the memory available.
    """
    _refuse_above({"env.num_envs": config.env.num_envs * COPY_BYTES,
                   "frames_per_batch": config.frames_per_batch * FRAME_BYTES * COPIES_OF_BATCH},
                  f"env.num_envs={config.env.num_envs:,} with frames_per_batch={config.frames_per_batch:,}")


def _numel(space: ObservationSpace | None, fallback: tuple[int, ...]) -> int:
    """One observation's numbers (an MLP's inputs)."""
    if space is None:
        return math.prod(fallback)
    if space.entries:
        return sum(_numel(entry, ()) for _, entry in space.entries)
    return math.prod(space.shape)


def _bytes(space: ObservationSpace | None, fallback: tuple[int, ...]) -> int:
    """One observation's bytes as the batch stores it (its own dtype: an image's uint8 is one byte)."""
    if space is None:
        return 4 * math.prod(fallback)
    if space.entries:
        return sum(_bytes(entry, ()) for _, entry in space.entries)
    return math.prod(space.shape) * torch.empty((), dtype=getattr(torch, space.dtype, torch.float32)).element_size()


def check_run(config: TrainConfig, description: EnvDescription, on_host: bool = True) -> None:
    """Refuse a batch and networks that cannot fit, once the env's sizes are known and before the networks and the
    collector are made (``model.hidden_sizes`` of an MLP, ``frames_per_batch``). ``on_host``: the networks are in
    this machine's memory (not a GPU's, which is not checked here).

    Raises:
        ValueError: naming the field that needs the most and the memory available.
    """
    space = description.observation_space
    obs = _bytes(space, description.observation_shape) * max(description.num_agents, 1)
    frame = (2 * obs + FRAME_BYTES) * COPIES_OF_BATCH  # observation and next observation
    needs = {"frames_per_batch": config.frames_per_batch * frame}
    hidden = list(config.model.hidden_sizes)
    if on_host and (space is None or not space.images()):  # an MLP reads the observation (images: a CNN first)
        widths = [_numel(space, description.observation_shape) * max(description.num_agents, 1), *hidden, 1]
        params = 2 * sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))  # the policy's and the critic's
        minibatch = config.frames_per_batch // config.optim.num_minibatches
        activations = 2 * minibatch * sum(hidden) * 4 * 2  # both networks' layers, kept for the backward pass
        needs["model.hidden_sizes"] = params * 4 * PARAMETER_COPIES + activations
    _refuse_above(needs, f"a batch of {config.frames_per_batch:,} frames of {obs:,} observation bytes and networks "
                         f"of hidden sizes {hidden}")
