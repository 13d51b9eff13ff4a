"""Command line: ``ppo-td train``, ``ppo-td eval`` and ``ppo-td doctor`` (the top layer)."""

from ppo_td.cli.main import main

__all__ = ["main"]
