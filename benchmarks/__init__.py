"""Benchmarks of ppo_td, run from the repository root: ``python -m benchmarks NAME [ARGS]`` (``python -m benchmarks
--help`` lists the names). A folder per kind of benchmark: ``speed/`` (throughput and cost), ``returns/`` (returns
over seeds and the learning comparisons), ``doctor/``, ``scaling/``, ``gpu/``; ``common/`` holds what they share (the
per-run worker, the suites' harness); ``results/`` the stored results."""
