"""Pinned memory, measured on the moves a GPU run makes (issue 65, item 6): a preset's own batch, collected by
ppo_td on the CPU, moved to the GPU as the training loop moves it once an iteration, and its policy's inputs as the
collector moves them once a step, each from ordinary (pageable) memory and from page-locked (pinned) memory.

    python -m benchmarks gpu --vmas-envs --atari-frames 0 --compile-frames 0 --pinned-presets atari pendulum

Each move is timed to the end of the copy (``torch.cuda.synchronize``), rounds alternating, medians: ``pageable``
(``.to(device)``, what ppo_td does), ``pinned on the way`` (``.pin_memory()`` then a non-blocking copy: what pinning
at the move would cost), ``through a pinned buffer`` (copied into page-locked memory kept from move to move, then a
non-blocking copy: what a step's inputs would pay) and ``from pinned memory`` (a non-blocking copy of what is already
in pinned memory: what a collector writing its batches there would pay). The saving an iteration is the batch's plus
the steps' (``frames_per_batch / num_envs`` of them): beside the iteration's seconds it says whether pinning can pay.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MOVES = ("pageable", "pinned on the way", "through a pinned buffer", "from pinned memory")
"""The ways a move is timed, in the table's order."""


def collected(preset: str, seed: int) -> tuple[Any, Any, int]:
    """One batch of ``preset`` as its collector gives it on the CPU ([env, time]), the policy's inputs of one step
    (its first), and the steps an iteration takes."""
    from ppo_td import get_preset
    from ppo_td.training import build_pipeline

    config = get_preset(preset)
    config = dataclasses.replace(config, seed=seed, device="cpu", total_frames=config.frames_per_batch * 2,
                                 eval_episodes=0)
    p = build_pipeline(config)
    try:
        batch = next(iter(p.collector))
    finally:
        p.collector.shutdown()
    inputs = [key for key in p.actor.in_keys if key in batch.keys(True)]
    step = batch[:, 0].select(*inputs).clone()  # one step's inputs, in memory of their own as the collector's are
    return batch, step, config.frames_per_batch // config.env.num_envs


def timed_moves(batch: Any, step: Any, device: str, rounds: int,
                pin: Callable[[Any], Any] = lambda td: td.pin_memory(),
                synchronize: Callable[[], None] | None = None) -> dict[str, dict[str, float]]:
    """Milliseconds of each move of :data:`MOVES`, for the ``batch`` and for one ``step``: median, min and max over
    ``rounds``, the ways alternating within each round. Each moved copy is checked equal to its source (a copy that
    arrived wrong would time nothing). ``pin`` and ``synchronize`` stand in for CUDA's on a machine without it."""
    import torch

    sync = synchronize or (lambda: torch.cuda.synchronize(device))
    pinned = {"batch": pin(batch), "step": pin(step)}
    moves: dict[str, Callable[[Any, str], Any]] = {
        "pageable": lambda td, what: td.to(device),
        "pinned on the way": lambda td, what: pin(td).to(device, non_blocking=True),
        "through a pinned buffer": lambda td, what: pinned[what].copy_(td).to(device, non_blocking=True),
        "from pinned memory": lambda td, what: pinned[what].to(device, non_blocking=True)}
    times: dict[str, list[float]] = {f"{what}, {way}": [] for what in ("batch", "step") for way in MOVES}
    for round_ in range(rounds + 1):  # the first round warms up (CUDA's context, the allocator) and is not kept
        for what, source in (("batch", batch), ("step", step)):
            for way, move in moves.items():
                sync()
                start = time.perf_counter()
                moved = move(source, what)
                sync()
                seconds = time.perf_counter() - start
                if round_ == 0:
                    wrong = _differs(moved, source)
                    if wrong:
                        raise RuntimeError(f"the {what} moved {way} to {device} differs from its source: {wrong}")
                    continue
                times[f"{what}, {way}"].append(1e3 * seconds)
    return {name: {"median": statistics.median(ms), "min": min(ms), "max": max(ms)} for name, ms in times.items()}


def _differs(moved: Any, source: Any) -> str:
    """What of ``moved`` is not ``source`` bit for bit (NaN equal to NaN: an info key's entries where no episode
    ended), or ""."""
    import torch

    keys = set(source.keys(True, True))
    if set(moved.keys(True, True)) != keys:
        return f"its keys {sorted(map(str, moved.keys(True, True)))} against {sorted(map(str, keys))}"
    for key in keys:
        try:
            torch.testing.assert_close(moved.get(key).cpu(), source.get(key), rtol=0, atol=0, equal_nan=True)
        except AssertionError as err:
            return f"{key}: {str(err).splitlines()[0]}"
    return ""


def measure(preset: str, device: str, rounds: int, seed: int) -> dict[str, Any]:
    """A preset's row: its batch's and step's sizes and :func:`timed_moves` on ``device``."""
    import torch

    if not torch.device(device).type == "cuda" or not torch.cuda.is_available():
        raise ValueError(f"pinned memory is CUDA's: --device {device} (torch.cuda.is_available() is "
                         f"{torch.cuda.is_available()})")
    batch, step, steps = collected(preset, seed)
    return {"preset": preset, "device": torch.cuda.get_device_name(device), "batch_mb": _mb(batch),
            "step_kb": 1e3 * _mb(step), "steps": steps, "ms": timed_moves(batch, step, device, rounds)}


def _mb(td: Any) -> float:
    return sum(t.numel() * t.element_size() for t in td.values(True, True)) / 1e6


def write(rows: list[dict[str, Any]], out: Path) -> None:
    """``out``/pinned.md (a table, the saving an iteration against pageable) and ``out``/pinned.jsonl."""
    lines = ["`python -m benchmarks gpu --pinned-presets ...`: milliseconds, median (min-max) over the rounds; an "
             "iteration moves its batch once and one step's policy inputs each step.", "",
             "| preset (device) | what | size | " + " | ".join(MOVES) + " | saved an iteration, ms |",
             "|---" * 8 + "|"]
    for r in rows:
        ms = r["ms"]
        for what, size, times in (("batch", f"{r['batch_mb']:.2f} MB", 1), ("step", f"{r['step_kb']:.1f} kB",
                                                                           r["steps"])):
            cells = [f"{ms[f'{what}, {way}']['median']:.3f} ({ms[f'{what}, {way}']['min']:.3f}-"
                     f"{ms[f'{what}, {way}']['max']:.3f})" for way in MOVES]
            saved = [times * (ms[f"{what}, pageable"]["median"] - ms[f"{what}, {way}"]["median"]) for way in MOVES[1:]]
            label = "batch" if what == "batch" else f"step (x{r['steps']})"
            lines.append(f"| {r['preset']} ({r['device']}) | {label} | {size} | {' | '.join(cells)} | "
                         f"{saved[0]:+.2f} on the way, {saved[1]:+.2f} through a buffer, {saved[2]:+.2f} from "
                         "pinned |")
    out.mkdir(parents=True, exist_ok=True)
    (out / "pinned.md").write_text("\n".join(lines) + "\n")
    (out / "pinned.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
