"""Benchmarks of ppo_td, run from the repository root: ``python -m benchmarks quick|mujoco|doctor``."""
