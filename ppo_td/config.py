"""Frozen dataclass configs: one section per part of the pipeline.

Defaults are the published PPO implementation details ("The 37 Implementation
Details of PPO", Huang et al. 2022, and CleanRL's ``ppo.py``) unless a field says
otherwise. Field names use TorchRL's vocabulary; docs/cleanrl-names.md maps CleanRL's names.
Every field is validated when the object is built, so a bad value fails before
any environment or network exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Literal


def _check(ok: bool, name: str, value: Any, valid: str) -> None:
    if not ok:
        raise ValueError(f"config field {name}={value!r} is invalid: it must be {valid}.")


_SCALARS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_types(obj: Any, section: str) -> None:
    """TypeError for a field whose value does not match its annotation (bool is not a number here)."""
    for f in fields(obj):
        value, kind = getattr(obj, f.name), str(f.type)
        name = f"{section}{f.name}"
        if value is None and kind.endswith("| None"):
            continue
        base = kind.removesuffix(" | None")
        if base in _SCALARS:
            ok = isinstance(value, _SCALARS[base]) and (base == "bool" or not isinstance(value, bool))
        elif base.startswith("tuple[int"):
            ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        elif base.startswith("tuple[str"):
            ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
        elif base.startswith("Literal") and "|" not in base:  # (compile's 'auto' | bool: checked by its own rule)
            ok = isinstance(value, str)
        else:
            continue
        if not ok:
            raise TypeError(f"config field {name}={value!r} has type {type(value).__name__}; it must be {kind}.")
        _check(base != "float" or math.isfinite(value), name, value, "a finite number")


_KWARG = re.compile(r"[A-Za-z_]\w*=")


def transform_entries(tokens: tuple[str, ...]) -> tuple[str, ...]:
    """Transform entries from tokens: a ``KEY=VALUE`` token belongs to the ``module:factory`` before it
    (``--env.transforms mod:Bonus scale=0.1 mod:Noise`` -> ``("mod:Bonus scale=0.1", "mod:Noise")``)."""
    entries: list[str] = []
    for token in tokens:
        if isinstance(token, str) and _KWARG.match(token) and entries:
            entries[-1] = f"{entries[-1]} {token}"
        else:
            entries.append(token)
    return tuple(entries)


def transform_problem(entry: str) -> str | None:
    """Why ``entry`` is not ``module:factory [KEY=VALUE ...]`` (a transform's or a wrapper's record; None when it
    is)."""
    parts = entry.split()
    if not parts:
        return "it is empty"
    module, sep, name = parts[0].rpartition(":")
    if not (sep and module and name):
        return f"{parts[0]!r} is not a module:name import path"
    bad = [item for item in parts[1:] if not _KWARG.match(item)]
    return f"{bad[0]!r} is not KEY=VALUE" if bad else None


RESERVED_GROUP_NAMES = frozenset({"observation", "state", "reward", "done", "terminated", "truncated", "next",
                                  "collector", "step_count", "episode_reward", "action", "info", "is_init",
                                  "action_mask"})
"""Names an agent group may not take (``env.groups``): entries at the root of a batch."""


RESERVED_INFO_KEYS = frozenset({
    "iteration", "frames", "time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds",
    "lr", "episodes",
    "episode_return", "episode_length", "loss_policy", "loss_value", "loss_entropy", "entropy", "kl_k1", "kl_k3",
    "clip_fraction", "value_clip_fraction", "explained_variance", "grad_norm", "epochs", "return", "length",
    "ended_episodes"})
"""Names ``env.info_keys`` may not take: the run's metrics and episode fields (``ppo_td.persist.runlog``'s columns;
a test keeps them in step)."""

MAX_EVAL_EPISODES = 100_000
"""The most evaluation episodes one evaluation runs: their returns are kept (``eval_episodes``, ``ppo-td eval
--episodes``)."""

SCRIPTED_OPPONENTS = ("random", "connect-four-heuristic", "tictactoe-heuristic", "tictactoe-perfect")
"""The opponents of a turn-based game named in env.opponent and env.anchors (ppo_td.envs.games.make_opponent)."""


@dataclass(frozen=True)
class EnvConfig:
    """Which environment to train on and how many copies to step together."""

    env_id: str = "CartPole-v1"
    """Gymnasium id of the environment (e.g. CartPole-v1, Acrobot-v1); with ``suite`` 'vmas' a VMAS scenario
    (navigation), with 'pettingzoo' a module with a ``parallel_env`` function (mpe2.simple_spread_v3)."""
    suite: Literal["gymnasium", "vmas", "pettingzoo"] = "gymnasium"
    """Where ``env_id`` comes from: 'gymnasium' (one agent), or a multi-agent suite as TorchRL wraps it
    (ppo_td.envs.multiagent): 'vmas' (VmasEnv, the copies vectorized in torch) or 'pettingzoo' (PettingZooWrapper
    on a parallel env, the copies stepped in turn). Multi-agent envs give each agent group's entries under the
    group's name (("agents", "observation"), ...)."""
    num_envs: int = 8
    """Copies of the env stepped together in one process, as one batched TorchRL env."""
    max_episode_steps: int | None = None
    """Time limit override; None keeps the limit registered with Gymnasium."""
    vectorization: Literal["auto", "numpy", "sync", "async", "envpool"] = "auto"
    """How copies step: 'numpy' uses Gymnasium's numpy-vectorized implementation (CartPole-v1 has one),
    'sync' steps each copy in a loop, 'async' each copy in a process of its own (Gymnasium's AsyncVectorEnv,
    observations through shared memory: for envs whose step costs more than a process round trip, Atari,
    MuJoCo; a resume then starts fresh episodes), 'envpool' Atari games in EnvPool's C++ threads with ppo_td's
    Atari preprocessing (env.atari; pip install envpool; a resume starts fresh episodes), 'auto' picks numpy where
    it exists, else sync."""
    check_finite: bool = True
    """Raise on a NaN/inf observation or reward, naming env, key and step (off saves its small cost)."""
    normalize_observations: bool = False
    """Standardize observations by a count-based running mean/std over all env copies (RunningObsNorm); a Dict
    observation's vector entries each on their own statistics."""
    obs_clip: float = 10.0
    """Clip normalized observations to +-obs_clip (published value 10)."""
    normalize_rewards: bool = False
    """Divide rewards by the running std of the discounted return (ReturnScaling; gamma is loss.gamma)."""
    reward_clip: float = 10.0
    """Clip scaled rewards to +-reward_clip (published value 10)."""
    clip_actions: bool = True
    """Clip Box actions to their bounds for the env only; the stored action and its log-prob stay unclipped."""
    action_mask: Literal["auto", "observation", "info", "none"] = "auto"
    """Where invalid-action masks come from: a Dict observation's 'action_mask' entry ('observation'),
    info['action_mask'] ('info', Gymnasium's convention, e.g. Taxi), whichever the env has ('auto': one copy is
    reset to look), or nowhere ('none')."""
    atari: bool = False
    """Standard Atari preprocessing for an ale-py env made with frameskip=1 (ppo_td.envs.atari): no-op reset up
    to 30, frame skip 4 max-pooled, 84x84 grayscale, FIRE on reset where needed, 4 stacked frames, rewards
    clipped to [-1, 1] for the learner (episode returns stay raw)."""
    episodic_life: bool = True
    """With atari: a lost life ends the learner's episode (the game goes on); evaluation always plays whole games."""
    kwargs: tuple[str, ...] = ()
    """Keyword arguments for the env, as KEY=VALUE (a value is read as a Python literal, else kept as text):
    --env.kwargs g=9.81 continuous=True."""
    device: str = "cpu"
    """Where a simulator written in torch steps its copies (env.suite='vmas'): 'cpu', 'cuda', 'cuda:N', or 'auto'
    (the GPU when torch sees one). The rollout stays there: with the networks on the same device (--device auto
    follows the env) no step copies anything to the host. Gymnasium and PettingZoo envs step on the CPU."""
    wrappers: tuple[str, ...] = ()
    """Gymnasium wrappers for each copy, innermost first, each 'module:Name KEY=VALUE ...': called as
    Name(env, KEY=VALUE, ...), values read as for env.kwargs (the module is looked for in the current folder too):
    --env.wrappers my_wrappers:ClipObs my_wrappers:Scale reward_scale=100.0."""
    clip_torchrl_actions: bool = True
    """Whether clip_actions reaches a TorchRL env's actions too (True). Runs recorded before 2026-12-06 ran without
    (ppo_td clipped Gymnasium envs' actions only, a TorchRL env got them as sampled): a config read from such a
    record gets False, so a resume or ppo-td eval steps its env as it ran."""
    limit_under_wrappers: bool = True
    """Where the time limit (max_episode_steps, or the registered one) sits among each copy's layers: under
    env.wrappers, as gym.make puts its TimeLimit, so the wrappers see it (TimeAwareObservation reads it) and a
    wrapper that steps the env several times counts each step (True); or over them (False), where runs recorded
    before 2026-12-01 had it: a config read from such a record gets False, so a resume or ppo-td eval rebuilds its env
    as it was. An Atari game's limit counts the agent's steps either way (over ppo_td's preprocessing)."""
    observation_keys: tuple[str, ...] = ()
    """A TorchRL env's observation entries the networks read, concatenated in this order into 'observation'
    (e.g. th thdot for torchrl.envs.PendulumEnv); () reads every tensor entry of its observation spec, leaving
    parameter sub-TensorDicts and non-tensor entries out (ppo_td.envs.torchrl_envs)."""
    observation_dict: bool = False
    """A TorchRL env's observation entries kept apart as a Dict observation, one entry each under 'observation'
    (named as the env names them; scalars given one dimension) instead of concatenated into one tensor: the groups
    an asymmetric actor-critic splits (Isaac Lab's 'policy' and 'critic' through TorchRL's IsaacLabWrapper:
    --env.observation-dict --model.actor-keys policy --model.critic-keys critic). env.observation_keys chooses the
    entries as before."""
    transforms: tuple[str, ...] = ()
    """The user's TorchRL transforms, applied in training and in evaluation (ppo-td eval, load_policy), in order,
    after RewardSum (returns stay raw) and before observation normalization: each 'module:factory KEY=VALUE ...',
    a function or class returning a torchrl Transform, called with the keyword arguments (values read as for
    env.kwargs): --env.transforms my_transforms:Scale factor=0.5 my_transforms:AddSpeed (ppo_td.envs.custom)."""
    train_transforms: tuple[str, ...] = ()
    """As transforms, applied in training only, after them (a reward bonus, observation noise): evaluation
    measures the env without them."""
    groups: tuple[str, ...] = ()
    """A multi-agent env's agent groups, each 'NAME=agent,agent,...' (every agent in exactly one): each group
    has its own policy and critic, trained on its agents' own rewards (--env.groups predator=adversary_0,adversary_1
    prey=agent_0). () groups the agents by their names' prefix (adversary_0, adversary_1 -> 'adversary'), as
    TorchRL and BenchMARL do, and puts them in one group, 'agents', where they share one prefix."""
    info_keys: tuple[str, ...] = ()
    """Entries of a Gymnasium env's info recorded per episode, e.g. is_success (--log-info is_success): an episode's
    value is the one at its last step, an iteration's the mean over its episodes that reported one; they are
    columns of episodes.csv and metrics.csv, on the progress line and sent to every logger. The env is then stepped
    by ppo_td's env loop (TorchRL's info reader runs in the env's own step)."""
    opponent: str = "random"
    """Who plays the other seats of a turn-based game (a PettingZoo AEC env: ppo_td.envs.games): 'random' (a
    uniformly random legal move), 'connect-four-heuristic' or 'tictactoe-heuristic' (win at once, else block, else
    random), 'tictactoe-perfect' (a full game-tree search: never loses), 'module:Name' (a class with
    act(observation, seat, rng)), or 'self': self-play against the learner's own snapshots
    (ppo_td.training.selfplay; snapshot_frames, pool_size, latest_ratio, anchors). With env.anchors beside a fixed
    opponent each game draws one: this opponent with probability latest_ratio, else an anchor.
    Evaluation plays 'random' with 'self', else the same opponents as training. On a multi-agent env with several
    agent groups (teams: VMAS or MPE simple_tag), 'self' is team self-play: one group learns at a time (team_change),
    the others play their own past snapshots or latest policy (ppo_td.training.selfplay.TeamSelfPlay)."""
    snapshot_frames: int = 20_000
    """Self-play: frames (the learner's steps) between snapshots of its policy into the pool (ML-Agents'
    save_steps, 20,000)."""
    pool_size: int = 10
    """Self-play: the past snapshots kept, the newest (ML-Agents' window, 10)."""
    latest_ratio: float = 0.5
    """Self-play: the share of games against the latest policy, the rest against a past snapshot or an anchor drawn
    uniformly (ML-Agents' play_against_latest_model_ratio, 0.5). A fixed opponent with env.anchors: the share of
    games against env.opponent, the rest against an anchor drawn uniformly."""
    team_change: int = 100_000
    """Team self-play: frames between changes of the learning group, the groups taking turns in their order
    (ML-Agents' team_change, whose default is 5 x save_steps: 100,000)."""
    anchors: tuple[str, ...] = ()
    """Fixed opponents named as env.opponent (e.g. random connect-four-heuristic): in self-play's pool beside the
    snapshots; beside a fixed env.opponent, a mixture (env.opponent random --env.anchors tictactoe-heuristic: half
    the games against each, latest_ratio's share against env.opponent)."""
    negative_reward_scale: float = 1.0
    """A turn-based game: the learner's reward of a step (its move and the replies until its next turn: a lost
    game's -1) multiplied by it where negative, positive ones kept (1: the game's own). Above 1 the learner is averse
    to losing: against a random player, tic-tac-toe's best policies lose 2.1 to 4.8 games in 1,000 with the game's
    +1/-1 and none once a loss weighs more than 3 (exact, every game walked; docs/games.md). Returns and evaluations
    are then in these units; wins, draws and losses are read from the reward's sign."""

    @property
    def multiagent(self) -> bool:
        """The env is a multi-agent suite's (``suite`` is not 'gymnasium')."""
        return self.suite != "gymnasium"

    def __post_init__(self) -> None:
        _check_types(self, "env.")
        for name in ("transforms", "train_transforms", "wrappers"):
            entries = transform_entries(getattr(self, name))
            object.__setattr__(self, name, entries)  # command-line tokens joined: mod:F k=v -> "mod:F k=v"
            for entry in entries:
                problem = transform_problem(entry)
                _check(problem is None, f"env.{name}", entry, f"'module:Name KEY=VALUE ...' ({problem})")
        for item in self.kwargs:
            key = item.partition("=")[0]
            _check("=" in item and key.isidentifier(), "env.kwargs", item, "KEY=VALUE with KEY a Python name")
        _check(bool(self.env_id), "env.env_id", self.env_id, "a Gymnasium id")
        for key in self.info_keys:
            _check(bool(key) and key.isidentifier(), "env.info_keys", key, "names of info entries (Python names, "
                   "e.g. is_success)")
            _check(key not in RESERVED_INFO_KEYS, "env.info_keys", key, "a name no metric or episode column has "
                   f"(not one of {', '.join(sorted(RESERVED_INFO_KEYS))})")
        _check(len(set(self.info_keys)) == len(self.info_keys), "env.info_keys", self.info_keys, "different names")
        named = ", ".join(repr(o) for o in SCRIPTED_OPPONENTS)
        _check(self.opponent in (*SCRIPTED_OPPONENTS, "self") or ":" in self.opponent, "env.opponent",
               self.opponent, f"{named}, 'self' or 'module:Name'")
        _check(self.snapshot_frames >= 1, "env.snapshot_frames", self.snapshot_frames, ">= 1")
        _check(self.pool_size >= 1, "env.pool_size", self.pool_size, ">= 1")
        _check(0.0 <= self.latest_ratio <= 1.0, "env.latest_ratio", self.latest_ratio, "in [0, 1]")
        for anchor in self.anchors:
            _check(anchor in SCRIPTED_OPPONENTS or ":" in anchor, "env.anchors", anchor,
                   f"{named} or 'module:Name' entries")
        _check(self.team_change >= 1, "env.team_change", self.team_change, ">= 1")
        _check(self.negative_reward_scale > 0, "env.negative_reward_scale", self.negative_reward_scale, "> 0")
        _check(self.negative_reward_scale == 1.0 or not self.multiagent, "env.negative_reward_scale",
               self.negative_reward_scale, f"1.0 with env.suite={self.suite!r} (it weighs a turn-based game's "
               "losses)")
        _check(self.opponent in ("random", "self") or not self.multiagent, "env.opponent", self.opponent,
               f"'random' or 'self' (team self-play) with env.suite={self.suite!r} (scripted opponents play "
               "turn-based games' other seats)")
        _check(not self.anchors or not self.multiagent, "env.anchors", self.anchors,
               f"() with env.suite={self.suite!r} (opponents play turn-based games' other seats)")
        _check(not self.info_keys or not self.multiagent, "env.info_keys", self.info_keys,
               f"() with env.suite={self.suite!r} (info entries are read from one-agent Gymnasium envs)")
        _check(self.suite in ("gymnasium", "vmas", "pettingzoo"), "env.suite", self.suite,
               "'gymnasium', 'vmas' or 'pettingzoo'")
        if self.multiagent:
            for name in ("normalize_observations", "normalize_rewards", "atari"):
                _check(not getattr(self, name), f"env.{name}", getattr(self, name),
                       f"False with env.suite={self.suite!r} (multi-agent envs do not support it yet)")
            _check(not self.wrappers, "env.wrappers", self.wrappers,
                   f"() with env.suite={self.suite!r} (Gymnasium wrappers wrap one-agent envs)")
            _check(not self.observation_keys, "env.observation_keys", self.observation_keys,
                   f"() with env.suite={self.suite!r} (it chooses a one-agent TorchRL env's entries)")
            _check(not self.observation_dict, "env.observation_dict", self.observation_dict,
                   f"False with env.suite={self.suite!r} (it keeps a one-agent TorchRL env's entries apart)")
            for name in ("transforms", "train_transforms"):
                _check(not getattr(self, name), f"env.{name}", getattr(self, name),
                       f"() with env.suite={self.suite!r} (multi-agent envs do not support the user's transforms yet)")
            for item in self.groups:
                name, sep, agents = item.partition("=")
                _check(bool(sep) and name.isidentifier() and all(a.strip() for a in agents.split(",")),
                       "env.groups", item, "NAME=agent,agent,... (NAME a Python name, the agents the env's names)")
            names = [item.partition("=")[0] for item in self.groups]
            _check(len(set(names)) == len(names), "env.groups", self.groups, "groups of different names")
            taken = sorted(set(names) & RESERVED_GROUP_NAMES)
            _check(not taken, "env.groups", self.groups, f"group names other than {taken} (TorchRL's and ppo_td's "
                   "own entries sit under those names)")
            _check(self.suite != "vmas" or self.max_episode_steps is not None, "env.max_episode_steps",
                   self.max_episode_steps, "set with env.suite='vmas' (VMAS scenarios run forever without a limit)")
        _check(self.multiagent or not self.groups, "env.groups", self.groups,
               "() with env.suite='gymnasium' (agent groups are a multi-agent env's)")
        _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device) is not None, "env.device", self.device,
               "one of auto, cpu, cuda, cuda:N")
        _check(self.suite == "vmas" or self.device in ("cpu", "auto"), "env.device", self.device,
               f"'cpu' with env.suite={self.suite!r} (its envs step in numpy or Python on the CPU; VMAS scenarios "
               "step in torch, on any device; a TorchRL env factory takes its device as env.kwargs)")
        _check(self.num_envs >= 1, "env.num_envs", self.num_envs, ">= 1")
        if self.max_episode_steps is not None:
            _check(self.max_episode_steps >= 1, "env.max_episode_steps", self.max_episode_steps, ">= 1 or None")
        _check(self.vectorization in ("auto", "numpy", "sync", "async", "envpool"), "env.vectorization",
               self.vectorization, "'auto', 'numpy', 'sync', 'async' or 'envpool'")
        _check(self.vectorization != "envpool" or self.atari, "env.vectorization", self.vectorization,
               "'envpool' with env.atari=True only (EnvPool steps Atari games with ppo_td's Atari preprocessing)")
        _check(self.action_mask in ("auto", "observation", "info", "none"), "env.action_mask", self.action_mask,
               "'auto', 'observation', 'info' or 'none'")
        _check(self.obs_clip > 0, "env.obs_clip", self.obs_clip, "> 0")
        _check(self.reward_clip > 0, "env.reward_clip", self.reward_clip, "> 0")


