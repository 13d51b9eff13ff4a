"""Returns over seeds, and the learning comparisons. ``python -m benchmarks returns`` (``run.py``) trains suites of envs
with ppo_td and Stable-Baselines3 at the same settings into a result store that a rerun continues, and writes the
report with rliable's intervals (``report.py``); ``suites.py`` holds the suites, the published anchors and the
store's format, below both; ``python -m benchmarks published`` recomputes every published number from the store and
``store_history`` marks its records. The comparisons with other libraries and ablations: ``recurrent``
(sb3-contrib's RecurrentPPO), ``multiagent`` (BenchMARL, run by ``benchmarl_run.py`` in its own virtualenv),
``rsl_rl`` (``rsl_rl_side.py``), ``games`` (turn-based games, self-play), ``asymmetric`` and ``symmetry``
(``robot_parts.py``)."""
