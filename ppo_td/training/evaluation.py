"""Evaluation episodes of a trained actor: deterministic (the policy's mode) or sampled (as it acts in training).

The two can differ a lot: a policy can do well while it samples and badly when it always takes its most likely
action (or the reverse), so the final evaluation reports both.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.envs import EnvBase, Transform
from torchrl.envs.utils import ExplorationType, set_exploration_type

from ppo_td import keys
from ppo_td.config import EnvConfig, TrainConfig
from ppo_td.envs import BuiltEnv, ReturnScaling, RunningObsNorm, build_env, find_transform, own_step_limit
from ppo_td.envs.custom import UserTransform
from ppo_td.envs.multiagent import groups_of
from ppo_td.envs.sources.vmas import runnable_here
from ppo_td.models import same_device
from ppo_td.models.inputs import add_policy_inputs

if TYPE_CHECKING:
    from ppo_td.training.pipeline import Pipeline

DEFAULT_MAX_STEPS = TrainConfig.eval_max_steps
EVAL_COPIES = 32
"""Env copies an evaluation steps at once: more episodes run in rounds of this many, so memory stays bounded
whatever the count asked for (the returns are kept, one float each: ``TrainConfig.eval_episodes`` caps it)."""


def evaluation_seed(seed: int) -> int:
    """The seed of the final evaluation of a run seeded ``seed``: drawn from it by numpy's ``SeedSequence``, so
    runs of different seeds evaluate from unrelated start states. The eval env seeds its copy ``i`` with this
    plus ``i``; with ``seed + 10_000`` (before 2026-11-29) runs 1 to 5 shared most of their episodes' start
    states, which made a benchmark's evaluations across seeds one small sample (docs/learning.md)."""
    # [seed, 10_000]: the run's seed and a key of the evaluation's own stream; >> 1: under 2**31, room for the copies
    return int(np.random.SeedSequence([seed, 10_000]).generate_state(1)[0] >> 1)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The episodes of one evaluation: those that ended, and those cut at the step cap.

    An episode still running after ``max_steps`` steps (an env without a time limit, or one the policy never
    finishes) is cut: its reward so far is kept in ``cut``, apart, and is no episode return.
    """

    returns: list[float]
    """Raw returns of the episodes that ended (terminated, or truncated by the env's own time limit)."""
    cut: list[float] = dataclasses.field(default_factory=list)
    """Reward summed over ``max_steps`` steps by each episode cut there (the episode had not ended)."""
    max_steps: int = DEFAULT_MAX_STEPS
    """The step cap the episodes ran under."""
    groups: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """An env with several agent groups: each group's reward per agent in the episodes that ended, in the order
    of ``returns`` (which holds the reward per agent of all agents); empty otherwise."""

    @property
    def episodes(self) -> int:
        """Episodes run, ended or cut."""
        return len(self.returns) + len(self.cut)


def step_cap(env_config: EnvConfig, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[int, bool]:
    """Steps an evaluation episode may run, and whether they are the env's own: its time limit, else
    ``max_steps``."""
    own = own_step_limit(env_config)
    return (own, True) if own is not None else (max_steps, False)


def evaluate(actor: TensorDictModule, env_config: EnvConfig, episodes: int, seed: int,
             obs_stats: dict[str, Any] | None = None, sampled: bool = False,
             max_steps: int = DEFAULT_MAX_STEPS, transform_states: Sequence[dict[str, Any]] | None = None,
             transforms: Sequence[UserTransform] | None = None, appended: Sequence[Transform] = ()) -> Evaluation:
    """``episodes`` episodes, one per env copy in rounds of up to :data:`EVAL_COPIES` copies: deterministic (the
    mode of the policy), or with ``sampled``
    actions drawn from the policy as in training (from a torch RNG seeded with ``seed``, so the result is
    reproducible and the caller's RNG is left as it was).

    See :func:`make_eval_env` for the env (frozen training statistics, raw rewards) and :func:`run_episodes` for
    the episodes; on an env without a time limit they are cut at ``max_steps``. A recurrent actor starts each
    episode from a zero state. ``transform_states`` and ``transforms``: see :func:`make_eval_env`; ``appended``:
    transforms the user appended to the training env after it was built, a ``clone()`` of each appended here.
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    env = make_eval_env(env_config, min(episodes, EVAL_COPIES), seed, obs_stats, transform_states, transforms)
    try:
        for transform in appended:  # transforms the user appended to the training env: as trained, at the end
            env.append_transform(copy.deepcopy(transform.clone()))  # clone: no parent; deepcopy: own buffers
        env = add_policy_inputs(env, actor)  # a recurrent actor's states, a gSDE actor's noise matrices (one per
        # episode: sampled evaluations)
        limit = step_cap(env_config, max_steps)[0]
        if not sampled:  # forked too: a gSDE actor's noise is drawn at resets, and the caller's stream is its own
            with _forked_rng(actor):
                return _in_rounds(actor, env, episodes, limit, ExplorationType.DETERMINISTIC)
        with _forked_rng(actor):
            torch.manual_seed(seed)
            return _in_rounds(actor, env, episodes, limit, ExplorationType.RANDOM)
    finally:
        env.close()


def _in_rounds(actor: TensorDictModule, env: EnvBase, episodes: int, limit: int,
               exploration: ExplorationType) -> Evaluation:
    """``episodes`` episodes on ``env``'s copies, a round of one episode per copy at a time (each round resets the
    copies, which go on from their seeded RNG); the last round's surplus episodes are dropped (ended ones kept
    first)."""
    returns: list[float] = []
    cut: list[float] = []
    groups: dict[str, list[float]] = {}
    while len(returns) + len(cut) < episodes:
        need = episodes - len(returns) - len(cut)
        done = run_episodes(actor, env, limit, exploration)
        ended = done.returns[:need]
        returns += ended
        cut += done.cut[: need - len(ended)]
        for group, values in done.groups.items():
            groups.setdefault(group, []).extend(values[: len(ended)])
    return Evaluation(returns, cut, limit, groups)


def evaluate_pipeline(p: Pipeline, sampled: bool = False) -> Evaluation:
    """``eval_episodes`` episodes of a pipeline's actor (ppo_td can rebuild its env) on envs of their own, seeded from
    the run's seed (:func:`evaluation_seed`), with the training env's normalizer statistics and transforms' states:
    the final evaluation's, and an evaluation's during training."""
    cfg = p.config
    return evaluate(p.actor, cfg.env, cfg.eval_episodes, seed=evaluation_seed(cfg.seed),
                    obs_stats=p.observation_stats(), sampled=sampled, max_steps=cfg.eval_max_steps,
                    transform_states=p.transform_states(), transforms=p.user_transforms, appended=p.appended)


def final_evaluations(p: Pipeline) -> tuple[Evaluation, Evaluation]:
    """The final evaluation: :func:`evaluate_pipeline`'s deterministic episodes and as many sampled ones."""
    return evaluate_pipeline(p), evaluate_pipeline(p, sampled=True)


