"""Small factories for the remaining parts, and :func:`build_pipeline` to wire them.

Every factory returns a plain TorchRL / PyTorch object; :func:`build_pipeline`
takes any part ready-made and builds only the missing ones.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.envs import EnvBase
from torchrl.objectives import LossModule
from torchrl.objectives.value import ValueEstimatorBase

from ppo_td.config import OptimConfig, TrainConfig
from ppo_td.envs import make_env
from ppo_td.lean import LeanCollector, LeanUnsupported
from ppo_td.models import make_actor_critic
from ppo_td.objective import make_advantage, make_loss


def make_train_env(config: TrainConfig) -> EnvBase:
    """The training env of ``config``: seeded, rewards scaled with the loss's discount."""
    return make_env(config.env, seed=config.seed, gamma=config.loss.gamma)


def make_collector(env: EnvBase, actor: TensorDictModule, config: TrainConfig,
                   done_frames: int = 0) -> Collector | LeanCollector:
    """TorchRL collector yielding ``[num_envs, steps_per_env]`` batches, where ``config.collector`` says.

    In-process (default), ``env`` is stepped here: by :class:`~ppo_td.lean.LeanCollector`
    (the same batches without TorchRL's per-step overhead) where it can run ``env`` and
    ``actor``, else by TorchRL's ``Collector`` (``collector.step_loop`` chooses). With
    ``collector.backend`` 'process' or 'ray' the workers build their own envs
    (:mod:`ppo_td.workers`) and ``env`` stays the learner's copy that holds the merged
    normalization statistics. ``done_frames`` (a resumed run's frame count) shortens the
    budget accordingly.
    """
    total_frames = config.num_iterations * config.frames_per_batch - done_frames
    if config.collector.backend != "inprocess":
        from ppo_td.workers import make_worker_collector

        return make_worker_collector(config, actor, total_frames)
    if config.collector.step_loop != "torchrl":
        try:
            return LeanCollector(env, actor, frames_per_batch=config.frames_per_batch, total_frames=total_frames)
        except LeanUnsupported as err:
            if config.collector.step_loop == "lean":
                raise LeanUnsupported(f"collector.step_loop='lean': {err}. Set collector.step_loop='auto' or "
                                      "'torchrl' to collect with TorchRL's Collector") from err
            logging.getLogger("ppo_td").info("collecting with TorchRL's Collector: %s", err)
    return Collector(
        env,
        actor,
        frames_per_batch=config.frames_per_batch,
        total_frames=total_frames,
        auto_register_policy_transforms=False,  # our actor is stateless: it needs no InitTracker
    )


def make_buffer(config: TrainConfig) -> ReplayBuffer:
    """One iteration's flattened batch, drawn without replacement.

    Each draw is a fresh permutation of the whole batch; the update cuts it into
    ``num_minibatches`` minibatches, so every epoch sees every transition once in a
    new order (CleanRL's shuffled indices) for one buffer call per epoch.
    """
    return ReplayBuffer(
        storage=LazyTensorStorage(config.frames_per_batch),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=config.frames_per_batch,
    )


def make_optimizer(params: list[torch.nn.Parameter], config: OptimConfig) -> torch.optim.Adam:
    """Adam with the published epsilon (1e-5); the fused kernel when all parameters are on the CPU or a GPU."""
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=config.lr, eps=config.adam_eps, fused=fused)


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LRScheduler:
    """Linear annealing: lr * (1 - k / num_iterations) at iteration k = 0, 1, ... (CleanRL's ``frac``)."""
    n = config.num_iterations
    if not config.optim.anneal_lr or n == 1:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0 - min(k, n - 1) / n)


@dataclass
class Pipeline:
    """Every part of a PPO run, built and wired. Each field is a plain TorchRL/PyTorch object."""

    config: TrainConfig
    env: EnvBase
    actor: TensorDictModule
    critic: TensorDictModule
    collector: Collector | LeanCollector
    buffer: ReplayBuffer
    advantage: ValueEstimatorBase
    loss: LossModule
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        """The trained parameters (actor and critic, shared ones counted once)."""
        return trained_parameters(self.loss)


def trained_parameters(loss: LossModule) -> list[torch.nn.Parameter]:
    """Parameters of ``loss`` that require grad, each once (a shared trunk appears in both nets)."""
    return list({id(p): p for p in loss.parameters() if p.requires_grad}.values())


def build_pipeline(
    config: TrainConfig,
    *,
    env: EnvBase | None = None,
    actor: TensorDictModule | None = None,
    critic: TensorDictModule | None = None,
    collector: Collector | LeanCollector | None = None,
    buffer: ReplayBuffer | None = None,
    advantage: ValueEstimatorBase | None = None,
    loss: LossModule | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> Pipeline:
    """Build the missing parts from ``config``; parts passed in are used as they are.

    Seeds torch with ``config.seed`` first, so network init, sampling and
    minibatch order are reproducible.

    Example:
        >>> p = build_pipeline(get_preset("cartpole"))
        >>> p = build_pipeline(get_preset("cartpole"), critic=my_critic)  # swap one part
    """
    torch.manual_seed(config.seed)
    if env is None:
        env = make_train_env(config)
    if actor is None or critic is None:
        default_actor, default_critic = make_actor_critic(env, config.model)
        actor = actor if actor is not None else default_actor
        critic = critic if critic is not None else default_critic
    advantage = advantage if advantage is not None else make_advantage(critic, config.loss)
    loss = loss if loss is not None else make_loss(actor, critic, config.loss)
    if optimizer is None:
        optimizer = make_optimizer(trained_parameters(loss), config.optim)
    return Pipeline(
        config=config,
        env=env,
        actor=actor,
        critic=critic,
        collector=collector if collector is not None else make_collector(env, actor, config),
        buffer=buffer if buffer is not None else make_buffer(config),
        advantage=advantage,
        loss=loss,
        optimizer=optimizer,
        scheduler=make_scheduler(optimizer, config),
    )