@dataclass(frozen=True)
class ModelConfig:
    """Actor and critic networks (MLPs) and their initialization."""

    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the hidden layers of each network after its encoder (CleanRL: 64, 64); () puts the heads
    right on the encoder's features (CleanRL's Atari network)."""
    encoder: str = "auto"
    """What turns an observation into features (ppo_td.models.encoders): 'auto' (float vectors as they are,
    one-hot for discrete, the Nature CNN for images from 36x36, a small CNN below, each entry of a Dict),
    'flat' (no CNN), 'nature', 'small', or module:function, called as function(space) -> nn.Module."""
    scale_images: bool = True
    """Whether the CNN scales ``uint8`` images by 1/255 (pixels: Atari's, a camera's). False reads them as they
    are: symbolic images whose entries are small indices, such as MiniGrid's 7x7x3 of object, colour and state
    (0-10), which 1/255 shrinks under 0.04 (SB3's ``normalize_images=False``; the ``minigrid`` preset). Images
    only: other observations are read the same either way."""
    activation: Literal["tanh", "relu", "elu"] = "tanh"
    """Hidden activation; tanh is the published default for vector observations (elu: rsl_rl's and rl_games' robot
    configs)."""
    shared_trunk: bool = False
    """Share the hidden layers between actor and critic (separate networks by default)."""
    orthogonal_init: bool = True
    """Orthogonal weights (gains below) and zero biases for the MLP layers and heads (implementation detail 2,
    Huang et al. 2022). False keeps PyTorch's default initialization of those layers (SB3's ``ortho_init=False``,
    as RL Zoo's tuned MuJoCo entries set it); CNN encoders and recurrent cores keep their own init either way."""
    hidden_gain: float = math.sqrt(2)
    """Orthogonal-init gain of hidden layers (implementation detail 2: sqrt(2))."""
    policy_head_gain: float = 0.01
    """Orthogonal-init gain of the policy head: near-uniform initial policy (0.01)."""
    value_head_gain: float = 1.0
    """Orthogonal-init gain of the value head (1.0)."""
    log_std_init: float = 0.0
    """Box actions: initial value of the state-independent log standard deviation (0: std 1)."""
    std_type: Literal["log", "scalar"] = "log"
    """Box actions (Gaussian exploration): the state-independent std learned as its log ('log': CleanRL, SB3), or
    as itself ('scalar': rsl_rl's default, clamped at 1e-6; its first value exp(log_std_init)). An optimizer step
    moves a log-std by about the learning rate, the std by that fraction of itself; a scalar std moves by about the
    learning rate whatever its size: measured to learn faster on Brax ant at rsl_rl's settings
    (docs/robot-learning.md)."""
    squash_actions: bool = False
    """Box actions: tanh-squashed Gaussian inside the bounds, instead of a Gaussian clipped for the env."""
    exploration: Literal["gaussian", "gsde"] = "gaussian"
    """Box actions: 'gaussian' draws each step's noise anew (a learned state-independent std); 'gsde' is generalized
    state-dependent exploration (Raffin et al. 2022, SB3's use_sde, ppo_td.models.gsde): noise that is a function of
    the policy's last hidden features, held for sde_sample_every steps, with a learned [features, actions] log-std
    matrix (from log_std_init). RL Zoo's MountainCarContinuous and Pendulum entries use it."""
    sde_sample_every: int = 0
    """exploration='gsde': steps of each env copy between new noise matrices (SB3's sde_sample_freq, counted from
    the env's start); 0 (SB3's -1): once per rollout, every frames_per_batch / num_envs steps. A new matrix is drawn
    at each episode start too (SB3 does not). A sampled evaluation holds one per episode; a deployed policy
    (ppo_td.load_policy) sampling draws one per call."""
    recurrent: Literal["none", "lstm", "gru"] = "none"
    """A memory between the encoder and the hidden layers (ppo_td.models.recurrent): TorchRL's LSTMModule or
    GRUModule, its state carried from step to step in the TensorDict and reset where an episode starts; the update
    backpropagates through time over sequences of optim.sequence_length steps. 'none': feed-forward."""
    recurrent_size: int = 64
    """Width of the recurrent state (RL Zoo's recurrent PPO presets: 64; sb3-contrib's default 256)."""
    shared_recurrent: bool = False
    """One recurrent core for actor and critic (CleanRL's ppo_atari_lstm); False gives the critic its own
    (sb3-contrib's RecurrentPPO default, enable_critic_lstm), which the collector steps alongside the actor's."""
    share_params: bool = True
    """Multi-agent envs: the agents of a group share one policy network and one critic network (each still acts on
    its own observation); False gives each agent its own parameters (TorchRL's MultiAgentMLP share_params)."""
    critic_scope: Literal["agent", "team", "state"] = "team"
    """Multi-agent envs: what each agent's value is a function of. 'agent': its own observation (IPPO, a
    decentralised critic); 'team': all agents' observations (MAPPO's centralised critic: one value per env step
    from their concatenation, every agent reading it); 'state': the env's global state beside the agent's own
    observation (MAPPO's agent-specific global state; PettingZoo envs with a state())."""
    actor_keys: tuple[str, ...] = ()
    """A Dict observation's entries the actor reads (() : every entry). With critic_keys, an asymmetric actor-critic
    (Pinto et al. 2018): the critic reads privileged entries (the simulator's true state, contact forces, noise-free
    readings) that the actor does not get, and will not have once deployed: a Gymnasium Dict observation of groups
    such as Isaac Lab's 'policy' and 'critic' (--model.actor-keys policy --model.critic-keys critic; a TorchRL env's
    entries are concatenated into one 'observation' instead). load_policy and export ask for the actor's entries
    only."""
    critic_keys: tuple[str, ...] = ()
    """A Dict observation's entries the critic reads (() : every entry); see actor_keys."""

    def __post_init__(self) -> None:
        _check_types(self, "model.")
        _check(self.recurrent in ("none", "lstm", "gru"), "model.recurrent", self.recurrent,
               "'none', 'lstm' or 'gru'")
        _check(self.recurrent_size >= 1, "model.recurrent_size", self.recurrent_size, ">= 1")
        _check(self.critic_scope in ("agent", "team", "state"), "model.critic_scope", self.critic_scope,
               "'agent', 'team' or 'state'")
        _check(not (self.shared_trunk and self.recurrent != "none" and not self.shared_recurrent),
               "model.shared_trunk", self.shared_trunk,
               "False with a recurrent model whose cores are separate: set model.shared_recurrent=True to share "
               "the encoder, the core and the hidden layers")
        _check(all(h >= 1 for h in self.hidden_sizes), "model.hidden_sizes", self.hidden_sizes, "positive widths")
        module, sep, name = self.encoder.rpartition(":")
        _check(self.encoder in ("auto", "flat", "nature", "small") or bool(sep and module and name), "model.encoder",
               self.encoder, "'auto', 'flat', 'nature', 'small' or a module:function import path")
        _check(self.activation in ("tanh", "relu", "elu"), "model.activation", self.activation,
               "'tanh', 'relu' or 'elu'")
        _check(self.exploration in ("gaussian", "gsde"), "model.exploration", self.exploration, "'gaussian' or 'gsde'")
        _check(self.std_type in ("log", "scalar"), "model.std_type", self.std_type, "'log' or 'scalar'")
        _check(self.std_type == "log" or self.exploration == "gaussian", "model.std_type", self.std_type,
               "'log' with gSDE (its noise scale is a log-std)")
        _check(self.sde_sample_every >= 0, "model.sde_sample_every", self.sde_sample_every,
               ">= 0 (0: once per rollout)")
        _check(not (self.exploration == "gsde" and self.squash_actions), "model.squash_actions", self.squash_actions,
               "False with model.exploration='gsde' (its noise is added to a Gaussian mean; the env clips actions)")
        _check(not (self.exploration == "gsde" and self.recurrent != "none"), "model.recurrent", self.recurrent,
               "'none' with model.exploration='gsde' (its noise reads feed-forward features)")
        for name in ("hidden_gain", "policy_head_gain", "value_head_gain"):
            _check(getattr(self, name) > 0, f"model.{name}", getattr(self, name), "> 0")
        for name in ("actor_keys", "critic_keys"):
            chosen = getattr(self, name)
            _check(len(set(chosen)) == len(chosen) and all(chosen), f"model.{name}", chosen,
                   "distinct, non-empty entry names of a Dict observation (() : every entry)")
        _check(not (self.shared_trunk and self.reads_differ), "model.shared_trunk", self.shared_trunk,
               "False when the actor and the critic read different entries (model.actor_keys, model.critic_keys): "
               "one trunk cannot read both")
        _check(not (self.shared_recurrent and self.reads_differ), "model.shared_recurrent", self.shared_recurrent,
               "False when the actor and the critic read different entries (model.actor_keys, model.critic_keys): "
               "one recurrent core cannot read both")

    @property
    def reads_differ(self) -> bool:
        """The actor and the critic read different entries of a Dict observation (an asymmetric actor-critic)."""
        return set(self.actor_keys) != set(self.critic_keys)


@dataclass(frozen=True)
class LossConfig:
    """Advantage estimation (GAE) and the clipped PPO objective."""

    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda: bias/variance trade-off of the advantage (0.95)."""
    clip_epsilon: float = 0.2
    """Clip range of the probability ratio (CleanRL clip_coef)."""
    clip_value: float | None = 0.2
    """Clip range of the value update around the rollout value; None disables value clipping."""
    entropy_coeff: float = 0.01
    """Weight of the entropy bonus (CleanRL ent_coef)."""
    critic_coeff: float = 0.25
    """Weight of the value loss. TorchRL's l2 has no 1/2: 0.25 here equals CleanRL's 0.5 * vf_coef 0.5."""
    loss_critic_type: Literal["l2", "smooth_l1", "l1"] = "l2"
    """Distance of the value loss; l2 is the published choice (TorchRL defaults to smooth_l1)."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch, CleanRL's formula: (A - mean) / (std + 1e-8)."""
    normalize_values: bool = False
    """MAPPO's value normalization (Yu et al. 2022, sec. 4.1 and appendix): the critic learns value targets
    standardized by running statistics of all targets so far, and its outputs are mapped back before GAE
    (ppo_td.training.objective.ValueNorm). The paper uses it in every environment; off for one agent (the published
    single-agent PPO details have none)."""
    fast_forward: bool = True
    """Compute ClipPPOLoss's outputs on plain tensors when the actor and critic are ppo_td's own (identical
    results without TensorDict bookkeeping, see ppo_td.training.objective.FastLoss), and run ppo_td's own critic's
    network directly in GAE (OnePassGAE); False always runs ClipPPOLoss.forward, and GAE calls the critic's
    TensorDictModule (whose forward hooks then fire)."""
    mirror: str = ""
    """A symmetry of the task, for data augmentation and the mirror loss (Mittal et al., ICRA 2024; rsl_rl's
    symmetry_cfg): the import path module:name of an object (or a class, built with no arguments) with two methods,
    observation(obs) and action(action), each mapping a batch to its mirror image, or to k images one after the
    other (obs: the 'observation' the networks read, a tensor or a Dict's TensorDict, standardized when
    env.normalize_observations: ppo_td hands the functions the env's units and standardizes the result); an action
    mask of Discrete actions is permuted as action() permutes them. ppo_td.envs.mirrors has Pendulum's, Walker2d's,
    tic-tac-toe's 8 symmetries and connect four's mirror. ppo_td.training.symmetry."""
    mirror_augment: bool = False
    """With loss.mirror: every minibatch grown by its mirror images (doubled by one mirror; mirrored observations
    and actions, each with the original's stored log-probability, advantage, value and target, as rsl_rl repeats
    them); the policy and value losses average over originals and images, the entropy and the KL diagnostics read
    the originals."""
    mirror_loss_coeff: float = 0.0
    """With loss.mirror: the weight of the mirror loss, the mean squared difference between the policy's mean
    action on the mirrored observations and the mirror of its mean action on the originals (the latter detached;
    rsl_rl's use_mirror_loss, mirror_loss_coeff). Box actions."""

    def __post_init__(self) -> None:
        _check_types(self, "loss.")
        _check(0.0 <= self.gamma <= 1.0, "loss.gamma", self.gamma, "in [0, 1]")
        _check(0.0 <= self.gae_lambda <= 1.0, "loss.gae_lambda", self.gae_lambda, "in [0, 1]")
        _check(0.0 < self.clip_epsilon < 1.0, "loss.clip_epsilon", self.clip_epsilon, "in (0, 1)")
        if self.clip_value is not None:
            _check(self.clip_value > 0, "loss.clip_value", self.clip_value, "> 0 or None")
        _check(self.entropy_coeff >= 0, "loss.entropy_coeff", self.entropy_coeff, ">= 0")
        _check(self.critic_coeff > 0, "loss.critic_coeff", self.critic_coeff, "> 0")
        _check(self.loss_critic_type in ("l2", "smooth_l1", "l1"), "loss.loss_critic_type",
               self.loss_critic_type, "'l2', 'smooth_l1' or 'l1'")
        _check(self.mirror_loss_coeff >= 0, "loss.mirror_loss_coeff", self.mirror_loss_coeff, ">= 0")
        module, sep, name = self.mirror.rpartition(":")
        _check(not self.mirror or bool(sep and module and name), "loss.mirror", self.mirror,
               "'' or the import path module:name of the task's mirror (observation and action methods)")
        uses = self.mirror_augment or self.mirror_loss_coeff > 0
        _check(not (uses and not self.mirror), "loss.mirror", self.mirror,
               "given (module:name of an object with observation() and action() methods) for "
               "loss.mirror_augment or loss.mirror_loss_coeff")
        _check(not (self.mirror and not uses), "loss.mirror_augment", self.mirror_augment,
               "True, or loss.mirror_loss_coeff > 0: loss.mirror alone changes nothing")


@dataclass(frozen=True)
class OptimConfig:
    """The update: Adam, epochs x minibatches, clipping, annealing, early stop."""

    lr: float = 2.5e-4
    """Adam learning rate at the start of training."""
    adam_eps: float = 1e-5
    """Adam epsilon (implementation detail 3: 1e-5, not PyTorch's 1e-8)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to lr / num_iterations at the last iteration."""
    update_epochs: int = 4
    """Passes over each batch (CleanRL update_epochs)."""
    num_minibatches: int = 4
    """Minibatches per pass; frames_per_batch must divide evenly into them."""
    shuffle: Literal["epoch", "update"] = "epoch"
    """How the batch is cut into minibatches: a fresh random order every epoch (CleanRL, SB3), or one random order an
    update whose minibatches every epoch takes again (rsl_rl's mini_batch_generator); an epoch of one minibatch (the
    whole batch, whatever its order) is drawn once an update either way. Beside rsl_rl with its
    KL-adaptive rate, a fresh order each epoch measured a larger KL per minibatch at the same rate (each minibatch
    meets a policy last stepped on other data), so the rate settled lower (docs/robot-learning.md)."""
    max_grad_norm: float = 0.5
    """The gradient-norm clip (of all trained parameters together, or of each network's: grad_clip_scope)."""
    grad_clip_scope: Literal["all", "each"] = "all"
    """Which gradients max_grad_norm bounds: 'all' parameters' as one vector (CleanRL, SB3), or 'each': the actor's
    and the critic's apart (rsl_rl's clip_grad_norm_ on each network), so a large value-loss gradient does not
    shrink the policy's step. Parameters the networks share count with the actor's."""
    target_kl: float | None = None
    """Stop the epochs of an update once the k3 approx-KL exceeds this; None never stops."""
    desired_kl: float | None = None
    """The KL-adaptive learning rate (rsl_rl's ``schedule="adaptive"``, ``desired_kl``; Isaac Lab's robot configs use
    0.01): after the KL between the policy that collected the batch and the current one (the k3 estimate) is measured
    on a minibatch, the learning rate is divided by 1.5 where it exceeds twice this and multiplied by 1.5 where it is
    under half of it (and above 0), kept within [min_lr, max_lr]; it carries over from iteration to iteration
    (checkpointed). Replaces anneal_lr's schedule (set anneal_lr=False). None: off."""
    kl_lr_every: Literal["minibatch", "epoch"] = "minibatch"
    """With desired_kl: adapt after each minibatch, on its KL, before its step (rsl_rl; rl_games' ``legacy``), or
    after each epoch, on the mean KL of its minibatches (skrl's ``KLAdaptiveLR``; rl_games' ``standard``)."""
    min_lr: float = 1e-5
    """With desired_kl: the lowest learning rate it adapts to (rsl_rl's 1e-5; rl_games and skrl use 1e-6)."""
    max_lr: float = 1e-2
    """With desired_kl: the highest learning rate it adapts to (1e-2 in rsl_rl, rl_games and skrl)."""
    sequence_length: int | None = None
    """Recurrent models only: each env's rollout is cut into sequences of this many steps, each replayed from the
    recurrent state stored when it was collected (backpropagation through time inside the sequence); minibatches
    are sequences. None: the whole rollout of each env is one sequence (CleanRL's ppo_atari_lstm)."""

    def __post_init__(self) -> None:
        _check_types(self, "optim.")
        _check(math.isfinite(self.lr) and self.lr > 0, "optim.lr", self.lr, "a finite number > 0")
        _check(self.adam_eps > 0, "optim.adam_eps", self.adam_eps, "> 0")
        _check(self.update_epochs >= 1, "optim.update_epochs", self.update_epochs, ">= 1")
        _check(self.num_minibatches >= 1, "optim.num_minibatches", self.num_minibatches, ">= 1")
        _check(self.max_grad_norm > 0, "optim.max_grad_norm", self.max_grad_norm, "> 0")
        if self.target_kl is not None:
            _check(self.target_kl > 0, "optim.target_kl", self.target_kl, "> 0 or None")
        _check(self.grad_clip_scope in ("all", "each"), "optim.grad_clip_scope", self.grad_clip_scope,
               "'all' or 'each'")
        _check(self.shuffle in ("epoch", "update"), "optim.shuffle", self.shuffle,
               "'epoch' (a fresh order every epoch) or 'update' (one order an update, rsl_rl's)")
        _check(self.kl_lr_every in ("minibatch", "epoch"), "optim.kl_lr_every", self.kl_lr_every,
               "'minibatch' or 'epoch'")
        _check(0 < self.min_lr < self.max_lr, "optim.min_lr", self.min_lr, f"> 0 and < optim.max_lr={self.max_lr}")
        if self.desired_kl is not None:
            _check(self.desired_kl > 0, "optim.desired_kl", self.desired_kl, "> 0 or None")
            if self.anneal_lr:
                raise ValueError(f"optim.desired_kl={self.desired_kl} adapts the learning rate to the measured KL "
                                 "and optim.anneal_lr=True anneals it linearly: one schedule at a time; set "
                                 "optim.anneal_lr=False (--optim.no-anneal-lr) for the KL-adaptive one")
            _check(self.min_lr <= self.lr <= self.max_lr, "optim.lr", self.lr,
                   f"within [optim.min_lr, optim.max_lr] = [{self.min_lr:g}, {self.max_lr:g}] with optim.desired_kl")
        if self.sequence_length is not None:
            _check(self.sequence_length >= 1, "optim.sequence_length", self.sequence_length, ">= 1 or None")


@dataclass(frozen=True)
class CollectorConfig:
    """Where collection runs: in this process (default), in local worker processes, or on Ray."""

    backend: Literal["inprocess", "process", "ray"] = "inprocess"
    """'inprocess' steps the envs in the training process (ppo_td's FastCollector, or TorchRL's Collector);
    'process' in num_workers local processes (TorchRL's MultiSyncCollector); 'ray' in num_workers Ray actors
    (TorchRL's RayCollector)."""
    num_workers: int | None = None
    """Worker processes or actors sharing env.num_envs evenly; None: 1 in-process, 2 otherwise."""
    ray_address: str = "local"
    """'local' starts a Ray instance in this process; 'auto' joins the running cluster (RAY_ADDRESS or
    `ray start`); or a head address such as 10.0.0.1:6379 or ray://10.0.0.1:10001."""
    cpus_per_worker: float = 1.0
    """Ray only: CPUs each worker actor reserves (Ray's num_cpus)."""
    step_loop: Literal["auto", "fast", "torchrl"] = "auto"
    """In-process only: 'fast' steps with ppo_td's FastCollector (TorchRL Collector's batches without its
    per-step overhead: bit for bit with inference='torch', within float rounding with a numpy policy; a VMAS
    agent group with its AgentsCollector, bit for bit),
    'torchrl' with TorchRL's Collector, 'auto' fast wherever it can run the env and policy (ppo_td's own
    parts) and TorchRL's Collector otherwise."""
    inference: Literal["auto", "numpy", "torch"] = "auto"
    """How the fast collector runs the policy: 'auto' in numpy where it is a small feed-forward MLP (Gaussian
    or categorical, no shared trunk or masks, on the CPU: a fraction of torch's per-call cost, the same
    operations and draws from torch's generator, outputs within float rounding; its module hooks do not fire),
    else in torch; 'numpy' refuses any other
    policy; 'torch' always in torch (TorchRL Collector's batches bit for bit). See ppo_td.models.inference."""

    def __post_init__(self) -> None:
        _check_types(self, "collector.")
        _check(self.backend in ("inprocess", "process", "ray"), "collector.backend", self.backend,
               "'inprocess', 'process' or 'ray'")
        if self.num_workers is not None:
            _check(self.num_workers >= 1, "collector.num_workers", self.num_workers, ">= 1 or None")
            _check(self.backend != "inprocess" or self.num_workers == 1, "collector.num_workers",
                   self.num_workers, "1 (or None) with backend='inprocess'; use backend='process' or 'ray'")
        _check(bool(self.ray_address), "collector.ray_address", self.ray_address, "'local', 'auto' or an address")
        _check(self.cpus_per_worker > 0, "collector.cpus_per_worker", self.cpus_per_worker, "> 0")
        _check(self.step_loop in ("auto", "fast", "torchrl"), "collector.step_loop", self.step_loop,
               "'auto', 'fast' or 'torchrl'")
        _check(self.step_loop != "fast" or self.backend == "inprocess", "collector.step_loop", self.step_loop,
               "'auto' or 'torchrl' with a worker backend (the fast collector runs in-process)")
        _check(self.inference in ("auto", "numpy", "torch"), "collector.inference", self.inference,
               "'auto', 'numpy' or 'torch'")
        _check(self.inference != "numpy" or (self.backend == "inprocess" and self.step_loop != "torchrl"),
               "collector.inference", self.inference,
               "'auto' or 'torch' unless the fast collector runs (backend='inprocess', step_loop 'auto' or 'fast')")

    @property
    def workers(self) -> int:
        """Number of collection workers (1 in-process)."""
        if self.num_workers is not None:
            return self.num_workers
        return 1 if self.backend == "inprocess" else 2


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run: the sections above plus budget, batch size and seed."""

    env: EnvConfig = field(default_factory=EnvConfig)
    """Environment section."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Network section."""
    loss: LossConfig = field(default_factory=LossConfig)
    """GAE and PPO objective section."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Update section."""
    collector: CollectorConfig = field(default_factory=CollectorConfig)
    """Where collection runs (in-process, worker processes, Ray)."""
    total_frames: int = 500_000
    """Environment steps over the whole run, counted across all envs (CleanRL total_timesteps)."""
    frames_per_batch: int = 512
    """Environment steps per iteration across all envs (CleanRL num_envs * num_steps)."""
    seed: int = 1
    """Seed of torch, the environments and the sampler."""
    eval_episodes: int = 10
    """Deterministic episodes run after training to report the final score (and as many sampled ones; 0: none; at
    most 100,000)."""
    eval_max_steps: int = 10_000
    """Step cap of an evaluation episode on an env without a time limit of its own (a registered or
    ``env.max_episode_steps`` limit, or an Atari game's): an episode still running at the cap is reported as cut,
    with no return, never as a finished episode."""
    eval_every: int = 0
    """Frames between evaluations during training (0: none): at the end of the first iteration past each multiple,
    eval_episodes deterministic episodes on a separate env seeded as the final evaluation's, logged (eval_return in
    metrics.csv and every logger), the best policy kept (best.pt in a run folder); training itself is unchanged.
    SB3's EvalCallback (eval_freq, n_eval_episodes)."""
    eval_stop_return: float | None = None
    """With eval_every: end the run once an evaluation's mean return reaches this (an episode cut at
    eval_max_steps counts with the reward it reached), as complete: the final evaluation runs, --resume says it is
    done. SB3's StopTrainingOnRewardThreshold (reward_threshold). None: train the whole budget."""
    device: str = "auto"
    """Where the networks and the update run: ``auto`` (a GPU for image observations when there is one, else
    the CPU: small MLPs are faster on the CPU, as Stable-Baselines3's PPO docs advise), ``cpu``, ``cuda``,
    ``cuda:N`` or ``mps``. Envs step on the CPU; each iteration's batch moves to the device once."""
    compile: Literal["auto"] | bool = "auto"
    """Run each minibatch's loss (forward and backward) and the fast collector's torch policy step through
    torch.compile (LeanRL's approach; the loss replayed as CUDA graphs too: ``cudagraphs``): results equal eager
    within float rounding; the first minibatch waits for the compilation (seconds to a minute). Applies to ppo_td's
    own networks and loss.
    ``auto`` (default): compile where it was measured to pay in wall time, compilation included: a one-process,
    one-agent, feed-forward run on the CPU with ppo_td's own loss and at least 50,000 minibatch steps, on a machine
    where torch.compile works (tried once with a tiny function; else eager, said in one line); every other run eager
    (:func:`ppo_td.training.compiles`, docs/performance.md#compile); a run that compiled resumes compiled. ``True``
    (``--compile`` alone): compile whatever ppo_td can; ``False`` (``--no-compile``): eager. ``auto`` decides on the
    machine at hand, so a config file read elsewhere (no C++ compiler there) may run eager."""
    cudagraphs: bool = False
    """With ``compile=True`` on a CUDA device: the compiled loss's forward and backward replayed as CUDA graphs
    (torch.compile's ``mode='reduce-overhead'``; LeanRL's second speed-up after compile): one launch per graph instead
    of one per kernel, for updates made of many small kernels. The terms an update keeps for its metrics are copied
    out of the graphs' memory before the next minibatch replays them; results equal eager within float rounding.
    Refused with ``compile`` other than True, and on a run whose device is not CUDA. Off by default until measured
    to pay on a GPU (``python -m benchmarks gpu``'s HalfCheetah runs; docs/gpu.md, CUDA graphs). ``--cudagraphs``."""

    def __post_init__(self) -> None:
        _check_types(self, "")
        _check(isinstance(self.compile, bool) or self.compile == "auto", "compile", self.compile,
               "'auto', True or False")
        _check(not self.cudagraphs or self.compile is True, "cudagraphs", self.cudagraphs,
               f"False with compile={self.compile!r}: CUDA graphs replay the compiled loss, so set compile=True too")
        _check(self.frames_per_batch >= 1, "frames_per_batch", self.frames_per_batch, ">= 1")
        _check(self.frames_per_batch % self.env.num_envs == 0, "frames_per_batch", self.frames_per_batch,
               f"a multiple of env.num_envs={self.env.num_envs} (each env runs the same number of steps)")
        _check(self.env.num_envs % self.collector.workers == 0, "env.num_envs", self.env.num_envs,
               f"a multiple of collector.num_workers={self.collector.workers} (each worker steps an equal share)")
        _check(self.frames_per_batch % self.optim.num_minibatches == 0, "frames_per_batch",
               self.frames_per_batch,
               f"divisible into optim.num_minibatches={self.optim.num_minibatches} equal minibatches")
        _check(not self.loss.normalize_advantage or self.frames_per_batch // self.optim.num_minibatches >= 2,
               "frames_per_batch", self.frames_per_batch,
               f"at least 2 x optim.num_minibatches={self.optim.num_minibatches} with loss.normalize_advantage "
               "(the standard deviation of a one-transition minibatch is undefined)")
        if self.model.recurrent != "none":
            self.check_sequences("model.recurrent")
        if self.env.multiagent:
            _check(self.model.recurrent == "none", "model.recurrent", self.model.recurrent,
                   f"'none' with env.suite={self.env.suite!r} (recurrent multi-agent policies are not supported yet)")
            _check(self.collector.backend == "inprocess", "collector.backend", self.collector.backend,
                   f"'inprocess' with env.suite={self.env.suite!r} (VMAS vectorizes its copies in torch; worker "
                   "collection of multi-agent envs is not supported yet)")
            _check(self.model.encoder in ("auto", "flat"), "model.encoder", self.model.encoder,
                   f"'auto' or 'flat' with env.suite={self.env.suite!r} (agents observe float vectors)")
            _check(not self.model.shared_trunk, "model.shared_trunk", self.model.shared_trunk,
                   f"False with env.suite={self.env.suite!r} (the critic may see more than the policy: separate "
                   "networks)")
            _check(self.collector.step_loop != "fast" or self.env.suite == "vmas", "collector.step_loop",
                   self.collector.step_loop, f"'auto' or 'torchrl' with env.suite={self.env.suite!r} (TorchRL's "
                   "Collector steps PettingZoo envs; ppo_td's agents collector steps VMAS scenarios)")
            _check(self.collector.inference != "numpy", "collector.inference", self.collector.inference,
                   f"'auto' or 'torch' with env.suite={self.env.suite!r} (an agent group's policy samples in torch)")
        _check(self.total_frames >= self.frames_per_batch, "total_frames", self.total_frames,
               f">= frames_per_batch={self.frames_per_batch} (at least one iteration)")
        _check(0 <= self.eval_episodes <= MAX_EVAL_EPISODES, "eval_episodes", self.eval_episodes,
               f"in [0, {MAX_EVAL_EPISODES:,}] (each episode's return is kept and written to summary.json; they run "
               "in rounds of a few env copies)")
        _check(self.eval_max_steps >= 1, "eval_max_steps", self.eval_max_steps, ">= 1")
        _check(self.eval_every >= 0, "eval_every", self.eval_every, ">= 0 frames between evaluations (0: none)")
        _check(not self.eval_every or self.eval_episodes >= 1, "eval_every", self.eval_every,
               "0 with eval_episodes=0 (an evaluation runs eval_episodes episodes)")
        _check(self.eval_stop_return is None or self.eval_every > 0, "eval_stop_return", self.eval_stop_return,
               "None unless eval_every > 0 (it is read from the evaluations during training)")
        _check(0 <= self.seed < 2**32, "seed", self.seed, "in [0, 2**32) (Gymnasium and numpy seeds)")
        _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?|mps", self.device) is not None, "device", self.device,
               "one of auto, cpu, cuda, cuda:N, mps")
        _check(self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")
               or self.collector.backend == "inprocess", "device", self.device,
               f"cpu, cuda or auto with collector.backend={self.collector.backend!r} (worker processes act on the "
               "CPU with a copy of the policy; the learner may run on a CUDA GPU)")

    def check_sequences(self, why: str) -> None:
        """ValueError unless each env's rollout cuts into whole sequences that split into equal minibatches (for
        a recurrent model: ``why`` names what made it one)."""
        length, steps = self.sequence_length, self.steps_per_env
        _check(length <= steps, "optim.sequence_length", length,
               f"at most the rollout of each env, frames_per_batch / env.num_envs = {steps} steps, with {why} "
               "(a longer sequence cannot be replayed from one batch)")
        _check(steps % length == 0, "optim.sequence_length", length,
               f"a divisor of the rollout of each env ({steps} steps) with {why}")
        _check(self.num_sequences % self.optim.num_minibatches == 0, "optim.num_minibatches",
               self.optim.num_minibatches,
               f"a divisor of the {self.num_sequences} sequences per batch (env.num_envs x rollout / "
               f"optim.sequence_length) with {why}: minibatches are whole sequences; shorter sequences make more "
               "of them (optim.sequence_length, say 32), or leave both unset and ppo-td train fits them")

    @property
    def sequence_length(self) -> int:
        """Steps per training sequence of a recurrent model (``optim.sequence_length``, None: the rollout)."""
        return self.optim.sequence_length or self.steps_per_env

    @property
    def num_sequences(self) -> int:
        """Training sequences per batch of a recurrent model."""
        return self.frames_per_batch // self.sequence_length

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.frames_per_batch // self.optim.num_minibatches

    @property
    def steps_per_env(self) -> int:
        """Steps each env takes per iteration (CleanRL num_steps)."""
        return self.frames_per_batch // self.env.num_envs

    @property
    def num_iterations(self) -> int:
        """Collect-then-update iterations in the run."""
        return self.total_frames // self.frames_per_batch