def evaluate_on(actor: TensorDictModule, env: EnvBase, episodes: int, seed: int, sampled: bool = False,
                max_steps: int = DEFAULT_MAX_STEPS) -> Evaluation:
    """``episodes`` episodes run on ``env`` itself, in rounds of one episode per copy: for an env ppo_td cannot
    rebuild (a TorchRL env passed in). ppo_td's normalizers in it (``RunningObsNorm``, ``ReturnScaling``) are
    frozen meanwhile. An episode still running after ``max_steps`` steps is cut, and ends the rounds."""
    frozen = [t for t in (find_transform(env, RunningObsNorm), find_transform(env, ReturnScaling))
              if t is not None and not t.frozen]
    for t in frozen:
        t.freeze()
    exploration = ExplorationType.RANDOM if sampled else ExplorationType.DETERMINISTIC
    returns: list[float] = []
    groups: dict[str, list[float]] = {}
    cut: list[float] = []
    try:
        with _forked_rng(actor):
            torch.manual_seed(seed)
            while len(returns) < episodes:
                done = run_episodes(actor, env, max_steps, exploration)
                returns += done.returns
                for group, values in done.groups.items():
                    groups.setdefault(group, []).extend(values)
                if done.cut:
                    cut = done.cut[: max(episodes - len(returns), 0)]
                    break
    finally:
        for t in frozen:
            t.unfreeze()
    return Evaluation(returns[:episodes], cut, max_steps, {g: v[:episodes] for g, v in groups.items()})


