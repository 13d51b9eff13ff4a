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
)
from ppo_td.presets import PRESETS, get_preset


def train(config: TrainConfig, *, run_dir: str | None = None, callbacks: Any = (), progress: bool | str = True,
          log_every: int | None = None, threads: int | None = None, loggers: Any = (), project: str | None = None,
          info_keys: Any = (), checkpoint_every: int = 10, keep_checkpoints: int = 3, overwrite: bool = False,
          video_every: int = 0, **parts: Any) -> Any:
    """Train PPO with ``config``, as ``ppo-td train`` does (one code path: the same checks, notes, progress, Ctrl-C,
    evaluations); any part may be passed in. Returns a ``TrainResult``.

    - ``env``: a factory (a module-level function or class, a ``functools.partial`` of one), a Gymnasium env or vector
      env, a ppo_td ``BuiltEnv`` or a TorchRL env (:func:`ppo_td.training.build_pipeline`). ppo_td trains on copies
      made from its record, checked to equal the env given (same spaces, same first steps from a seed), or refuses
      it naming why; one defined in the running script is recorded by the script's file (docs/custom-envs.md).
      ``encoder``, ``actor``, ``critic``, ``loss``, ``optimizer``, ``transforms``... replace the defaults.
    - ``run_dir``: writes the run folder ``ppo-td train`` writes (checkpoints every ``checkpoint_every`` iterations,
      ``keep_checkpoints`` kept; ``overwrite`` replaces a run there), continued with :func:`resume` (``ppo-td train
      --resume``), evaluated with ``ppo-td eval`` or :func:`load_policy`; ``video_every`` records videos into it.
    - ``progress``: a bar on a terminal or in a notebook, a line every ``log_every`` iterations when piped
      (``"lines"``: lines always, as ``--no-progress``); ``False`` for neither. Notes and the evaluations are
      printed either way.
    - ``callbacks``: functions ``f(metrics, pipeline)`` called every iteration, or objects with ``on_iteration``,
      ``on_evaluation`` and ``on_end`` (:mod:`ppo_td.training.callbacks`, docs/callbacks.md).
    - ``config.eval_every``: evaluation during training, the best policy kept (``best.pt``), ``eval_stop_return``
      ends the run there.
    - ``threads``: torch threads while it trains; None chooses as ``ppo-td train`` does (1 for vector observations,
      torch's default for images), keeping a count the user set before (:mod:`ppo_td.training.threads`).
    - ``loggers``: names (``tensorboard``, ``wandb``, ``mlflow``: offline-safe, writing into ``run_dir``) or
      ``torchrl.record.loggers`` Logger objects of yours, each given the config, every iteration's metrics, the
      evaluations and the final one (``project``: the W&B project or MLflow experiment, as ``--project``).
    - ``info_keys``: the env's info entries recorded per episode (``env.info_keys``, e.g. ``["is_success"]``).

    Ctrl-C (or SIGTERM, a notebook's interrupt) stops at the end of the iteration, checkpoints into ``run_dir`` and
    raises ``KeyboardInterrupt`` (:class:`ppo_td.experiment.TrainingInterrupted`) saying how to continue; a second
    stops at once. Loads TorchRL on first use, so ``import ppo_td.doctor`` or ``ppo_td.config`` stays light.
    """
    from ppo_td.experiment import train as train_run

    try:
        return train_run(config, run_dir=run_dir, callbacks=callbacks, progress=progress, log_every=log_every,
                         threads=threads, loggers=loggers, project=project, info_keys=info_keys,
                         checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints, overwrite=overwrite,
                         video_every=video_every, **parts)
    except KeyboardInterrupt as err:
        raise err.with_traceback(None) from None  # Python's way to say Ctrl-C, without ppo_td's frames


def resume(run_dir: str, **kwargs: Any) -> Any:
    """Continue the run in ``run_dir`` from its checkpoint, as ``ppo-td train --resume`` does: exactly where ppo_td
    can (``run.json`` says), with the config, weights, statistics and random state the checkpoint holds; a run
    whose training is done but whose final evaluation did not run gets it. Keyword arguments: ``callbacks``,
    ``progress``, ``log_every``, ``threads``, ``loggers``, ``project``, ``checkpoint_every``, ``keep_checkpoints``,
    ``video_every`` as :func:`train`; ``collector`` (``CollectorConfig`` fields to change, e.g. ``{"backend":
    "process", "num_workers": 2}``), ``device`` and ``eval_max_steps`` (where the run goes on). Returns a
    ``TrainResult``; Ctrl-C as in :func:`train`."""
    from ppo_td.experiment import resume as resume_run

    try:
        return resume_run(run_dir, **kwargs)
    except KeyboardInterrupt as err:
        raise err.with_traceback(None) from None


def tune(config: TrainConfig, **kwargs: Any) -> Any:
    """Search ``config``'s hyper-parameters with Optuna, as ``ppo-td tune`` does (the same defaults and checks):
    each trial trains on several seeds, each run a run folder; the top trials are trained again on fresh seeds
    beside ``config`` before a winner is named. Keyword arguments as :func:`ppo_td.tuning.tune` (``trials``,
    ``seeds``, ``frames``, ``score``, ``envs``, ``ranges``, ``space``, ``sampler``, ``pruner``, ``workers``,
    ``storage``, ``folder``, ``confirm``, ``confirm_seeds``...). Returns a :class:`~ppo_td.tuning.TuneResult`
    (``best_config``, the confirmation table); the study folder holds ``best_config.json`` and ``report.md``."""
    from ppo_td.experiment import train as train_run
    from ppo_td.tuning import tune as run_study

    return run_study(config, train=train_run, **kwargs)


def load_policy(path: str, **kwargs: Any) -> Any:
    """The trained policy of a run folder or checkpoint as a :class:`ppo_td.deploy.Policy`: raw observations in,
    actions for the env out (``which="best"``: the run's best evaluation during training, ``best.pt``). A
    multi-agent run gives a :class:`ppo_td.deploy.AgentsPolicy`, or with several agent groups a
    :class:`ppo_td.deploy.TeamPolicy` (the agents' observations in, their actions out; see
    :func:`ppo_td.deploy.load_policy`)."""
    from ppo_td.deploy import load_policy as load

    return load(path, **kwargs)


def arena(players: Any, **kwargs: Any) -> Any:
    """A round robin of trained policies of a two-seat turn-based game (run folders or checkpoint files, e.g. a
    run's ``checkpoints/iter_N.pt``) and fixed anchors, as ``ppo-td arena`` plays it: every pair ``games`` games,
    the seats alternating; returns an :class:`~ppo_td.deploy.arena.ArenaResult` (``pairs()`` with Wilson
    intervals, ``ratings()`` from OpenSkill, ``curves()`` and ``plot(path)`` of a run's checkpoints, ``table()``).
    Keyword arguments as :func:`ppo_td.deploy.arena.arena` (``games``, ``anchors``, ``sampled``, ``seed``,
    ``which``); Ctrl-C raises :class:`~ppo_td.deploy.arena.ArenaInterrupted` holding the games played."""
    from ppo_td.deploy.arena import arena as play_arena

    return play_arena(players, **kwargs)


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
    "arena",
    "get_preset",
    "load_policy",
    "resume",
    "train",
    "tune",
]
__version__ = "0.2.0"
