"""The path a config takes through ppo_td to a built env, and the time the build takes, per kind of env.

    python -m benchmarks env_paths                      # every kind the machine has the packages for
    python -m benchmarks env_paths --kinds gym-id vmas  # a few
    python -m benchmarks env_paths --repeats 9          # more builds for the time

For each kind (a Gymnasium id, a factory, a TorchRL env class, VMAS, PettingZoo, EnvPool, Atari, MinAtar) one
``build_env`` is traced after a first build has done the imports: the sequence of ppo_td modules the running code
is in, one *stop* each time it moves to another module (a call into a function of another module, or a return to
the caller's); *calls* per module (entered by a call from another module; a walk that visits each module once
enters each once) and *climbs* (a call into a module of a higher layer than the caller's, by ``pyproject.toml``'s
import-linter layers). ``ppo_td.config`` and ``ppo_td.keys`` are data, read from anywhere, and no stops.
``load_policy`` is traced the same way on a small CartPole run folder. Each is traced twice: all of it, and *the
walk alone*: one env copy (so each copy's work shows once), without the env's own code that the build runs (the
``reset``, ``step`` and spaces of envs, wrappers and transforms, and all they call). The time is the
median of ``--repeats`` builds, each closed after. Files and lines of ``ppo_td/envs`` come first. One process, one
torch thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = str(ROOT / "ppo_td") + "/"


def _kinds() -> dict[str, Callable[[], Any]]:
    """Each kind of env: a function returning its ``EnvConfig``."""
    from ppo_td.config import EnvConfig
    from ppo_td.presets import get_preset

    return {
        "gym-id": lambda: EnvConfig(env_id="Pendulum-v1", num_envs=4),
        "gym-id-numpy": lambda: EnvConfig(env_id="CartPole-v1", num_envs=8),
        "factory": lambda: EnvConfig(env_id="ppo_td.envs.partial:cartpole_no_velocity", num_envs=4),
        "torchrl-class": lambda: EnvConfig(env_id="torchrl.envs.custom.pendulum:PendulumEnv", num_envs=4,
                                           max_episode_steps=200),
        "vmas": lambda: get_preset("vmas-navigation").env,
        "pettingzoo": lambda: get_preset("mpe-spread").env,
        "envpool": lambda: dataclasses.replace(get_preset("atari").env, vectorization="envpool"),
        "atari": lambda: get_preset("atari").env,
        "minatar": lambda: get_preset("minatar").env,
    }


DATA = ("ppo_td.config", "ppo_td.keys")
"""Modules of data the walk reads, not passes through: a config property read from any module is no stop."""


def _module(filename: str) -> str | None:
    if not filename.startswith(PACKAGE):
        return None
    parts = ["ppo_td", *filename[len(PACKAGE):].removesuffix(".py").split("/")]
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None if module in DATA else module


def _runs_the_env(frame: Any) -> bool:
    """Whether ``frame`` is the env running rather than the config's walk: a method other than ``__init__`` of a
    Gymnasium env or wrapper, a TorchRL env or transform, or an info reader (their ``reset``, ``step``, spaces and
    specs, which a build calls while it reads them)."""
    import gymnasium as gym
    from torchrl.envs import EnvBase, Transform
    from torchrl.envs.gym_like import BaseInfoDictReader

    owner = frame.f_locals.get("self") if frame.f_code.co_argcount else None
    return frame.f_code.co_name != "__init__" and isinstance(
        owner, (gym.Env, gym.vector.VectorEnv, EnvBase, Transform, BaseInfoDictReader))


def trace(call: Callable[[], Any], *, walk_only: bool = False) -> tuple[Any, list[tuple[str, str]]]:
    """``call()``'s result and the ppo_td modules its code moved through: one ``(module, how)`` per move, ``how``
    'call' (a function of another module called) or 'return' (back in a caller's module). ``walk_only`` leaves out
    the env's own code run inside the walk (:func:`_runs_the_env`, and everything it calls)."""
    path: list[tuple[str, str]] = []
    inside: list[Any] = []  # the env-running frame being skipped (walk_only)

    def current(frame: Any) -> str | None:
        while frame is not None:
            module = _module(frame.f_code.co_filename)
            if module is not None:
                return module
            frame = frame.f_back
        return None

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        if walk_only:
            if inside:
                if event == "return" and frame is inside[0]:
                    inside.clear()
                return
            if event == "call" and _module(frame.f_code.co_filename) is not None and _runs_the_env(frame):
                inside.append(frame)
                return
        if _module(frame.f_code.co_filename) is None:
            return
        here = _module(frame.f_code.co_filename) if event == "call" else current(frame.f_back)
        if here is not None and (not path or path[-1][0] != here):
            path.append((here, event))

    sys.setprofile(profile)
    try:
        out = call()
    finally:
        sys.setprofile(None)
    return out, path


def _layers() -> list[list[str]]:
    """The import-linter layers of ``pyproject.toml``, top first (tomllib is Python 3.11's; 3.10 gets tomli)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    layers = next(c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def summary(path: list[tuple[str, str]]) -> dict[str, Any]:
    """Stops (every move), the modules, the stops in each module (``visits``), the calls into each module from
    another, the modules entered by a call more than once (a walk that visits each module once has none; per-copy
    work counts), the module call graph's edges (caller module -> called module, each once) and the modules called
    from more than one module (``shared``: none where the graph is a tree), and the climbs: calls into a module of a
    higher layer than the caller's (layer 0 is the top)."""
    layers = _layers()

    def level(module: str) -> int:
        if module == "ppo_td":  # the package's own functions (ppo_td.train, ppo_td.load_policy) sit above every layer
            return -1
        for i, names in enumerate(layers):
            if any(module == n or module.startswith(n + ".") for n in names):
                return i
        return len(layers)

    calls = Counter(module for module, how in path if how == "call")
    callers: dict[str, set[str]] = {}
    for (a, _), (b, how) in zip(path, path[1:], strict=False):
        if how == "call":
            callers.setdefault(b, set()).add(a)
    climbs = sum(how == "call" and level(b) < level(a) for (a, _), (b, how) in zip(path, path[1:], strict=False))
    return {"stops": len(path), "modules": len({m for m, _ in path}), "calls": sum(calls.values()),
            "reentered": sum(n > 1 for n in calls.values()), "climbs": climbs, "entries": dict(calls.most_common()),
            "visits": dict(Counter(module for module, _ in path).most_common()),
            "edges": sum(len(c) for c in callers.values()),
            "shared": sorted(m for m, c in callers.items() if len(c) > 1),
            "path": [f"{how[0]}:{module}" for module, how in path]}


def envs_files() -> list[tuple[str, int]]:
    return sorted((p.name, len(p.read_text().splitlines())) for p in (ROOT / "ppo_td" / "envs").glob("*.py"))


def build_time(config: Any, repeats: int) -> float:
    from ppo_td.envs import build_env

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        built = build_env(config, seed=1)
        times.append(time.perf_counter() - start)
        built.env.close()
    return statistics.median(times)


def load_policy_path() -> dict[str, Any]:
    import ppo_td
    from ppo_td.presets import get_preset

    config = dataclasses.replace(get_preset("cartpole"), total_frames=512, eval_episodes=0)
    with tempfile.TemporaryDirectory() as folder:
        ppo_td.train(config, run_dir=str(Path(folder) / "run"))
        ppo_td.load_policy(Path(folder) / "run")  # the imports
        _, path = trace(lambda: ppo_td.load_policy(Path(folder) / "run"))
        _, walk = trace(lambda: ppo_td.load_policy(Path(folder) / "run"), walk_only=True)
    return {**summary(path), "walk": summary(walk)}


def _line(r: dict[str, Any]) -> str:
    top = ", ".join(f"{m.removeprefix('ppo_td.')} {n}" for m, n in list(r["entries"].items())[:3])
    return (f"{r['stops']} stops in {r['modules']} modules, {r['calls']} calls into another module, "
            f"{r['reentered']} modules entered more than once, {r['edges']} edges ({len(r['shared'])} modules called "
            f"from several), {r['climbs']} climbs to a higher layer; most entered: {top}")


def main(argv: list[str] | None = None) -> int:
    kinds = _kinds()
    parser = argparse.ArgumentParser(prog="python -m benchmarks env_paths", description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", choices=list(kinds), default=list(kinds))
    parser.add_argument("--repeats", type=int, default=5, help="builds timed per kind (the median is reported)")
    parser.add_argument("--json", type=Path, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    import torch

    from ppo_td.envs import build_env

    torch.set_num_threads(1)
    files = envs_files()
    print(f"ppo_td/envs: {len(files)} files, {sum(n for _, n in files)} lines; "
          + ", ".join(f"{name} {n}" for name, n in sorted(files, key=lambda f: -f[1])))
    results: dict[str, Any] = {"envs_files": dict(files)}
    for kind in args.kinds:
        config = kinds[kind]()
        try:
            build_env(config, seed=1).env.close()  # the imports, and whether this machine has the packages
        except (ImportError, ValueError) as err:
            print(f"{kind}: skipped ({str(err).splitlines()[0][:120]})")
            continue
        built, path = trace(lambda config=config: build_env(config, seed=1))
        built.env.close()
        one = dataclasses.replace(config, num_envs=1)
        built, walk = trace(lambda one=one: build_env(one, seed=1), walk_only=True)
        built.env.close()
        results[kind] = {**summary(path), "walk": summary(walk), "build_seconds": build_time(config, args.repeats)}
        print(f"{kind} ({config.env_id}): {_line(results[kind])}; build {results[kind]['build_seconds'] * 1000:.0f} ms "
              f"(median of {args.repeats})\n    the walk alone (one copy, the env's own code left out): "
              f"{_line(results[kind]['walk'])}")
    results["load_policy"] = load_policy_path()
    print(f"load_policy (a cartpole run): {_line(results['load_policy'])}\n    the walk alone (the env's own code "
          f"left out): {_line(results['load_policy']['walk'])}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
