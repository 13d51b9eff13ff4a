"""Search spaces for ``tests/test_tune.py`` (module-level: worker processes import them by name)."""

import os
import signal
from pathlib import Path


def small(trial, base):
    """Two fields: quick trials that differ."""
    return {"optim.lr": trial.suggest_float("lr", 1e-4, 3e-3, log=True),
            "optim.update_epochs": trial.suggest_categorical("update_epochs", [2, 4])}


def diverging(trial, base):
    """A learning rate no network survives: the first update makes its parameters inf (NonFiniteError)."""
    return {"optim.lr": trial.suggest_categorical("lr", [1e30])}


def refused(trial, base):
    """A combination the config refuses after repair: a discount above 1."""
    return {"loss.gamma": trial.suggest_categorical("gamma", [1.5])}


def dies_once(trial, base):
    """Kills its own worker process (SIGKILL) on the trial that first finds no marker file ($TUNE_MARKER)."""
    marker = Path(os.environ["TUNE_MARKER"])
    if not marker.exists():
        marker.write_text(str(trial.number))
        os.kill(os.getpid(), signal.SIGKILL)
    return small(trial, base)
