"""Experiment loggers beside the run folder's own CSVs: TorchRL's ``torchrl.record.loggers``, offline-safe.

``csv`` is the run folder's ``metrics.csv`` and ``episodes.csv`` (always written); ``tensorboard`` writes events to
``<run>/tensorboard``; ``wandb`` runs Weights & Biases in offline mode into ``<run>/wandb`` unless ``WANDB_MODE``
says otherwise (``wandb sync <run>/wandb/offline-run-*`` uploads it later; ``WANDB_MODE=online`` logs live), its
run id the run folder's, so ``--resume`` continues the same W&B run; ``mlflow`` logs to a local file store in
``<run>/mlruns`` unless ``MLFLOW_TRACKING_URI`` names a server. Each gets the config's fields as hyper-parameters
and every iteration's numeric metrics at its frame count.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOGGERS = ("csv", "tensorboard", "wandb", "mlflow")
"""The logger names ``--logger`` and ``loggers=`` take."""
_EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow-skinny omegaconf"}
_MODULES = {"tensorboard": ("tensorboard",), "wandb": ("wandb",), "mlflow": ("mlflow", "omegaconf")}
"""What each logger imports (TorchRL's MLflow logger reads hyper-parameters through omegaconf)."""


def check_loggers(names: Sequence[Any]) -> None:
    """Refuse an unknown logger name, or one whose library is not installed, before anything is built.

    Raises:
        ValueError: naming the logger and the fix (the names, or the pip install).
    """
    import importlib.util

    for name in names:
        if not isinstance(name, str) or name not in LOGGERS:
            raise ValueError(f"logger {name!r}: choose from {', '.join(LOGGERS)} (or pass a torchrl.record.loggers "
                             "Logger object from Python)")
        missing = [m for m in _MODULES.get(name, ()) if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"the {name} logger needs {' and '.join(missing)}: pip install {_EXTRAS[name]} (or pip "
                             "install -e '.[loggers]')")


def make_loggers(names: Sequence[str], run_dir: Path, run_name: str, run_id: str | None,
                 project: str | None = None) -> list[Any]:
    """TorchRL loggers for ``names`` writing under ``run_dir`` (``csv``: none, the run folder's CSVs are it).
    ``run_name`` names the run, ``run_id`` (the run folder's) keeps a W&B run across resumes, ``project`` is the W&B
    project or MLflow experiment (default ``ppo_td``)."""
    check_loggers(names)
    made = []
    for name in dict.fromkeys(names):
        if name == "tensorboard":
            from torchrl.record.loggers.tensorboard import TensorboardLogger

            made.append(TensorboardLogger(exp_name="tensorboard", log_dir=str(run_dir)))
        elif name == "wandb":
            from torchrl.record.loggers.wandb import WandbLogger

            mode = {} if os.environ.get("WANDB_MODE") else {"mode": "offline"}  # no network unless asked for
            made.append(WandbLogger(exp_name=run_name, save_dir=str(run_dir),
                                    project=project or os.environ.get("WANDB_PROJECT") or "ppo_td",
                                    id=run_id, log_env_packages=False, **mode))
        elif name == "mlflow":
            from torchrl.record.loggers.mlflow import MLFlowLogger

            uri = os.environ.get("MLFLOW_TRACKING_URI")
            if uri is None:  # a local store in the run folder: MLflow's file store, which it keeps behind a switch
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
                uri = (run_dir / "mlruns").absolute().as_uri()
            made.append(MLFlowLogger(exp_name=project or "ppo_td", tracking_uri=uri, tags={"run": run_name}))
    return made


def flat_hparams(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config's dict as ``section.field: value`` pairs, values as loggers take them (numbers, bools, strings)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat_hparams(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, (int, float, bool, str)) else str(value)
    return out


def log_config(loggers: Sequence[Any], config: dict[str, Any]) -> None:
    """A config's dict (``to_dict``'s) to each logger as hyper-parameters, but TensorBoard's, whose hparams need a
    metric of their own and land in a run folder apart (its scalars say enough)."""
    hparams = flat_hparams(config)
    for logger in loggers:
        if type(logger).__name__ != "TensorboardLogger":
            logger.log_hparams(hparams)


def number(value: Any) -> float | None:
    """``value`` as a float where it is one number (an int, a float, a numpy or torch scalar; not a bool), else
    None: what a metrics row logs of a value a callback put in it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):  # a 0-d array or tensor
        item = value.item()
        return float(item) if isinstance(item, numbers.Real) and not isinstance(item, bool) else None
    return None


def log_metrics(loggers: Sequence[Any], metrics: dict[str, Any]) -> None:
    """Each finite numeric metric of an iteration to each logger, at the iteration's frame count."""
    step = int(metrics["frames"])
    for name, raw in metrics.items():
        value = number(raw)
        if name in ("iteration", "frames") or value is None:
            continue
        if math.isfinite(value):
            for logger in loggers:
                logger.log_scalar(name, value, step=step)


def log_final(loggers: Sequence[Any], evaluations: Sequence[Any], frames: int) -> None:
    """The final evaluation to each logger, at the run's last frame count: ``final_eval_return`` (deterministic),
    ``final_eval_return_sampled``, and their ``_std`` (means over the episodes that ended, as ``summary.json``
    keeps them)."""
    for ev, suffix in zip(evaluations, ("", "_sampled"), strict=False):
        if not ev.returns:
            continue
        mean = sum(ev.returns) / len(ev.returns)
        std = math.sqrt(sum((r - mean) ** 2 for r in ev.returns) / len(ev.returns))
        for logger in loggers:
            logger.log_scalar(f"final_eval_return{suffix}", mean, step=frames)
            logger.log_scalar(f"final_eval_return{suffix}_std", std, step=frames)


def close_loggers(loggers: Sequence[Any]) -> None:
    """Finish each logger's run (W&B writes its offline files then; MLflow ends its run)."""
    for logger in loggers:
        logger.close()
        if type(logger).__name__ == "MLFlowLogger":  # its experiment is mlflow's active run, ended by mlflow
            import mlflow

            mlflow.end_run()


class ToLoggers:
    """Training callback sending the config (as hyper-parameters, at the first iteration), every iteration's
    metrics and the final evaluation to TorchRL loggers the caller made and owns (it does not close them):
    ``train(config, callbacks=[ToLoggers([WandbLogger(...)])])``, or ``train(config, loggers=[...])``."""

    def __init__(self, loggers: Sequence[Any]) -> None:
        from torchrl.record.loggers import Logger

        bad = [type(lg).__name__ for lg in loggers if not isinstance(lg, Logger)]
        if bad:
            raise TypeError(f"loggers: {bad} are not torchrl.record.loggers Logger objects (or give logger names, "
                            f"{', '.join(LOGGERS)}, with run_dir)")
        self.loggers, self._started = list(loggers), False

    def __call__(self, metrics: dict[str, Any], pipeline: Any) -> None:
        if not self._started:
            from ppo_td.config import to_dict

            log_config(self.loggers, to_dict(pipeline.config))
            self._started = True
        log_metrics(self.loggers, metrics)

    def on_end(self, result: Any) -> None:
        """The final evaluation (where one ran) at the run's last frame count."""
        if result.evaluation is not None and result.history:
            log_final(self.loggers, [result.evaluation, result.evaluation_sampled], int(result.history[-1]["frames"]))
