"""Torch's intra-op threads for a run: one choice for every entry point (``ppo-td train``, ``ppo_td.train``,
``build_pipeline`` and ``run``).

PPO's networks for vector observations are small: a second thread only adds synchronization. On a busy 2-core
machine an update of LunarLander took 5x as long with 2 threads as with 1 (``python -m benchmarks threads``), and
``ppo_td.train`` on a ``gym.make_vec`` CartPole ran at 455 frames/s on torch's default against 2,193 with one
thread (issue 44). Images under 36x36 (MiniGrid's 7x7) get the small CNN, which loses the same way: an update of
the ``minigrid`` preset took 3.1-3.2 s with one thread and 8.0-11.2 s with two beside one busy process (2026-11-28,
``python -m benchmarks threads --env-id minigrid:MiniGrid-Empty-Random-5x5-v0``). Larger images get the Nature CNN,
whose convolutions can use the cores when they are free: they keep torch's default.

A user who chose threads is left alone: ``threads=N`` (``--threads N``) is used as given, and so is a count set
before the call with ``torch.set_num_threads`` or the ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` variables (a
count other than torch's start-up default, which is the machine's physical cores, or its logical ones).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import torch

from ppo_td.envs import EnvDescription
from ppo_td.envs.torchrl_envs import say
from ppo_td.models.encoders import NATURE_MIN_SIZE, image_size

_SAID: set[tuple[int, str]] = set()


def torch_default_threads() -> set[int]:
    """The counts torch picks at start-up on this machine without a variable set: its physical cores (what torch
    counts) and, where that cannot be read, its logical ones; both are given, either may be torch's."""
    counts = {os.cpu_count() or 1}
    if hasattr(os, "sched_getaffinity"):  # a restricted CPU set (docker --cpuset, taskset, SLURM)
        counts.add(len(os.sched_getaffinity(0)))
    cores = _physical_cores()
    if cores:
        counts.add(cores)
    return counts


def _physical_cores() -> int | None:
    """Distinct (package, core) pairs under ``/sys/devices/system/cpu`` (Linux); None elsewhere."""
    pairs = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            pairs.add(((cpu / "physical_package_id").read_text().strip(), (cpu / "core_id").read_text().strip()))
        except OSError:
            return None
    return len(pairs) or None


def chosen_by_user() -> str | None:
    """How the user set this process's threads before ppo_td was called (a variable, or ``torch.set_num_threads``
    to a count other than torch's default); None when torch's default is in force."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    n = torch.get_num_threads()
    if n not in torch_default_threads():
        return f"torch.set_num_threads({n})"
    return None


def choose_threads(threads: int | None, description: EnvDescription) -> int | None:
    """The torch threads a run uses: ``threads`` when given; else None (leave them) when the user chose their own
    (:func:`chosen_by_user`); else 1 for vector observations and images under 36x36 (MiniGrid's 7x7: a small
    CNN), torch's current count for larger images (the Nature CNN). Says the choice
    once per process.

    Raises:
        ValueError: ``threads`` below 1, or not an int.
    """
    if threads is not None:
        return check_threads(threads)
    if chosen_by_user() is not None:
        return None
    space = description.observation_space
    images = space.images() if space is not None else []
    large = any(min(image_size(image)[1:]) >= NATURE_MIN_SIZE for image in images)
    n = torch.get_num_threads() if large else 1
    why = ("image observations: the Nature CNN's convolutions gain from threads" if large else
           f"small images ({'x'.join(map(str, image_size(images[0])[1:]))}): a small CNN only loses from more"
           if images else "vector observations: small networks only lose from more")
    if (n, why) not in _SAID:
        _SAID.add((n, why))
        say(f"torch threads: {n} for this run ({why}; torch's default here is {torch.get_num_threads()}). "
            "Choose with threads=N (ppo-td train --threads N); a count set before with torch.set_num_threads or "
            "OMP_NUM_THREADS is kept.")
    return n


def check_threads(threads: int | None) -> int | None:
    """``threads`` if it is None or an int >= 1.

    Raises:
        ValueError: naming the value and what to give.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads={threads!r}: give the number of torch threads (an int >= 1), or None to let "
                         "ppo_td choose (1 for vector observations and small images, torch's default for larger "
                         "images)")
    return threads


@contextlib.contextmanager
def using_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (None: as they are), then put back the count found."""
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
