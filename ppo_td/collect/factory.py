"""Choosing and building the collector a config asks for."""

from __future__ import annotations

import logging
from typing import Any

import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import EnvBase

from ppo_td.collect.agents import AgentsCollector
from ppo_td.collect.envloop import EnvLoopCollector
from ppo_td.collect.fast import FastCollector, FastUnsupported
from ppo_td.collect.workers import WorkerCollector, make_worker_collector
from ppo_td.config import TrainConfig
from ppo_td.envs import BuiltEnv
from ppo_td.envs.multiagent import describe_any
from ppo_td.models import make_actor_critic
from ppo_td.models.recurrent import collection_policy


def make_collector(env: BuiltEnv | EnvBase, actor: TensorDictModule, config: TrainConfig, done_frames: int = 0,
                   critic: TensorDictModule | None = None,
                   device: torch.device | str = "cpu") -> FastCollector | AgentsCollector | Collector | WorkerCollector:
    """A collector yielding ``[num_envs, steps_per_env]`` batches, where ``config.collector`` says.

    In-process (default), ``env`` is stepped here: by :class:`~ppo_td.collect.FastCollector`
    (the same batches without TorchRL's per-step overhead) where it can run ``env`` (a
    :class:`~ppo_td.envs.BuiltEnv`) and ``actor`` (one ppo_td's factories built), a VMAS agent group by
    :class:`~ppo_td.collect.AgentsCollector` likewise, else by TorchRL's ``Collector`` (``collector.step_loop``
    chooses). With ``collector.backend``
    'process' or 'ray' the workers build their own envs (:mod:`ppo_td.collect.workers`)
    and ``env`` stays the learner's copy that holds the merged normalization statistics.
    ``done_frames`` (a resumed run's frame count) shortens the budget accordingly. ``critic``: when it shares
    the actor's trunk, the fast collector records V(s) as it goes (its head costs little there). ``device``:
    where ``actor`` runs (observations go there each step, actions come back; the batch is stored on the CPU).
    ``config.compile``: ``True`` compiles the fast collector's policy step; ``'auto'`` here is eager (the pipeline
    resolves it for the whole run: :func:`ppo_td.training.compiles`).
    """
    total_frames = config.num_iterations * config.frames_per_batch - done_frames
    if config.collector.backend != "inprocess":
        if not any(q.device.type != "cpu" for q in actor.parameters()):
            return make_worker_collector(config, actor, total_frames, critic=critic)
        # a learner on a GPU: the workers act with CPU copies, made by the same factory (the distribution's bounds
        # on the CPU too), refreshed from the learner's weights at every push
        cpu_actor, cpu_critic = make_actor_critic(describe_any(torchrl_env(env)), config.model)
        cpu_actor.load_state_dict(actor.state_dict())
        if critic is not None:
            cpu_critic.load_state_dict(critic.state_dict())
        return make_worker_collector(config, cpu_actor, total_frames, critic=cpu_critic if critic is not None else None,
                                     learner=(actor, critic))
    if config.collector.step_loop != "torchrl":
        try:
            if isinstance(env, BuiltEnv) and env.simulator is not None:  # (config: inference is not 'numpy')
                return AgentsCollector(env, actor, frames_per_batch=config.frames_per_batch,
                                       total_frames=total_frames, device=device)
            return FastCollector(env, actor, frames_per_batch=config.frames_per_batch, total_frames=total_frames,
                                 critic=critic, device=device, inference=config.collector.inference,
                                 compile=config.compile is True)
        except FastUnsupported as err:
            if config.collector.step_loop == "auto" and describe_any(torchrl_env(env)).group is None:
                try:  # one agent: the env's own step in ppo_td's loop
                    loop = EnvLoopCollector(env, actor, frames_per_batch=config.frames_per_batch,
                                            total_frames=total_frames, critic=critic, device=device,
                                            inference=config.collector.inference, compile=config.compile is True)
                    logging.getLogger("ppo_td").warning(
                        "collecting with ppo_td's env loop (the env's own TorchRL step; a resume is inexact): %s", err)
                    return loop
                except FastUnsupported as loop_err:
                    err = FastUnsupported(f"{err}; {loop_err}")
            if config.collector.inference == "numpy":
                if str(err).startswith("collector.inference"):  # the policy is the reason: its message says so
                    raise
                raise FastUnsupported(f"collector.inference='numpy' needs the fast collector, which cannot run "
                                      f"this env: {err}") from err
            if config.collector.step_loop == "fast":
                raise FastUnsupported(f"collector.step_loop='fast': {err}. Set collector.step_loop='auto' or "
                                      "'torchrl' to collect with TorchRL's Collector") from err
            logging.getLogger("ppo_td").warning("collecting with TorchRL's Collector (a few hundred microseconds "
                                                "more per step than ppo_td's own step loop): %s", err)
    if not isinstance(env, BuiltEnv):  # TorchRL's Collector closes its env on reaching total_frames; ppo_td cannot
        total_frames += config.frames_per_batch  # rebuild this one, and evaluates on it: the loop stops at the plan
    env_device = torch.device(torchrl_env(env).device or "cpu")
    devices = {}
    if torch.device(device).type != "cpu" or env_device.type != "cpu":  # the batch is stored where the env steps:
        # a GPU env's rollout stays on the GPU (the loop moves it once, where the networks are elsewhere)
        devices = {"policy_device": device, "env_device": env_device, "storing_device": env_device}
    return Collector(
        torchrl_env(env),
        collection_policy(actor, critic),  # with a critic that has a recurrent state of its own: both
        frames_per_batch=config.frames_per_batch,
        total_frames=total_frames,
        auto_register_policy_transforms=False,  # our actor is stateless: it needs no InitTracker
        **devices,
    )


def adopt_collector(collector: Any) -> Any:
    """A collector passed in from Python, ready for the loop: TorchRL's multi-process and Ray collectors are
    wrapped in :class:`~ppo_td.collect.WorkerCollector`, so the loop pushes weights and statistics to their
    workers and names a dead worker; any other collector is used as it is."""
    from torchrl.collectors import MultiCollector

    if isinstance(collector, MultiCollector):
        return WorkerCollector(collector, "process")
    # RayCollector is matched by name: importing its class imports Ray (about 2 s)
    if any(c.__name__ == "RayCollector" for c in type(collector).__mro__):
        return WorkerCollector(collector, "ray")
    return collector


def torchrl_env(env: BuiltEnv | EnvBase) -> EnvBase:
    """The TorchRL env of ``env`` (a :class:`~ppo_td.envs.BuiltEnv` or a TorchRL env itself)."""
    return env.env if isinstance(env, BuiltEnv) else env
