"""Small factories for the remaining parts, and :func:`build_pipeline` to wire them.

Every factory returns a plain TorchRL / PyTorch object; :func:`build_pipeline`
takes any part ready-made and builds only the missing ones.
"""

from __future__ import annotations

import dataclasses
import functools
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from torchrl.data import Composite, LazyTensorStorage, ReplayBuffer, TensorSpec
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.envs import (
    Compose,
    EnvBase,
    InitTracker,
    ObservationNorm,
    SerialEnv,
    TensorDictPrimer,
    TransformedEnv,
    VecNorm,
    VecNormV2,
)
from torchrl.objectives import LossModule
from torchrl.objectives.value import ValueEstimatorBase

from ppo_td import keys
from ppo_td.collect import adopt_collector, make_collector, torchrl_env
from ppo_td.config import OptimConfig, TrainConfig
from ppo_td.envs import (
    BuiltEnv,
    EnvDescription,
    RunningObsNorm,
    build_env,
    find_transform,
    observation_stats,
    running_moments,
)
from ppo_td.envs.custom import INIT_SEED, UserTransform, initialize_statistics, unrecorded
from ppo_td.envs.multiagent import describe_any, groups_of
from ppo_td.envs.rebuild import env_config_for, from_python
from ppo_td.envs.records import check_script_records, recorded_paths
from ppo_td.envs.scripts import elsewhere_problem
from ppo_td.envs.torchrl_envs import observation_transforms, say
from ppo_td.models import add_policy_inputs, make_actor_critic, resolve_device, same_device
from ppo_td.models.gsde import NOISE_KEY, ExplorationNoise, gsde_head, noise_every
from ppo_td.models.recurrent import IS_INIT, is_recurrent, memory_spec
from ppo_td.training.memory import check_before_envs, check_run
from ppo_td.training.objective import (
    PPOObjective,
    TeamAdvantage,
    TeamLoss,
    ValueNorm,
    lean_of,
    make_advantage,
    make_loss,
    make_team_advantage,
    make_team_loss,
)
from ppo_td.training.ranks import Ranks, launched
from ppo_td.training.schedules import KLAdaptiveLR
from ppo_td.training.selfplay import SelfPlay, TeamSelfPlay
from ppo_td.training.symmetry import Mirror
from ppo_td.training.threads import check_threads, choose_threads, using_threads


def make_train_env(config: TrainConfig, transforms: Sequence[UserTransform] | None = None) -> BuiltEnv:
    """The training env of ``config``: seeded, rewards scaled with the loss's discount. ``transforms``: the user's
    transforms made from Python objects, in place of ``config.env``'s (see :func:`~ppo_td.envs.build_env`)."""
    return build_env(config.env, seed=config.seed, gamma=config.loss.gamma, transforms=transforms)


def make_buffer(config: TrainConfig, device: torch.device | str = "cpu", sequences: bool = False) -> ReplayBuffer:
    """One iteration's flattened batch, drawn without replacement.

    Each draw is a fresh permutation of the whole batch; the update cuts it into
    ``num_minibatches`` minibatches, so every epoch sees every transition once in a
    new order (CleanRL's shuffled indices) for one buffer call per epoch (one an update where an epoch is one
    minibatch: the whole batch, whose order changes nothing it computes). The storage is on ``device``
    (the update's). ``sequences`` (a recurrent model): the items are ``config.sequence_length``-step sequences,
    ``config.num_sequences`` of them, shuffled as wholes.
    """
    size = config.num_sequences if sequences else config.frames_per_batch
    return ReplayBuffer(
        storage=LazyTensorStorage(size, device=device),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=size,
    )


def make_optimizer(params: list[torch.nn.Parameter], config: OptimConfig) -> torch.optim.Adam:
    """Adam with the published epsilon (1e-5); the fused kernel when all parameters are on the CPU or a GPU."""
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=config.lr, eps=config.adam_eps, fused=fused)


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LRScheduler:
    """Linear annealing: lr * (1 - k / num_iterations) at iteration k = 0, 1, ... (CleanRL's ``frac``); with
    ``optim.desired_kl``, the KL-adaptive rate (:class:`~ppo_td.training.schedules.KLAdaptiveLR`, which the update
    adapts)."""
    if config.optim.desired_kl is not None:
        return KLAdaptiveLR(optimizer, config.optim.desired_kl, config.optim.min_lr, config.optim.max_lr)
    n = config.num_iterations
    if not config.optim.anneal_lr or n == 1:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1.0 - min(k, n - 1) / n)