def to_dict(config: TrainConfig) -> dict[str, Any]:
    """Plain nested dict of a config (JSON- and checkpoint-safe)."""
    return asdict(config)


ADDED_FIELDS: dict[str, dict[str, Any]] = {"model": {"scale_images": True, "orthogonal_init": True,
                                                      "exploration": "gaussian", "sde_sample_every": 0,
                                                      "actor_keys": (), "critic_keys": (), "std_type": "log"},
                                            "env": {"limit_under_wrappers": True, "clip_torchrl_actions": True,
                                                    "observation_dict": False, "opponent": "random",
                                                    "snapshot_frames": 20_000, "pool_size": 10, "latest_ratio": 0.5,
                                                    "team_change": 100_000,
                                                    "anchors": (), "negative_reward_scale": 1.0},
                                            "loss": {"mirror": "", "mirror_augment": False,
                                                     "mirror_loss_coeff": 0.0},
                                            "optim": {"desired_kl": None, "kl_lr_every": "minibatch", "min_lr": 1e-5,
                                                      "max_lr": 1e-2, "grad_clip_scope": "all",
                                                      "shuffle": "epoch"},
                                            "": {"eval_every": 0, "eval_stop_return": None, "cudagraphs": False}}
"""Fields added to the config after records of it were written (a returns store's keys, a study's ``tune.json``),
each with the default that keeps the earlier behaviour. A field added to a section goes here with its default
(``""``: the top level's)."""