def episode_returns(td: TensorDictBase, group: str | None = None) -> torch.Tensor | None:
    """Each copy's episode return so far in a step's output (``RewardSum``'s, ``[copies]``; None without one).
    ``group`` (a multi-agent env): the reward per agent, the mean of the group's agents' episode rewards."""
    if group is None:
        summed = td.get(keys.EPISODE_RETURN, None)
        return None if summed is None else summed.reshape(-1)
    summed = td.get(("next", group, "episode_reward"), None)
    return None if summed is None else summed.reshape(*td.batch_size, -1).mean(-1).reshape(-1)


def acting_on(actor: TensorDictModule, device: torch.device | None) -> Callable[[TensorDictBase], TensorDictBase]:
    """``actor`` as a policy for an env on ``device`` (None: the CPU): where its parameters are elsewhere, each
    step's input goes to them and its output comes back."""
    here = torch.device("cpu") if device is None else torch.device(device)
    there = next((q.device for q in actor.parameters()), here)
    if same_device(there, here):
        return actor
    # non-blocking only towards a GPU: a copy to the host must be complete before the CPU reads it
    return lambda td: actor(td.to(there, non_blocking=there.type != "cpu")).to(here, non_blocking=here.type != "cpu")


def _forked_rng(actor: TensorDictModule) -> contextlib.ExitStack:
    """The CPU's RNG forked (restored on exit), and the RNG of each GPU ``actor`` samples on: an evaluation seeds
    them all, and leaves the caller's generators as they were."""
    stack = contextlib.ExitStack()
    devices = {q.device for q in actor.parameters()}
    cuda = sorted({d.index or 0 for d in devices if d.type == "cuda"})
    stack.enter_context(torch.random.fork_rng(devices=cuda))
    if any(d.type == "mps" for d in devices):
        stack.enter_context(torch.random.fork_rng(device_type="mps"))
    return stack