@dataclass
class Pipeline:
    """Every part of a PPO run, built and wired: plain TorchRL/PyTorch objects, plus the env's description
    and, when ppo_td built the env, the :class:`~ppo_td.envs.BuiltEnv` its fast collector steps."""

    config: TrainConfig
    env: EnvBase
    description: EnvDescription
    built: BuiltEnv | None
    actor: TensorDictModule
    critic: TensorDictModule
    collector: Any
    buffer: ReplayBuffer
    advantage: ValueEstimatorBase
    loss: LossModule
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    device: torch.device = torch.device("cpu")
    """Where the networks and the update run (``config.device`` resolved); batches move here once per
    iteration, envs stay on the CPU."""
    sequence_length: int | None = None
    """Recurrent actor or critic: steps per training sequence (``config.sequence_length``); None: feed-forward,
    minibatches of single steps."""
    appended: list = dataclasses.field(default_factory=list)
    """Transforms the user appended to a :class:`~ppo_td.envs.BuiltEnv` after it was built (``append_transform``):
    not in the config, so the final evaluation appends a ``clone()`` of each to its env, and a run folder (which
    must rebuild the env from its config) refuses them."""
    threads: int | None = None
    """Torch threads while :func:`~ppo_td.training.run` runs (the count found is put back after); None: the
    user's own count, left as it is (:func:`~ppo_td.training.threads.choose_threads`)."""
    ranks: Ranks | None = None
    """A run over several ranks (torchrun): this process's place and the collectives; the env, collector and buffer
    are this rank's share (:mod:`ppo_td.training.ranks`), ``config`` the whole run's. None: one process."""
    compiled: bool = False
    """Whether the run goes through torch.compile: ``config.compile`` resolved (:func:`compiles`)."""
    selfplay: Any = None
    """Self-play's pool (``env.opponent='self'``: :class:`~ppo_td.training.selfplay.SelfPlay`, or
    :class:`~ppo_td.training.selfplay.TeamSelfPlay` on agent groups), else None."""
    synced: list[dict[str, torch.Tensor]] | None = None
    """Over ranks: the normalizers' statistics as every rank last held them alike, which each rank's additions since
    are counted from (:meth:`~ppo_td.training.ranks.Ranks.merge_statistics`): the statistics before any data in a
    new run, the checkpoint's in a resumed one."""

    @property
    def world(self) -> int:
        """The ranks the run's batch divides over (1 for one process)."""
        return 1 if self.ranks is None else self.ranks.world

    @property
    def main(self) -> bool:
        """This process writes, prints and evaluates: rank 0, or the one process."""
        return self.ranks is None or self.ranks.main

    @property
    def rebuildable(self) -> bool:
        """``config.env`` rebuilds the training env: ppo_td built it (False for a TorchRL env passed in:
        evaluation then runs on it, and the run cannot be resumed or evaluated from its checkpoint)."""
        return self.built is not None

    def observation_stats(self) -> dict[str, Any] | None:
        """The training env's observation-normalization statistics (None without a normalizer)."""
        return observation_stats(self.built if self.built is not None else self.env)

    def transform_states(self) -> list[dict[str, Any]]:
        """``state_dict()`` of each of the user's transforms that evaluation applies (see
        :meth:`~ppo_td.envs.BuiltEnv.user_transform_states`)."""
        return self.built.user_transform_states() if self.built is not None else []

    @property
    def user_transforms(self) -> list[UserTransform]:
        """The user's transforms in the training env, in order (what an evaluation env is built with)."""
        return [user for user, _ in self.built.user_transforms] if self.built is not None else []

    @property
    def groups(self) -> list[str]:
        """The agent groups of an env with several (each with its own policy, critic and loss); [] otherwise."""
        return self.description.group_names if self.description.teams else []

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        """The trained parameters (actor and critic, shared ones counted once)."""
        return trained_parameters(self.loss)


def trained_parameters(loss: LossModule) -> list[torch.nn.Parameter]:
    """Parameters of ``loss`` that require grad, each once (a shared trunk appears in both nets)."""
    return list({id(p): p for p in loss.parameters() if p.requires_grad}.values())


_KINDS = {"env": ((BuiltEnv, EnvBase, gym.Env, gym.vector.VectorEnv, Callable),
                  "an env factory, a gymnasium.Env or vector env, a ppo_td.envs.BuiltEnv or a TorchRL env"),
          "actor": ((TensorDictModuleBase,), "a TensorDict module (e.g. ppo_td.models.make_actor)"),
          "critic": ((TensorDictModuleBase,), "a TensorDict module (e.g. ppo_td.models.make_critic)"),
          "buffer": ((ReplayBuffer,), "a torchrl.data.ReplayBuffer"),
          "advantage": ((ValueEstimatorBase, TeamAdvantage), "a TorchRL value estimator (e.g. GAE)"),
          "loss": ((LossModule,), "a TorchRL LossModule (e.g. ppo_td.training.make_loss)"),
          "optimizer": ((torch.optim.Optimizer,), "a torch.optim.Optimizer")}


