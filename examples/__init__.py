"""Examples that use ppo_td from outside the library (run from the repository folder)."""