def make_eval_env(env_config: EnvConfig, episodes: int, seed: int, obs_stats: dict[str, Any] | None = None,
                  transform_states: Sequence[dict[str, Any]] | None = None,
                  transforms: Sequence[UserTransform] | None = None) -> EnvBase:
    """``episodes`` copies of the env for evaluation.

    With observation normalization, ``obs_stats`` (from
    :func:`~ppo_td.envs.observation_stats` of the training env, or a checkpoint) is
    loaded and frozen: evaluation sees the training statistics and never moves them.
    Reward scaling is off, so returns are raw. The user's transforms: ``env.transforms`` (or ``transforms``, those
    of a training env built from Python objects), without ``env.train_transforms``; each stateful one loads its
    state from ``transform_states`` (the training env's :meth:`~ppo_td.envs.BuiltEnv.user_transform_states`, or a
    checkpoint's).
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    if env_config.normalize_observations and obs_stats is None:
        raise ValueError("this policy was trained on normalized observations: pass the training env's "
                         "statistics (obs_stats=observation_stats(train_env), or evaluate from a checkpoint)")
    built = build_env(dataclasses.replace(runnable_here(env_config), num_envs=episodes, normalize_rewards=False,
                                          episodic_life=False),
                      seed=seed, training=False, transforms=transforms)  # whole games, raw rewards
    try:
        load_transform_states(built, transform_states)
    except BaseException:
        built.close()
        raise
    if built.obs_norm is not None:
        built.obs_norm.load_state_dict(obs_stats)
        built.obs_norm.freeze()
    return built.env


def load_transform_states(built: BuiltEnv, states: Sequence[dict[str, Any]] | None) -> None:
    """Load the training env's states into ``built``'s user transforms (those evaluation applies, in order);
    refused where a stateful transform would start afresh (no states given) or the states do not fit."""
    made = [(user, transform) for user, transform in built.user_transforms if user.evaluation]
    if states is None:
        stateful = [user.name for user, transform in made if transform.state_dict()]
        if stateful:
            raise ValueError(f"the transforms {stateful} hold state (buffers) that evaluation must take from training: "
                             "pass transform_states (Pipeline.transform_states(), or evaluate from a checkpoint)")
        return
    if len(states) != len(made):
        raise ValueError(f"{len(states)} transform states for the {len(made)} transforms evaluation applies "
                         f"({[user.name for user, _ in made]}): the states are of another config")
    for (user, transform), state in zip(made, states, strict=True):
        try:
            transform.load_state_dict(state)
        except (RuntimeError, KeyError) as err:
            raise ValueError(f"transform {user.name}: its saved state does not load ({str(err).splitlines()[0]})"
                             ) from err


def run_episodes(actor: TensorDictModule, env: EnvBase, max_steps: int,
                 exploration: ExplorationType = ExplorationType.DETERMINISTIC) -> Evaluation:
    """The first episode of each copy of ``env``, acting with the policy's mode (or, with
    ``ExplorationType.RANDOM``, with actions sampled from it): its raw return (``RewardSum``'s where the env has
    one, else the sum of ``"reward"``; a multi-agent group's reward per agent) once it ends, or its reward so far
    where it is still running after ``max_steps`` steps (a cut episode)."""
    copies = env.batch_size.numel()
    groups = groups_of(env)  # [] for one agent
    agents = torch.tensor([float(env.observation_spec[g, keys.OBSERVATION].shape[len(env.batch_size)])
                           for g in groups] or [1.0], dtype=torch.float64)
    actor = acting_on(actor, env.device)
    returns: list[torch.Tensor | None] = [None] * copies
    total = torch.zeros(copies, len(agents), dtype=torch.float64)  # per group, on the CPU wherever the env steps
    sums = total
    with torch.no_grad(), set_exploration_type(exploration):
        td = env.reset()
        for _ in range(max_steps):
            td, next_td = env.step_and_maybe_reset(actor(td))
            rewards = [td.get(("next", "reward"))] if not groups else [td.get(("next", g, "reward")) for g in groups]
            total += torch.stack([r.reshape(copies, -1).double().mean(-1).cpu() for r in rewards], -1)
            summed = [episode_returns(td, g) for g in (groups or [None])]  # RewardSum's: before any scaling
            sums = total if any(v is None for v in summed) else torch.stack([v.reshape(copies).double().cpu()
                                                                             for v in summed], -1)
            for i in td.get(keys.DONE).reshape(copies).nonzero().flatten().tolist():
                if returns[i] is None:
                    returns[i] = sums[i].clone()
            if all(r is not None for r in returns):
                break
            td = next_td

    def per_agent(row: torch.Tensor) -> float:  # all agents' reward per agent, from each group's
        return float((row * agents).sum() / agents.sum())

    ended = [r for r in returns if r is not None]
    return Evaluation([per_agent(r) for r in ended], [per_agent(sums[i]) for i, r in enumerate(returns) if r is None],
                      max_steps, {g: [float(r[k]) for r in ended] for k, g in enumerate(groups)} if len(groups) > 1
                      else {})