def adopt_env(config: TrainConfig, env: Any) -> tuple[TrainConfig, BuiltEnv | EnvBase | None]:
    """``config`` with the env identity of ``env`` (see :mod:`ppo_td.envs.rebuild`), and the env to train on:
    None (build it from the config), a :class:`~ppo_td.envs.BuiltEnv` (its own config) or a TorchRL env."""
    if isinstance(env, EnvBase):
        if config.env.info_keys:
            raise ValueError(f"env.info_keys={list(config.env.info_keys)} reads a Gymnasium env's info as ppo_td "
                             "builds it; a TorchRL env passed in has its values in its TensorDict: write them with a "
                             "transform, or pass a factory (train(config, env=make_env)) of a Gymnasium env")
        return config, _readable(env, config)
    if env is None:
        return config, env
    if isinstance(env, BuiltEnv):
        if env.config is None:
            return config, env
        if config.env.info_keys and env.config.info_keys != config.env.info_keys:
            raise ValueError(f"env.info_keys={list(config.env.info_keys)}: the BuiltEnv passed in was built with "
                             f"{list(env.config.info_keys)}; build it with the keys in its config "
                             "(build_env(dataclasses.replace(config.env, info_keys=...)))")
        return dataclasses.replace(config, env=env.config), env
    return dataclasses.replace(config, env=env_config_for(env, config.env)), None


def _readable(env: EnvBase, config: TrainConfig) -> EnvBase:
    """A TorchRL env passed in, as ppo_td's networks read it: its observation entries concatenated into
    ``"observation"`` where it has none (kept apart under it with ``env.observation_dict``)
    (:mod:`ppo_td.envs.torchrl_envs`); an unbatched one as a batch of one (``env.num_envs=1``; refused for more
    copies, naming the way); its transforms that need statistics first initialized
    (:func:`~ppo_td.envs.custom.initialize_statistics`)."""
    unbatched = len(env.batch_size) == 0
    if unbatched and config.env.num_envs != 1:
        way = (f"pass its class, train(config, env={type(env).__name__}), or a module-level function that makes "
               "it" if not _a_wrapper(env) else "pass the module-level function that makes it (def "
               f"make_env(): return {type(env).__name__}(...); train(config, env=make_env))")
        raise ValueError(f"the TorchRL env {type(env).__name__} is unbatched (batch_size=[]) and env.num_envs="
                         f"{config.env.num_envs} copies are asked for, which ppo_td cannot make of an object: "
                         f"{way}, which ppo_td records and makes the copies of; or set env.num_envs=1 to train "
                         f"this one as a batch of one; or batch it yourself (torchrl.envs.SerialEnv("
                         f"{config.env.num_envs}, make_env))")
    if isinstance(env, TransformedEnv):
        say(initialize_statistics(env.transform, f"the TorchRL env {type(env.base_env).__name__}",
                                  max(env.batch_size.numel(), 1), INIT_SEED, batch_dims=len(env.batch_size)))
    if unbatched:
        env = SerialEnv(1, functools.partial(_itself, env))  # TorchRL's batch of copies, of this one
    plain = not config.env.observation_keys and not config.env.observation_dict
    if groups_of(env) and not plain:
        raise ValueError("env.observation_keys and env.observation_dict read a one-agent TorchRL env's entries; this "
                         "env has agent groups, whose observations are read as each group has them: leave them unset")
    if plain and (keys.OBSERVATION in env.observation_spec.keys() or groups_of(env)):
        return env  # read as it is (a multi-agent env's groups hold their observations)
    adapters, read = observation_transforms(env, config.env.observation_keys, config.env.observation_dict)
    say(f"the TorchRL env {type(env).__name__}: {read}")
    return TransformedEnv(env, Compose(*adapters), auto_unwrap=False)


def _a_wrapper(env: EnvBase) -> bool:
    """``env`` is one of TorchRL's generic classes wrapping another (a ``TransformedEnv``, a library's wrapper such as
    ``GymEnv``): its class is no factory of the user's env."""
    return isinstance(env, TransformedEnv) or type(env).__module__.startswith("torchrl.envs.libs")


def _itself(env: EnvBase) -> EnvBase:
    """``env`` (what a batch of one made of a given env makes)."""
    return env


def _adopt_transforms(config: TrainConfig, env: Any, transforms: Sequence[Any] | None,
                      train_transforms: Sequence[Any] | None) -> tuple[TrainConfig, list[UserTransform] | None]:
    """``config`` with the user's transforms from Python recorded (those that can be: factories), and the
    transforms to build the env with when some cannot be recorded (objects; None: build from the config)."""
    if transforms is None and train_transforms is None:
        return config, None
    if env is not None:
        raise ValueError("transforms= and train_transforms= go into the env ppo_td builds; the env was passed "
                         "ready-made: append them to it yourself, or pass the env as a factory or Gymnasium env")
    users = [*from_python(transforms if transforms is not None else config.env.transforms, True, "transforms"),
             *from_python(train_transforms if train_transforms is not None else config.env.train_transforms, False,
                          "train_transforms")]
    objects = unrecorded(users)
    if objects and config.collector.backend != "inprocess":
        raise ValueError(f"transforms {objects} are objects, which worker processes (collector.backend="
                         f"{config.collector.backend!r}) cannot rebuild: pass factories (a module-level function "
                         "returning the transform), or collect in-process")
    env_config = dataclasses.replace(
        config.env, transforms=tuple(u.entry for u in users if u.evaluation and u.entry is not None),
        train_transforms=tuple(u.entry for u in users if not u.evaluation and u.entry is not None))
    return dataclasses.replace(config, env=env_config), (users if objects else None)


