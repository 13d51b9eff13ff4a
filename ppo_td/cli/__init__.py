"""Command line: ``ppo-td train``, ``ppo-td eval`` and ``ppo-td doctor`` (the top layer)."""

import gc
import sys
from typing import NoReturn

from ppo_td.cli.main import command, main
from ppo_td.experiment.signals import end_promptly

STOP_NOW_S = 1.0
"""Seconds the ``ppo-td`` script's process may take to end once a signal stopped a command at once (the second
Ctrl-C or SIGTERM of a run): the interpreter otherwise waits for threads others started, such as torch's C++ compiler
threads of a loss being compiled (1.0-4.5 s measured beside two benchmark runs, over 5 s once in the test suite,
2026-12-07). The command's own files are closed and its lines said before this starts."""


def script() -> NoReturn:
    """The ``ppo-td`` script: :func:`main`, then a prompt exit. The interpreter's last garbage collections walk
    torch's and TorchRL's whole object graph (0.8 s measured after an evaluation, 0.1 s frozen); the process's
    memory goes back to the system anyway, so they are skipped (``gc.freeze``: exit handlers still run). After a
    command that a signal ended, a further SIGINT or SIGTERM ends the process at once, and one stopped at once ends
    within :data:`STOP_NOW_S` (:func:`~ppo_td.experiment.signals.end_promptly`)."""
    code, signalled = command()
    if signalled is not None:
        end_promptly(code, STOP_NOW_S if signalled == "now" else None)
    gc.freeze()
    sys.exit(code)


__all__ = ["main", "script"]
