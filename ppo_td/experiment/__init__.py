"""One run of PPO as every entry point runs it (``ppo_td.train``, ``ppo_td.resume``, ``ppo-td train``, the tuner):
the run folder and its records, progress, evaluation during training, Ctrl-C, the final checkpoint and evaluation
(BenchMARL's ``Experiment``: one run layer under every entry point). A layer above ``deploy`` (videos) and
``persist`` (run folders), below ``tuning`` and ``cli``.

Its names load their modules (and TorchRL) on first use, so the command line's light parts (``signals``,
``report``) import without them.
"""

from typing import Any

_WHERE = {"Best": "evaluator", "PeriodicEvaluation": "evaluator", "Session": "session",
          "TrainingInterrupted": "ending", "exit_on": "ending", "resume": "start", "train": "start"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ppo_td.experiment' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"ppo_td.experiment.{_WHERE[name]}"), name)
