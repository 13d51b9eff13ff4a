"""Hyper-parameter search on Optuna whose winner holds up: ``ppo-td tune`` and ``ppo_td.tune``.

Each trial trains its sampled config on several seeds (:mod:`ppo_td.tuning.trial`), each run a normal run folder;
a study is shared by worker processes through a journal file, or by machines through a database
(:mod:`ppo_td.tuning.study`); the top trials are trained again on fresh seeds beside the base config before a winner
is named (:mod:`ppo_td.tuning.confirm`); the report, the trials' CSV, the plots and ``best_config.json`` follow
(:mod:`ppo_td.tuning.report`). The search space is RL Zoo's PPO space by default (:mod:`ppo_td.tuning.space`).
"""

from ppo_td.tuning.run import TuneResult, tune
from ppo_td.tuning.space import RL_ZOO_RANGES, apply, rl_zoo

__all__ = ["RL_ZOO_RANGES", "TuneResult", "apply", "rl_zoo", "tune"]
