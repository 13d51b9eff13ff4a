"""Where the networks and the update run: ``TrainConfig.device`` resolved against this machine."""

from __future__ import annotations

import torch


def resolve_device(name: str, images: bool = False, env: torch.device | None = None) -> torch.device:
    """The torch device ``name`` (``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``) stands for here, with its
    index (``cuda`` is the current CUDA device, as tensors moved there report it).

    ``auto`` picks a GPU (CUDA, else Apple's MPS) for image observations, where convolutions dominate both
    halves of PPO, and the CPU otherwise: small MLP policies run faster on the CPU, whose per-operation
    cost is lower than a GPU kernel launch and needs no transfer per env step (Stable-Baselines3's PPO
    documentation gives the same advice). An env that steps on a GPU (``env``: VMAS with ``env.device``) takes the
    networks there under ``auto``: the rollout then never leaves the device.

    Raises:
        ValueError: a GPU that torch cannot see here, naming what torch reports and the way out.
    """
    if name == "auto":
        if env is not None and env.type != "cpu":
            return env
        if images and torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if images and _mps_available():
            return torch.device("mps", 0)
        return torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise ValueError(f"device={name!r}, but torch {torch.__version__} ({build}) sees no CUDA GPU "
                             "(torch.cuda.is_available() is False): use --device cpu, or auto (the GPU when "
                             "there is one and the observations are images, else the CPU)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device={name!r}, but torch sees {torch.cuda.device_count()} CUDA GPU(s) "
                             f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")
        return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())
    if device.type == "mps":
        if not _mps_available():
            raise ValueError(f"device={name!r}, but torch {torch.__version__} has no Apple MPS backend here "
                             "(torch.backends.mps.is_available() is False): use --device cpu, or auto")
        return torch.device("mps", 0)
    return device


def same_device(a: torch.device, b: torch.device) -> bool:
    """True for the same device, ``cuda`` and ``cuda:0`` alike (a tensor reports its device with an index)."""
    return a.type == b.type and (a.index or 0) == (b.index or 0)


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())
