"""Scaling: how frames/s grow with more env copies, worker processes or ranks. ``python -m benchmarks scaling``
(``env_scaling.py``: ppo_td and SB3 at 1 to 64 CartPole and 1 and 8 HalfCheetah copies, with peak RSS),
``scaling_workers`` (``workers.py``: collection in-process, in 2 worker processes or 2 Ray workers) and
``distributed`` (``distributed.py``: one run over 1, 2, ... ranks with torchrun, throughput and returns)."""