def identity_dict(config: TrainConfig) -> dict[str, Any]:
    """:func:`to_dict` without the :data:`ADDED_FIELDS` that are at their defaults: what identifies a config across
    ppo_td versions, so a record an earlier version wrote (a stored run's key, a study to continue) still names
    the same config; one that sets such a field is another config."""
    out = to_dict(config)
    if out["compile"] == "auto":  # the default since 2026-12-07, False's before: records of either name the same
        out["compile"] = False
    for section, added in ADDED_FIELDS.items():
        fields_of = out[section] if section else out
        for name, default in added.items():
            if fields_of[name] in (default, RECORDED_BEFORE.get(section, {}).get(name, default)):
                del fields_of[name]  # (a field with a value records ran with before it existed: either way)
    return out


def with_info_keys(config: TrainConfig, info_keys: Sequence[str]) -> TrainConfig:
    """``config`` with ``info_keys`` added to ``env.info_keys`` (each once, in order): ``--log-info`` and
    ``ppo_td.train(info_keys=...)``."""
    if not info_keys:
        return config
    keys = tuple(dict.fromkeys((*config.env.info_keys, *info_keys)))
    return replace(config, env=replace(config.env, info_keys=keys))


RECORDED_BEFORE: dict[str, dict[str, Any]] = {"env": {"limit_under_wrappers": False, "clip_torchrl_actions": False},
                                              "": {"compile": False}}
