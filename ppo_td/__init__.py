"""ppo_td: Proximal Policy Optimization from TorchRL and TensorDict parts.

Layers, each importing only the ones below it (``docs/architecture.md``)::

    cli                 ppo-td train / tune / eval / export / doctor
    tuning              hyper-parameter search on Optuna: several seeds a trial, winners confirmed
    deploy              a trained policy in use: Policy, exports, videos
    doctor | persist    the autograd audit | checkpoints, run folders, logs
    training            objective (GAE + ClipPPOLoss), pipeline, the one loop, evaluation
    collect             the fast in-process collector, worker processes, Ray
    models              networks, actor and critic, distributions
    envs                Gymnasium id -> batched TorchRL env + transforms, and its description
    presets, config, keys

Importing ppo_td changes nothing outside it: no patches, no env registrations.
"""

from typing import Any

from ppo_td.config import (
    CollectorConfig,
    EnvConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    with_info_keys,
)
from ppo_td.presets import PRESETS, get_preset


def train(config: TrainConfig, *, callbacks: Any = (), run_dir: str | None = None, threads: int | None = None,
          loggers: Any = (), project: str | None = None, info_keys: Any = (), **parts: Any) -> Any:
    """Train PPO with ``config`` (see :func:`ppo_td.training.train`); any part may be passed in.

    ``env`` may be a factory, a Gymnasium env or vector env, a ppo_td ``BuiltEnv`` or a TorchRL env
    (:func:`ppo_td.training.build_pipeline`); ``encoder`` replaces the observation encoder. With ``run_dir``,
    writes the run folder ``ppo-td train`` writes (checkpoints included), resumable with
    ``ppo-td train --resume`` and evaluable with ``ppo-td eval``. ``threads``: torch threads while it trains; None
    chooses as ``ppo-td train`` does (1 for vector observations, torch's default for images), keeping a count the
    user set before with ``torch.set_num_threads`` (:mod:`ppo_td.training.threads`). ``loggers``: names
    (``tensorboard``, ``wandb``, ``mlflow``: offline-safe, writing into ``run_dir``; :mod:`ppo_td.persist.loggers`)
    or ``torchrl.record.loggers`` Logger objects of yours (any run), each given the config and every iteration's
    metrics (``project``: the W&B project or MLflow experiment, as ``--project``). ``info_keys``: the env's info
    entries recorded per episode (``env.info_keys``, e.g. ``["is_success"]``: the value at an episode's last step,
    in ``TrainResult.episodes``, the metrics and every log). Returns a ``TrainResult``.
    Loads TorchRL on first use, so ``import ppo_td.doctor`` or ``ppo_td.config`` stays light.
    """
    config = with_info_keys(config, [info_keys] if isinstance(info_keys, str) else info_keys)
    if isinstance(loggers, (str, bytes)) or not isinstance(loggers, (list, tuple)):
        raise TypeError(f"loggers must be a list of logger names or torchrl Logger objects, got {loggers!r}")
    names = [lg for lg in loggers if isinstance(lg, str)]
    objects = [lg for lg in loggers if not isinstance(lg, str)]
    if objects:
        from ppo_td.persist.loggers import ToLoggers

        callbacks = [*callbacks, ToLoggers(objects)]
    if run_dir is None:
        if names:
            raise ValueError(f"loggers={names}: loggers by name write into the run folder: pass run_dir=..., or "
                             "torchrl.record.loggers Logger objects you made")
        from ppo_td.training import train as train_here

        return train_here(config, callbacks=callbacks, threads=threads, **parts)
    from ppo_td.cli.run import train_in_folder

    return train_in_folder(config, run_dir, callbacks=callbacks, threads=threads, loggers=names, project=project,
                           **parts)


def tune(config: TrainConfig, **kwargs: Any) -> Any:
    """Search ``config``'s hyper-parameters with Optuna, as ``ppo-td tune`` does (the same defaults and checks):
    each trial trains on several seeds, each run a run folder; the top trials are trained again on fresh seeds
    beside ``config`` before a winner is named. Keyword arguments as :func:`ppo_td.tuning.tune` (``trials``,
    ``seeds``, ``frames``, ``score``, ``envs``, ``ranges``, ``space``, ``sampler``, ``pruner``, ``workers``,
    ``storage``, ``folder``, ``confirm``, ``confirm_seeds``...). Returns a :class:`~ppo_td.tuning.TuneResult`
    (``best_config``, the confirmation table); the study folder holds ``best_config.json`` and ``report.md``."""
    from ppo_td.cli.run import train_in_folder
    from ppo_td.tuning import tune as run_study

    return run_study(config, train=train_in_folder, **kwargs)


def load_policy(path: str, **kwargs: Any) -> Any:
    """The trained policy of a run folder or checkpoint as a :class:`ppo_td.deploy.Policy`: raw observations in,
    actions for the env out (a multi-agent run's :class:`ppo_td.deploy.AgentsPolicy`, or with several agent groups
    its :class:`ppo_td.deploy.TeamPolicy`: the agents' observations in, their actions out; see
    :func:`ppo_td.deploy.load_policy`)."""
    from ppo_td.deploy import load_policy as load

    return load(path, **kwargs)


def __getattr__(name: str) -> Any:
    """``ppo_td.TrainResult`` and ``ppo_td.Policy`` load their layers (and TorchRL) on first use."""
    if name == "TrainResult":
        from ppo_td import training

        return getattr(training, name)
    if name == "Policy":
        from ppo_td import deploy

        return deploy.Policy
    raise AttributeError(f"module 'ppo_td' has no attribute {name!r}")

__all__ = [
    "PRESETS",
    "CollectorConfig",
    "EnvConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "Policy",
    "TrainConfig",
    "TrainResult",
    "get_preset",
    "load_policy",
    "train",
    "tune",
]
__version__ = "0.2.0"
