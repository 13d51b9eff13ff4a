"""Command line: ``ppo-td train``, ``ppo-td eval`` and ``ppo-td doctor`` (the top layer)."""

import gc
import sys
from typing import NoReturn

from ppo_td.cli.main import main


def script() -> NoReturn:
    """The ``ppo-td`` script: :func:`main`, then a prompt exit. The interpreter's last garbage collections walk
    torch's and TorchRL's whole object graph (0.8 s measured after an evaluation, 0.1 s frozen); the process's
    memory goes back to the system anyway, so they are skipped (``gc.freeze``: exit handlers still run)."""
    code = main()
    gc.freeze()
    sys.exit(code)


__all__ = ["main", "script"]