"""Fields whose default is not what records written before the field existed ran with: a record without one reads
as the value it ran with (:func:`from_dict`), so it is rebuilt as it was. Neither value is part of a config's
identity (:func:`identity_dict`): a stored run or a study written before names the same config after. (The
placement of the time limit matters only with env.wrappers and a limit, which no stored run or preset has.) A
record from before ``compile`` (2026-11-27) ran eager: it reads as ``compile=False``, not today's ``'auto'``."""


def from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuild a :class:`TrainConfig` from :func:`to_dict` output. Unknown fields and missing sections are
    errors (a missing section would otherwise be filled with defaults without a word); a missing field inside a
    section takes its default."""
    if not isinstance(data, dict):
        raise TypeError(f"a config must be a dict of sections (to_dict's output), got {type(data).__name__}")
    return _build(TrainConfig, {**RECORDED_BEFORE[""], **data})


def _build(cls: type, data: dict[str, Any]) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown config field(s) {unknown} for {cls.__name__}; known: {sorted(known)}")
    sections = [name for name, f in known.items() if callable(f.default_factory) and is_dataclass(f.default_factory())]
    missing = [name for name in sections if name not in data]
    if missing:
        raise ValueError(f"the config has no {missing} section(s) for {cls.__name__}: every section must be given "
                         "(write the file with ppo_td.config.to_dict, or copy a run's config.json)")
    kwargs = {}
    for name, value in data.items():
        default = known[name].default_factory() if callable(known[name].default_factory) else None
        if is_dataclass(default):  # a field the record predates reads as what it ran with
            recorded_before = RECORDED_BEFORE.get(name, {}) if cls is TrainConfig and isinstance(value, dict) else {}
            kwargs[name] = _build(type(default), {**recorded_before, **value})
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)
