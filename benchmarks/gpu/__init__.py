"""The accelerator suite, ``python -m benchmarks gpu`` (``run.py``): VMAS navigation at thousands of envs, ppo_td beside
TorchRL's own MAPPO parts, and Atari Pong with env processes, ppo_td beside SB3, on ``--device cuda``: frames/s with
collection and update apart, and reward against wall time."""
