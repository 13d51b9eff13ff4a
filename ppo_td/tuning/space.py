"""What a trial changes in the base config: a search space, sampled by an Optuna trial into config fields by their
dotted names (``optim.lr``), and the sampled values applied to the config, repaired where the config refuses them.

The default, :func:`rl_zoo`, is RL Zoo's PPO space (``rl_zoo3/hyperparams_opt.py``, ``sample_ppo_params``, v2.8)
translated to ppo_td's fields; one range differs (the minibatch size, see :data:`RL_ZOO_RANGES`). A user's own space
is a Python function ``module:function`` (called with the trial and the base config, returning ``{field: value}``)
or a file of ranges (:func:`from_file`). Fields a space does not name stay as the base config has them.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig

Space = Callable[[Any, TrainConfig], dict[str, Any]]
"""``space(trial, base) -> {dotted field: value}``: what one trial changes (``trial`` is an ``optuna.Trial``)."""

NETWORKS = {"tiny": (64,), "small": (64, 64), "medium": (256, 256)}
"""RL Zoo's ``net_arch`` names: the hidden layers of the policy and of the value network (each its own)."""

RL_ZOO_RANGES = {
    "optim.lr": "1e-5 to 2e-3, log (learning_rate)",
    "frames_per_batch": "env.num_envs x 2^5 to 2^12 steps (n_steps)",
    "optim.num_minibatches": "the batch over a minibatch of 2^5 to 2^10 frames (RL Zoo's batch_size: 2^2 to 2^10; "
                             "ppo_td starts at 32: each minibatch is a forward, backward and optimizer step, and "
                             "4-16-frame minibatches make one epoch of a 32k batch 2,000-8,000 of them)",
    "optim.update_epochs": "1, 5, 10 or 20 (n_epochs)",
    "loss.gamma": "1 - (1e-4 to 0.03, log) (one_minus_gamma)",
    "loss.gae_lambda": "1 - (1e-4 to 0.1, log) (one_minus_gae_lambda)",
    "loss.clip_epsilon": "0.1, 0.2, 0.3 or 0.4 (clip_range)",
    "loss.entropy_coeff": "1e-8 to 0.1, log (ent_coef)",
    "optim.max_grad_norm": "0.3 to 2 (max_grad_norm)",
    "model.hidden_sizes": "tiny (64), small (64, 64) or medium (256, 256) (net_arch)",
    "model.activation": "tanh or relu (activation_fn)",
}
"""The default space, field by field, as ``ppo-td tune --help`` and ``docs/tuning.md`` say it."""


