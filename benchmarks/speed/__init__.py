"""Throughput and cost: frames/s, seconds per update, latency and memory of ppo_td, beside Stable-Baselines3 (and skrl)
at the same settings or against its own other paths. The suites ``python -m benchmarks quick|mujoco|atari``
(``suites.py``: CartPole time to solve, throughput at CleanRL's, the published MuJoCo and CleanRL's Atari settings, the
masked trading env), ``latency``, ``entry_points``, ``env_paths`` and ``soak``, and one module per question, each
``python -m benchmarks NAME``: ``commits`` (the same run at several commits), ``fast_paths``, ``compile``, ``threads``,
``vectorization``, ``spaces``, ``masking``, ``presets``, ``profile_steps``, ``record_check``, ``guard_overhead``,
``torchrl_envs``, ``vmas_resets`` and ``mujoco_full`` (``mujoco.py``: the 1M-frame MuJoCo runs)."""
