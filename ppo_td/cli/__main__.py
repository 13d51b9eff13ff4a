"""``python -m ppo_td.cli``: the ``ppo-td`` command."""

import sys

from ppo_td.cli.main import main

sys.exit(main())