def rl_zoo(trial: Any, base: TrainConfig) -> dict[str, Any]:
    """RL Zoo's PPO space (:data:`RL_ZOO_RANGES`), for a base config with ``base.env.num_envs`` copies."""
    steps = 2 ** trial.suggest_int("n_steps_pow", 5, 12)
    minibatch = 2 ** trial.suggest_int("minibatch_pow", 5, 10)
    frames = steps * base.env.num_envs
    return {
        "optim.lr": trial.suggest_float("lr", 1e-5, 2e-3, log=True),
        "frames_per_batch": frames,
        "optim.num_minibatches": max(1, frames // minibatch),
        "optim.update_epochs": trial.suggest_categorical("update_epochs", [1, 5, 10, 20]),
        "loss.gamma": 1.0 - trial.suggest_float("one_minus_gamma", 1e-4, 0.03, log=True),
        "loss.gae_lambda": 1.0 - trial.suggest_float("one_minus_gae_lambda", 1e-4, 0.1, log=True),
        "loss.clip_epsilon": trial.suggest_categorical("clip_epsilon", [0.1, 0.2, 0.3, 0.4]),
        "loss.entropy_coeff": trial.suggest_float("entropy_coeff", 1e-8, 0.1, log=True),
        "optim.max_grad_norm": trial.suggest_float("max_grad_norm", 0.3, 2.0),
        "model.hidden_sizes": NETWORKS[trial.suggest_categorical("network", list(NETWORKS))],
        "model.activation": trial.suggest_categorical("activation", ["tanh", "relu"]),
    }


def from_file(path: str | Path) -> Space:
    """A space from a JSON, TOML or YAML file: ``{field: range}``, each range one of
    ``{"low": L, "high": H}`` (a float; ``"log": true`` for a log scale, ``"int": true`` for integers, ``"step": S``),
    ``{"choices": [...]}``, or a plain value (fixed for every trial). Checked when read: an unknown field, or a
    range without ``low`` < ``high``, is an error naming it."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(f"--space {path}: cannot read it ({err})") from err
    try:
        if path.suffix == ".json":
            ranges = json.loads(text)
        elif path.suffix == ".toml":
            import tomllib

            ranges = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            ranges = yaml.safe_load(text)
        else:
            raise ValueError("give a .json, .toml, .yaml or .yml file")
    except ValueError as err:  # json, toml and yaml's errors are ValueErrors (yaml's YAMLError is checked below)
        raise ValueError(f"--space {path}: not a space file ({err})") from err
    except Exception as err:  # noqa: BLE001 - yaml.YAMLError, without importing yaml where it is not used
        raise ValueError(f"--space {path}: not a space file ({err})") from err
    if not isinstance(ranges, dict) or not ranges:
        raise ValueError(f"--space {path}: expected a table of config fields, each a range, choices or a value")
    for name, spec in ranges.items():
        field_path(TrainConfig(), name)  # an unknown field, named
        if isinstance(spec, dict):
            _check_range(path, name, spec)
            default = _value_at(TrainConfig(), name)
            if "choices" not in spec and isinstance(default, int) and not isinstance(default, bool) \
                    and not spec.get("int"):
                raise ValueError(f"--space {path}: {name} is a whole number: add int: true to its range")
    return FileSpace(ranges)


class FileSpace:
    """A space read from a file (:func:`from_file`): picklable, so worker processes take it as it is."""

    def __init__(self, ranges: dict[str, Any]) -> None:
        self.ranges = ranges

    def __call__(self, trial: Any, base: TrainConfig) -> dict[str, Any]:
        return {name: _sample(trial, name, spec) for name, spec in self.ranges.items()}


def _value_at(config: Any, name: str) -> Any:
    for part in name.split("."):
        config = getattr(config, part)
    return config


def _check_range(path: Path, name: str, spec: dict[str, Any]) -> None:
    keys = set(spec)
    if "choices" in spec:
        if not (isinstance(spec["choices"], list) and spec["choices"]) or keys - {"choices"}:
            raise ValueError(f"--space {path}: {name}: choices must be a non-empty list, alone")
        return
    if not {"low", "high"} <= keys or keys - {"low", "high", "log", "int", "step"}:
        raise ValueError(f"--space {path}: {name}: give low and high (and optionally log, int, step), or choices; "
                         f"got {sorted(keys)}")
    numbers = [spec[k] for k in ("low", "high", "step") if k in spec]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        raise ValueError(f"--space {path}: {name}: low, high and step must be numbers, got {numbers} (YAML reads "
                         "1e-5 as text: write 1.0e-5)")
    if spec.get("log") and "step" in spec:
        raise ValueError(f"--space {path}: {name}: a log scale takes no step (Optuna's rule): drop one")
    if not spec["low"] < spec["high"] or (spec.get("log") and spec["low"] <= 0):
        raise ValueError(f"--space {path}: {name}: needs low < high (and low > 0 on a log scale), got "
                         f"{spec['low']} and {spec['high']}")


def _sample(trial: Any, name: str, spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    if "choices" in spec:
        choices = spec["choices"]
        if all(isinstance(c, (bool, int, float, str)) or c is None for c in choices):
            return trial.suggest_categorical(name, choices)
        index = trial.suggest_categorical(name, [json.dumps(c) for c in choices])  # lists: Optuna takes scalars
        return json.loads(index)
    if spec.get("int"):
        return trial.suggest_int(name, int(spec["low"]), int(spec["high"]), step=int(spec.get("step", 1)),
                                 log=bool(spec.get("log", False)))
    return trial.suggest_float(name, float(spec["low"]), float(spec["high"]), step=spec.get("step"),
                               log=bool(spec.get("log", False)))


def load_space(given: str | Space | None) -> Space:
    """The space ``--space`` names: None for RL Zoo's (:func:`rl_zoo`), a file of ranges (:func:`from_file`), a
    ``module:function``, or (from Python) the function itself."""
    if given is None:
        return rl_zoo
    if callable(given):
        return given
    if Path(given).suffix in (".json", ".toml", ".yaml", ".yml"):
        return from_file(given)
    if given.endswith(".py") or ":" not in given:
        raise ValueError(f"--space {given}: give module:function (a function of an importable module, e.g. "
                         "my_spaces:space for my_spaces.py in the current folder) or a .json, .toml or .yaml file")
    from ppo_td.envs import import_attr

    return import_attr(given, "--space")


def field_path(config: Any, name: str) -> tuple[str, ...]:
    """``name`` (``optim.lr``, ``frames_per_batch``) split into the config's fields; an unknown one is an error
    naming the fields there are."""
    parts = tuple(name.split("."))
    node = config
    for i, part in enumerate(parts):
        known = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
        if part not in known:
            where = ".".join(parts[:i]) or "the config"
            raise ValueError(f"the search space sets {name!r}, which is not a config field ({where} has: "
                             f"{', '.join(known)})")
        node = getattr(node, part)
    return parts


def apply(base: TrainConfig, values: dict[str, Any]) -> TrainConfig:
    """``base`` with ``values`` set by dotted name (sequences as tuples, as a config keeps them); the config's own
    checks run on the result, so a combination it refuses raises its ``ValueError``."""
    changes: dict[tuple[str, ...], Any] = {field_path(base, name): value for name, value in values.items()}

    def rebuilt(node: Any, prefix: tuple[str, ...]) -> Any:
        kwargs = {}
        for f in dataclasses.fields(node):
            path = (*prefix, f.name)
            if path in changes:
                value = changes[path]
                kwargs[f.name] = tuple(value) if isinstance(value, list) else value
            elif any(p[:len(path)] == path for p in changes) and dataclasses.is_dataclass(getattr(node, f.name)):
                kwargs[f.name] = rebuilt(getattr(node, f.name), path)
        return dataclasses.replace(node, **kwargs)

    return rebuilt(base, ())


def repaired(base: TrainConfig, values: dict[str, Any], frames: int) -> tuple[TrainConfig, list[str]]:
    """The trial's config and what was repaired to make it one the config takes and ``frames`` can train:

    - a batch larger than ``frames`` / 4 is cut (at least 4 updates a trial; the batch stays a multiple of
      ``env.num_envs``);
    - ``optim.num_minibatches`` that does not divide the batch, or leaves minibatches of fewer than 2 frames (the
      advantage normalization needs 2), becomes the nearest count that does.

    Raises ``ValueError`` (the config's own, naming the field) for any other combination it refuses: the trial is
    then skipped with that reason."""
    values = dict(values)
    notes: list[str] = []
    num_envs = int(values.get("env.num_envs", base.env.num_envs))
    batch = int(values.get("frames_per_batch", base.frames_per_batch))
    cap = max(num_envs, (frames // 4) // num_envs * num_envs)
    if batch > cap:
        notes.append(f"frames_per_batch {batch} -> {cap} (at least 4 updates in {frames} frames)")
        old_minibatch = batch / max(1, int(values.get("optim.num_minibatches", base.optim.num_minibatches)))
        batch = cap
        values["frames_per_batch"] = batch
        if "optim.num_minibatches" in values:  # keep the minibatch size the trial sampled
            values["optim.num_minibatches"] = max(1, round(batch / old_minibatch))
    if "frames_per_batch" in values or "optim.num_minibatches" in values:
        count = int(values.get("optim.num_minibatches", base.optim.num_minibatches))
        fitted = _divisor_near(batch, count)
        if fitted != count:
            notes.append(f"optim.num_minibatches {count} -> {fitted} (dividing a batch of {batch} frames into "
                         "minibatches of 2 or more)")
            values["optim.num_minibatches"] = fitted
    return apply(dataclasses.replace(base, total_frames=frames), values), notes


def _divisor_near(batch: int, count: int) -> int:
    """The divisor of ``batch`` nearest ``count`` (on a log scale) that leaves at least 2 frames a minibatch."""
    divisors = [d for d in range(1, batch // 2 + 1) if batch % d == 0] or [1]
    return min(divisors, key=lambda d: (abs(math.log(d) - math.log(max(count, 1))), d))