def _check_parts(config: TrainConfig, **parts: Any) -> None:
    """The checks a part passed from Python gets: its kind, and its fit with the config and the other parts."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a ppo_td TrainConfig (e.g. ppo_td.get_preset('cartpole')), got "
                        f"{type(config).__name__}")
    for name, part in parts.items():
        kinds, what = _KINDS[name]
        if part is not None and not isinstance(part, kinds):
            raise TypeError(f"{name}={type(part).__name__} is not {what}")
    env = parts.get("env")
    if isinstance(env, (BuiltEnv, EnvBase)) and torchrl_env(env).batch_size.numel() != config.env.num_envs:
        raise ValueError(f"env steps {torchrl_env(env).batch_size.numel()} copies but config.env.num_envs="
                         f"{config.env.num_envs}: build the env from config.env, or set env.num_envs to match")
    actor, critic = parts.get("actor"), parts.get("critic")
    if actor is not None and not any(k == keys.ACTION or (isinstance(k, tuple) and k[-1] == keys.ACTION)
                                     for k in actor.out_keys):
        raise ValueError(f"the actor writes {list(actor.out_keys)}, not {keys.ACTION!r}: PPO needs the sampled "
                         "action and its log-prob (ProbabilisticActor(..., return_log_prob=True))")
    if critic is not None and not any(k == keys.STATE_VALUE or (isinstance(k, tuple) and k[-1] == keys.STATE_VALUE)
                                      for k in critic.out_keys):
        raise ValueError(f"the critic writes {list(critic.out_keys)}, not {keys.STATE_VALUE!r} (GAE and the loss "
                         "read it): use ValueOperator(net, in_keys=['observation'])")
    if isinstance(env, (BuiltEnv, EnvBase)) and actor is not None:
        provided = set(torchrl_env(env).observation_spec.keys(True))
        if is_recurrent(actor):  # its states and "is_init": added to the env by build_pipeline
            provided |= {IS_INIT, *(key for key, _ in memory_spec(actor))}
        if gsde_head(actor) is not None:  # its noise matrices: added to the env by build_pipeline
            provided.add(NOISE_KEY)
        missing = [k for k in actor.in_keys if k not in provided]
        if missing:
            raise ValueError(f"the actor reads {missing}, which the env does not provide (it has "
                             f"{sorted(map(str, provided))})")


def build_pipeline(
    config: TrainConfig,
    *,
    env: Any = None,
    actor: TensorDictModule | None = None,
    critic: TensorDictModule | None = None,
    collector: Any = None,
    buffer: ReplayBuffer | None = None,
    advantage: ValueEstimatorBase | None = None,
    loss: LossModule | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    encoder: Callable[..., torch.nn.Module] | None = None,
    transforms: Sequence[Any] | None = None,
    train_transforms: Sequence[Any] | None = None,
    threads: int | None = None,
    ranks: Ranks | None | str = "auto",
) -> Pipeline:
    """Build the missing parts from ``config``; parts passed in are used as they are.

    Seeds torch with ``config.seed`` first, so network init, sampling and
    minibatch order are reproducible. ``env`` is one of:

    - a factory (a module-level function or ``gymnasium.Env`` class returning one env copy), a
      Gymnasium env or vector env made by ``gym.make``/``gym.make_vec``: recorded in ``config.env``
      (:mod:`ppo_td.envs.rebuild`), so ppo_td makes the copies, checkpoints, resumes and evaluates
      with that very env stack;
    - a :class:`~ppo_td.envs.BuiltEnv` (what :func:`~ppo_td.envs.build_env` returns): its config is the
      run's ``config.env``;
    - any TorchRL env (collected by TorchRL's ``Collector``): ppo_td cannot rebuild it, so the final
      evaluation runs on it and its runs cannot be resumed.

    ``encoder(space) -> nn.Module`` replaces ``config.model.encoder`` for the default actor and critic
    (:mod:`ppo_td.models.encoders`).

    ``transforms`` and ``train_transforms`` replace ``config.env.transforms`` and ``config.env.train_transforms``
    (:mod:`ppo_td.envs.custom`): TorchRL transforms applied in training and evaluation, or in training only. Each
    is a factory (a module-level function or class returning a ``Transform``, or a ``functools.partial`` of one
    with literal arguments), recorded in the config as its import path, or a ``Transform`` object, used in this
    process only (evaluation gets a ``clone()``; worker processes, ``run_dir`` and resume need a factory).

    ``threads``: torch threads for the run (:attr:`Pipeline.threads`, set by :func:`~ppo_td.training.run` while it
    runs); None chooses as ``ppo-td train`` does (:func:`~ppo_td.training.threads.choose_threads`: 1 for vector
    observations, torch's default for images, and a count the user set before the call is kept).

    ``ranks``: ``"auto"`` joins the ranks a launcher started (torchrun: :func:`~ppo_td.training.ranks.launched`),
    None runs one process. With several ranks, ``config`` is the whole run's; this rank builds its share of the env
    copies, collector and buffer (:meth:`~ppo_td.training.ranks.Ranks.local_config`), an env or collector passed in
    must be this rank's share, and rank 0's initial weights go to every rank. Raises on every rank when the build
    fails on one.

    Example:
        >>> p = build_pipeline(get_preset("cartpole"))
        >>> p = build_pipeline(get_preset("cartpole"), critic=my_critic)  # swap one part

    Raises:
        TypeError, ValueError: a part of the wrong kind, or one that does not fit the config or the env (the
            message names the part and what it must be): parts from Python get the checks config values get.
    """
    _check_parts(config)
    check_threads(threads)
    ranks = launched() if ranks == "auto" else ranks
    if ranks is None:
        return _build(config, env, actor, critic, collector, buffer, advantage, loss, optimizer, encoder, transforms,
                      train_transforms, threads, None)
    with ranks.together("building each rank's pipeline"):
        pipeline = _build(config, env, actor, critic, collector, buffer, advantage, loss, optimizer, encoder,
                          transforms, train_transforms, threads, ranks)
    # rank 0's initial weights everywhere, and its ObservationNorm statistics (made from each rank's own first steps)
    ranks.broadcast_state([pipeline.actor, pipeline.critic, pipeline.advantage,
                           *(t for t in _transforms(pipeline.env) if isinstance(t, ObservationNorm))])
    return pipeline


def _transforms(env: EnvBase) -> list[Any]:
    transform = getattr(env, "transform", None)
    return [] if transform is None else list(transform) if isinstance(transform, Compose) else [transform]


def _check_rank_transforms(env: EnvBase, ranks: Ranks) -> None:
    """Transforms whose running statistics each rank would keep apart (its normalization drifting from the
    others'), refused naming ppo_td's, which the ranks merge."""
    for t in _transforms(env):
        if isinstance(t, (VecNorm, VecNormV2)):
            raise ValueError(f"the env has TorchRL's {type(t).__name__}, whose running statistics each of the "
                             f"{ranks.world} ranks would keep apart: normalize with env.normalize_observations / "
                             "env.normalize_rewards (ppo_td's, merged over the ranks every iteration), or run one "
                             "process")


def _build(config: TrainConfig, env: Any, actor: TensorDictModule | None, critic: TensorDictModule | None,
           collector: Any, buffer: ReplayBuffer | None, advantage: ValueEstimatorBase | None, loss: LossModule | None,
           optimizer: torch.optim.Optimizer | None, encoder: Callable[..., torch.nn.Module] | None,
           transforms: Sequence[Any] | None, train_transforms: Sequence[Any] | None, threads: int | None,
           ranks: Ranks | None) -> Pipeline:
    if env is not None and not isinstance(env, _KINDS["env"][0]):
        raise TypeError(f"env={type(env).__name__} is not {_KINDS['env'][1]}")
    config, env = adopt_env(config, env)  # a BuiltEnv brings its config (num_envs included)
    if ranks is not None and isinstance(env, BuiltEnv) and env.config is not None:  # this rank's share of the copies
        config = dataclasses.replace(config, env=dataclasses.replace(config.env,
                                                                     num_envs=env.config.num_envs * ranks.world))
    config, users = _adopt_transforms(config, env, transforms, train_transforms)
    if config.collector.backend != "inprocess":  # worker processes import what the config records
        problem = elsewhere_problem(recorded_paths(config), f"collector.backend={config.collector.backend!r} builds "
                                    "the env in worker processes")
        if problem:
            raise ValueError(f"{problem}; or collect in-process (collector.backend='inprocess')")
        check_script_records(config)
    local = config if ranks is None else _rank_config(config, ranks)  # what this rank's env and collector step
    _check_parts(local, env=env, actor=actor, critic=critic, buffer=buffer, advantage=advantage, loss=loss,
                 optimizer=optimizer)
    if advantage is not None and config.loss.normalize_values and getattr(advantage, "value_norm", None) is None:
        raise ValueError("loss.normalize_values=True, but the advantage estimator passed in keeps no value "
                         "statistics (value_norm): pass make_advantage(critic, config.loss) (or an OnePassGAE given "
                         "a ValueNorm), or set loss.normalize_values=False")
    torch.manual_seed(local.seed)  # every rank samples from a stream of its own (rank 0's weights go to all)
    if env is None:
        check_before_envs(local)
        env = make_train_env(local, users)
    built = env if isinstance(env, BuiltEnv) else None
    for note in built.notes if built is not None else ():
        say(note)
    appended = [t for t in built.appended() if not isinstance(t, (InitTracker, TensorDictPrimer, ExplorationNoise))
                ] if built else []  # what build_pipeline adds for a recurrent or gSDE actor is not the user's
    if appended and config.collector.backend != "inprocess":
        raise ValueError(f"the env has transforms appended after it was built ({_names(appended)}), which worker "
                         f"processes (collector.backend={config.collector.backend!r}) cannot rebuild: give them as "
                         "transforms= factories (or env.transforms), or collect in-process")
    description = describe_any(torchrl_env(env))  # the env as it is now (a transform may have been appended)
    if ranks is not None:
        _check_rank_transforms(torchrl_env(env), ranks)
    _check_agents(config, description)
    threads = choose_threads(threads, description)
    device = run_device(config, description, torchrl_env(env).device)
    if ranks is not None:
        device = ranks.run_device(device)
    check_run(config, description, on_host=device.type == "cpu")
    check_cudagraphs(config, device)
    _check_devices(device, actor=actor, critic=critic, loss=loss)
    if actor is None or critic is None:
        with using_threads(threads):  # the run's count from its first float (an init's rounding can change a seed)
            default_actor, default_critic = make_actor_critic(description, config.model, encoder, device)
        actor = actor if actor is not None else default_actor
        critic = critic if critic is not None else default_critic
    recurrent = is_recurrent(actor) or is_recurrent(critic)
    if recurrent:
        local.check_sequences("a recurrent actor or critic" + ("" if ranks is None else f" on {ranks.world} ranks"))
    # a recurrent model's InitTracker and states' primer, a gSDE actor's noise matrices, where missing
    add_policy_inputs(torchrl_env(env), actor, critic, noise_every(config))
    group, teams = description.group, description.group_names if description.teams else []
    if teams:  # several agent groups: each its own GAE and loss, on its own networks
        advantage = advantage if advantage is not None else make_team_advantage(critic, config.loss, teams)
        loss = loss if loss is not None else make_team_loss(actor, critic, config.loss, teams)
    advantage = advantage if advantage is not None else make_advantage(critic, config.loss, group)
    loss = loss if loss is not None else make_loss(actor, critic, config.loss, group)
    if config.loss.mirror:
        _attach_mirror(loss, config, description, torchrl_env(env), recurrent)
    if optimizer is None:
        optimizer = make_optimizer(trained_parameters(loss), config.optim)
    if ranks is not None:
        for part in (loss, getattr(advantage, "value_norm", None)):  # ppo_td's own: normalized over the whole batch
            if isinstance(part, (PPOObjective, ValueNorm)):
                part.across = ranks.sum
    selfplay = None
    if config.env.opponent == "self":
        if ranks is not None:
            raise ValueError("env.opponent='self' (self-play) runs in one process: its pool is not shared over ranks")
        selfplay = (TeamSelfPlay(config, actor, loss, teams, advantage) if config.env.multiagent else
                    SelfPlay(config, actor, built, torchrl_env(env)))
    check_cudagraphs(config, device, loss)
    compiled = compiles(config, device, ranks, loss, recurrent)
    collector = _collector(collector, env, actor, critic, dataclasses.replace(local, compile=compiled), device,
                           threads)
    if isinstance(selfplay, TeamSelfPlay):
        try:
            selfplay.check_collector(collector)
        except ValueError:
            collector.shutdown()
            raise
    return Pipeline(
        config=config,
        env=torchrl_env(env),
        description=description,
        built=built,
        actor=actor,
        critic=critic,
        collector=collector,
        buffer=buffer if buffer is not None else make_buffer(local, device, sequences=recurrent),
        advantage=advantage,
        loss=loss,
        optimizer=optimizer,
        scheduler=make_scheduler(optimizer, config),
        device=device,
        compiled=compiled,
        sequence_length=config.sequence_length if recurrent else None,
        appended=appended,
        threads=threads,
        ranks=ranks,
        synced=None if ranks is None else [t.start_moments() for t in running_moments(torchrl_env(env))],
        selfplay=selfplay,
    )


def _attach_mirror(loss: LossModule, config: TrainConfig, description: EnvDescription, env: EnvBase,
                   recurrent: bool) -> None:
    """Give ppo_td's loss the task's mirror (``loss.mirror``), reading the env's observation normalizer; what it
    cannot mirror refused in one line."""
    setting = f"loss.mirror={config.loss.mirror!r}"
    if type(loss) is not PPOObjective or loss.fast is None or description.group is not None or description.teams:
        why = ("the agents' losses" if isinstance(loss, TeamLoss) or description.group is not None else
               "loss.fast_forward=False" if type(loss) is PPOObjective and not config.loss.fast_forward else
               "the actor and critic passed in are not ppo_td's networks" if type(loss) is PPOObjective else
               f"the loss passed in is a {type(loss).__name__}")
        raise ValueError(f"{setting} runs in ppo_td's own one-agent loss forward on its own networks; here {why}: "
                         "train without loss.mirror")
    if recurrent:
        raise ValueError(f"{setting}: recurrent policies are not mirrored (their stored states are not; rsl_rl "
                         "refuses them too): set model.recurrent='none'")
    if config.model.exploration == "gsde":
        raise ValueError(f"{setting}: gSDE's stored noise matrices are not mirrored: set model.exploration='gaussian'")
    if description.action_mask and description.action_kind != "discrete":
        raise ValueError(f"{setting}: the action masks of {description.action_kind} actions are not mirrored (those "
                         "of Discrete actions are, permuted by the mirror's action()): train without loss.mirror, or "
                         "without masks (env.action_mask='none')")
    if config.loss.mirror_loss_coeff > 0 and (description.action_kind != "box" or config.model.squash_actions):
        raise ValueError(f"loss.mirror_loss_coeff={config.loss.mirror_loss_coeff} compares the mean actions of a "
                         "Gaussian policy (Box actions, model.squash_actions=False); use loss.mirror_augment alone")
    loss.mirror = Mirror.of(config.loss.mirror, config.loss.mirror_augment, config.loss.mirror_loss_coeff,
                            find_transform(env, RunningObsNorm))
    observation = env.observation_spec.get(keys.OBSERVATION, None)
    if isinstance(observation, TensorSpec) and not isinstance(observation, Composite):  # (a Dict's entries: at use)
        loss.mirror.check(observation.zero().reshape(-1, *description.observation_shape),
                          env.action_spec.zero().reshape(-1, *env.action_spec.shape[len(env.batch_size):]))
    if description.action_mask:
        loss.mirror.masks_of(description.action_nvec[0])


COMPILE_PAYS_STEPS = 50_000
"""Minibatch steps from which ``compile='auto'`` compiles a run. Whole runs compiled, torch's compile cache empty,
against eager at the same time on this project's 2-core CPU (``python -m benchmarks paired --against eager``,
2026-12-07, seeds 1-2): Acrobot 0.94-0.95x at 31,232 steps, 1.03x at 49,920, 1.03-1.06x at 62,464; HalfCheetah
0.99-1.02x at 31,040. From the Acrobot pairs the compilation costs about 13-15 s there and saves 0.26-0.37 ms a
step: even at about 41,000-49,000 steps (noisy); both 49,920-step pairs gained 3% (docs/performance.md#compile)."""


def check_cudagraphs(config: TrainConfig, device: torch.device, loss: LossModule | None = None) -> None:
    """Refuse ``cudagraphs=True`` on a run whose device (resolved) is not CUDA, or (``loss`` given) whose loss is not
    one ppo_td compiles (its own, with settings its fast forward implements): the graphs would replay nothing.

    Raises:
        ValueError: naming the device or the loss, and the ways out.
    """
    if not config.cudagraphs:
        return
    if device.type != "cuda":
        raise ValueError(f"cudagraphs=True on device {str(device)!r}: CUDA graphs replay CUDA kernels; set "
                         "device='cuda' on a machine with a CUDA GPU, or cudagraphs=False")
    lean = lean_of(loss) if loss is not None else None
    if loss is not None and (lean is None or not lean.settings_apply()):
        raise ValueError(f"cudagraphs=True with a loss ppo_td does not compile ({type(loss).__name__}: a loss given "
                         "from Python, several agent groups' losses, or settings its fast forward leaves to "
                         "ClipPPOLoss), so no CUDA graph would be replayed; set cudagraphs=False")


def compiles(config: TrainConfig, device: torch.device, ranks: Ranks | None, loss: LossModule,
             recurrent: bool = False) -> bool:
    """``config.compile`` resolved: ``True`` and ``False`` as they are; ``'auto'`` compiles only the run it was
    measured to pay for (:data:`COMPILE_PAYS_STEPS`): on the CPU, one process, one agent, feed-forward networks,
    ppo_td's own lean loss (``loss``) with settings it implements, at least that many minibatch steps, and
    torch.compile working on this machine (:func:`compile_problem`; where it does not, eager, said in one line)."""
    if config.compile != "auto":
        return bool(config.compile)
    lean = lean_of(loss)
    steps = config.num_iterations * config.optim.update_epochs * config.optim.num_minibatches
    if (device.type != "cpu" or ranks is not None or config.env.multiagent or recurrent or lean is None
            or lean.cores is not None or lean.group or not lean.settings_apply() or steps < COMPILE_PAYS_STEPS
            or not (_measured_kind(lean.actor) and _measured_kind(lean.critic))):
        return False
    return compile_problem() is None


def _measured_kind(net: torch.nn.Module) -> bool:
    """Whether ``net`` is of the kind compile was measured on: MLPs, every parameter in a ``Linear`` (or
    ``LayerNorm``) or one of ppo_td's own modules (a Gaussian head's log-std); not a CNN, nor a user's module with
    parameters of its own."""
    return all(isinstance(m, (torch.nn.Linear, torch.nn.LayerNorm)) or type(m).__module__.startswith("ppo_td.")
               for m in net.modules() if next(m.parameters(recurse=False), None) is not None)


@functools.cache
def compile_problem() -> str | None:
    """Why torch.compile does not work in this process (its error, one line: on the CPU it writes and builds C++,
    which needs a C++ compiler), or None: a tiny function compiled and run, once a process. A failure is said once,
    as ``compile='auto'`` then runs eager."""
    try:
        torch.compile(_probe, dynamic=False)(torch.ones(4))
    except Exception as err:  # noqa: BLE001 (whichever way it fails, the run goes on eager and says why)
        problem = error_line(err)
        say(f"note: compile='auto' runs eager: this run is long enough for torch.compile to pay, but it failed on a "
            f"tiny function here ({problem}); compile=False (--compile False) silences this")
        return problem
    return None


def error_line(err: BaseException) -> str:
    """``err`` in one line: its type and the first line of its message (at most 200 characters)."""
    first = (str(err).strip().splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def compiler_signal(err: BaseException) -> int | None:
    """The signal that stopped a compiler process under ``err`` (torch.compile's C++ build on the CPU, killed by the
    terminal's Ctrl-C, which reaches every process of the command, or by the OOM killer's SIGKILL), read from the
    ``subprocess.CalledProcessError`` in its chain of causes; None for a compilation that failed on its own."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, subprocess.CalledProcessError) and err.returncode < 0:
            return -err.returncode
        err = err.__cause__ or err.__context__
    return None


def _probe(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def _rank_config(config: TrainConfig, ranks: Ranks) -> TrainConfig:
    """This rank's share of ``config`` (:meth:`~ppo_td.training.ranks.Ranks.local_config`); what does not run over
    ranks yet refused in one line."""
    if config.env.multiagent:
        raise ValueError(f"env.suite={config.env.suite!r} on {ranks.world} ranks: multi-agent runs do not run over "
                         "ranks yet; run one process")
    if config.compile is True:
        raise ValueError(f"compile=True on {ranks.world} ranks: the compiled loss does not run over ranks yet (its "
                         "advantage normalization reads every rank's minibatch); set compile=False")
    return ranks.local_config(config)


def _collector(collector: Any, env: Any, actor: TensorDictModule, critic: TensorDictModule, config: TrainConfig,
               device: torch.device, threads: int | None) -> Any:
    """``collector`` adopted, or the config's built with the run's threads (worker processes take the count in
    force when they start)."""
    if collector is not None:
        return adopt_collector(collector)
    with using_threads(threads):
        return make_collector(env, actor, config, critic=critic, device=device)


def _names(transforms: list) -> str:
    return ", ".join(type(t).__name__ for t in transforms)


def _check_agents(config: TrainConfig, description: EnvDescription) -> None:
    """A multi-agent env with a multi-agent config, a one-agent env with a one-agent config."""
    if description.multiagent and not config.env.multiagent:
        raise ValueError(f"the env is a multi-agent env (agent groups {description.group_names}, "
                         f"{description.num_agents} agents) but config.env.suite='gymnasium' expects one agent: set "
                         "env.suite to 'vmas' or 'pettingzoo', or start from a multi-agent preset (vmas-navigation, "
                         "mpe-spread)")
    if not description.multiagent and config.env.multiagent:
        raise ValueError(f"config.env.suite={config.env.suite!r} expects a multi-agent env, but the env has one agent "
                         "(a root 'observation'): set env.suite='gymnasium', or start from a one-agent preset")


def run_device(config: TrainConfig, description: EnvDescription, env: torch.device | None = None) -> torch.device:
    """``config.device`` resolved for this env on this machine (:func:`~ppo_td.models.resolve_device`; ``auto``
    means the CPU when workers collect, and the env's device when it steps on a GPU)."""
    space = description.observation_space
    images = space is not None and bool(space.images()) and config.collector.backend == "inprocess"
    return resolve_device(config.device, images=images, env=env)


def _check_devices(device: torch.device, **parts: torch.nn.Module | None) -> None:
    """Parts passed in hold their parameters on the run's device (moving them here would leave an optimizer the
    caller built on the old tensors)."""
    for name, part in parts.items():
        if part is None:
            continue
        elsewhere = {str(q.device) for q in part.parameters() if not same_device(q.device, device)}
        if elsewhere:
            raise ValueError(f"{name}= has parameters on {', '.join(sorted(elsewhere))}, but the run's device is "
                             f"{device} (config.device, resolved on this machine): move it with "
                             f"{name}.to({str(device)!r}) before building its optimizer, or set config.device to "
                             "where it is")
