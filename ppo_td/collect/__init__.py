"""Collection: the fast in-process collector, TorchRL's Collector as the fallback, worker processes and Ray."""

from ppo_td.collect.agents import AgentsCollector
from ppo_td.collect.envloop import EnvLoopCollector
from ppo_td.collect.factory import adopt_collector, make_collector, torchrl_env
from ppo_td.collect.failures import WorkerError
from ppo_td.collect.fast import FastCollector, FastEnv, FastPolicy, FastUnsupported
from ppo_td.collect.workers import (
    WorkerCollector,
    batches,
    gather_statistics,
    is_multi_worker,
    push_to_workers,
    shutdown,
)

__all__ = [
    "AgentsCollector",
    "EnvLoopCollector",
    "FastCollector",
    "FastEnv",
    "FastPolicy",
    "FastUnsupported",
    "WorkerCollector",
    "WorkerError",
    "adopt_collector",
    "batches",
    "gather_statistics",
    "is_multi_worker",
    "make_collector",
    "push_to_workers",
    "shutdown",
    "torchrl_env",
]
