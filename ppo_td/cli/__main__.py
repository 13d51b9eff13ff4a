"""``python -m ppo_td.cli``: the ``ppo-td`` command."""

from ppo_td.cli import script

script()
