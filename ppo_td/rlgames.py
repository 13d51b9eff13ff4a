"""rl_games' PPO configs (the YAML files Isaac Lab and IsaacGymEnvs tasks ship, rl_games' own ``configs/``) as a
ppo_td config.

:func:`from_rl_games` maps the ``params`` tree (``algo``, ``model``, ``network``, ``config``) by name and returns a
note for each setting whose meaning differs in ppo_td, so nothing changes silently; what ppo_td cannot do at all (a
recurrent or D2RL network, a state-dependent sigma, an activation it lacks) is refused in one line. The semantics
are rl_games' as read at commit ``262cf20`` (v1.6.5+, 2026-08): ``algos_torch/a2c_continuous.py``,
``common/a2c_common.py``, ``common/common_losses.py``, ``algos_torch/network_builder.py``.

=====================  =================================================================================
rl_games key           ppo_td field
=====================  =================================================================================
num_actors             env.num_envs (-1, set by the launching script: --env.num-envs)
horizon_length         frames_per_batch = horizon_length * num_actors
minibatch_size         optim.num_minibatches = frames_per_batch / minibatch_size (minibatch_size_per_env
                       too)
mini_epochs            optim.update_epochs
max_epochs, max_frames total_frames (an epoch is one batch)
gamma, tau             loss.gamma, loss.gae_lambda
e_clip                 loss.clip_epsilon; with clip_value, loss.clip_value too (rl_games clips the value by
                       e_clip)
critic_coef            loss.critic_coeff = critic_coef / 2 (rl_games: 0.5 * critic_coef * squared error)
entropy_coef           loss.entropy_coeff
learning_rate          optim.lr; Adam's eps 1e-8 (rl_games')
lr_schedule            adaptive: optim.desired_kl = kl_threshold, within min_lr (1e-6) and max_lr (1e-2);
                       linear: optim.anneal_lr; anything else: constant
schedule_type          optim.kl_lr_every: legacy/per_minibatch -> minibatch, standard -> epoch
grad_norm              optim.max_grad_norm (truncate_grads: False never clips: 1e9, noted)
normalize_input        env.normalize_observations, env.obs_clip = 5
normalize_value        loss.normalize_values
normalize_advantage    loss.normalize_advantage
reward_shaper          env.train_transforms: TorchRL's RewardScaling (shift, scale) and RewardClipping
                       (min_val, max_val): training rewards only, episode returns stay raw, as in rl_games
clip_actions           env.clip_actions
seed                   seed
network.separate       model.shared_trunk = not separate
network.mlp.units      model.hidden_sizes
network.mlp.activation model.activation (elu, relu, tanh)
mlp.initializer        default: model.orthogonal_init=False (PyTorch's init); orthogonal_initializer: True
sigma_init             const_initializer val: model.log_std_init (fixed_sigma: True only)
central_value_config   model.actor_keys = ("obs",), model.critic_keys = ("states",): the critic reads the
                       observation's privileged entry (its own network and optimizer settings noted)
=====================  =================================================================================
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig
from ppo_td.presets import get_preset

PASSIVE = {"name", "env_name", "env_config", "device", "device_name", "multi_gpu", "ppo", "score_to_win",
           "save_best_after", "save_frequency", "print_stats", "player", "full_experiment_name", "train_dir",
           "kl_threshold", "schedule_type", "min_lr", "max_lr", "lr_multiplier", "truncate_grads",
           "minibatch_size_per_env", "max_frames", "num_actors", "population_based_training", "use_diagnostics"}
"""``config`` keys read with another key, or that change nothing about training (names, saving, the player)."""

ACTIVATIONS = ("elu", "relu", "tanh")


def read_rl_games(path: str | Path, env_id: str | None = None, num_envs: int | None = None,
                  base: TrainConfig | None = None) -> tuple[TrainConfig, list[str], str]:
    """The config ``ppo-td train --from-rl-games PATH`` starts from, from Python: the file's settings over ``base``
    (default: the ``generic`` preset) for ``env_id`` (default: the Gymnasium id the file names), ``num_envs`` env
    copies where given; with the notes the command prints and the env id used.

    Example:
        >>> config, notes, env_id = read_rl_games("ant_envpool.yaml")
        >>> ppo_td.train(config, run_dir="runs/ant")
    """
    params = rl_games_params(path)
    env_id = env_id or env_id_of(params)
    if not env_id:
        raise ValueError(f"--from-rl-games {path}: the file names no Gymnasium env (config.env_config.env_name); "
                         "give it with --env.env-id ID (env_id=...)")
    config, notes = from_rl_games(params, env_id, base, num_envs)
    return config, notes, env_id


def rl_games_params(path: str | Path) -> dict[str, Any]:
    """The ``params`` tree of an rl_games YAML file."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"--from-rl-games {path}: cannot read it as an rl_games config ({err})") from err
    params = data.get("params") if isinstance(data, dict) else None
    if not isinstance(params, dict) or not isinstance(params.get("config"), dict):
        raise ValueError(f"--from-rl-games {path}: an rl_games config holds params: {{algo, network, config}}; this "
                         "file has no params.config mapping")
    return params


def env_id_of(params: dict[str, Any]) -> str | None:
    """The Gymnasium id an rl_games config names (``config.env_config.env_name``, as its envpool configs do)."""
    env_config = params["config"].get("env_config")
    name = env_config.get("env_name") if isinstance(env_config, dict) else None
    return str(name) if name else None


def from_rl_games(params: dict[str, Any], env_id: str, base: TrainConfig | None = None,
                  num_envs: int | None = None) -> tuple[TrainConfig, list[str]]:
    """``base`` (default: the ``generic`` preset) with an rl_games ``params`` tree's settings, for ``env_id``; and a
    note per setting whose meaning differs in ppo_td. ``num_envs``: the count of env copies where the file leaves
    it to the launching script (``num_actors: -1``), or to replace the file's.

    Raises:
        ValueError: a setting ppo_td cannot train as written (named, with why), or values that do not fit.
    """
    base = base or get_preset("generic")
    cfg = params["config"]
    env, model, loss, optim = (dataclasses.asdict(base.env), dataclasses.asdict(base.model),
                               dataclasses.asdict(base.loss), dataclasses.asdict(base.optim))
    top: dict[str, Any] = {}
    notes: list[str] = []
    _algo(params)
    notes += _network(params.get("network") or {}, model)

    env["env_id"] = env_id
    actors = int(cfg.get("num_actors", -1))
    if num_envs is not None:
        if actors > 0 and actors != num_envs:
            notes.append(f"num_actors {actors}: {num_envs} env copies, as given")
        actors = num_envs
    if actors <= 0:
        raise ValueError(f"rl_games num_actors {cfg.get('num_actors')}: the launching script sets it; give the "
                         "number of env copies with --env.num-envs N")
    env["num_envs"] = actors
    horizon = int(_required(cfg, "horizon_length"))
    batch = horizon * actors
    top["frames_per_batch"] = batch
    minibatch = (int(cfg["minibatch_size"]) if "minibatch_size" in cfg
                 else actors * int(_required(cfg, "minibatch_size_per_env")))
    if minibatch <= 0 or batch % minibatch:
        raise ValueError(f"rl_games minibatch_size {minibatch} does not divide horizon_length * num_actors = {batch}")
    optim["num_minibatches"] = batch // minibatch
    optim["update_epochs"] = int(_required(cfg, "mini_epochs"))
    frames = [int(cfg["max_epochs"]) * batch] if int(cfg.get("max_epochs", -1)) > 0 else []
    frames += [int(float(cfg["max_frames"]))] if int(float(cfg.get("max_frames", -1))) > 0 else []
    if frames:
        top["total_frames"] = min(frames)  # rl_games stops at whichever comes first
    loss["gamma"] = float(_required(cfg, "gamma"))
    loss["gae_lambda"] = float(_required(cfg, "tau"))
    loss["clip_epsilon"] = float(_required(cfg, "e_clip"))
    loss["clip_value"] = loss["clip_epsilon"] if _required(cfg, "clip_value") else None
    loss["critic_coeff"] = float(_required(cfg, "critic_coef")) / 2
    loss["entropy_coeff"] = float(_required(cfg, "entropy_coef"))
    loss["normalize_advantage"] = bool(_required(cfg, "normalize_advantage"))
    if loss["normalize_advantage"]:
        notes.append("normalize_advantage: rl_games standardizes the advantages of the whole batch; ppo_td those of "
                     "each minibatch (CleanRL's)")
    if cfg.get("normalize_rms_advantage"):
        raise ValueError("rl_games normalize_rms_advantage: True (advantages standardized by moving statistics) has no "
                         "ppo_td counterpart; set it False to start from this file")
    loss["normalize_values"] = bool(cfg.get("normalize_value", False))
    if loss["normalize_values"]:
        notes.append("normalize_value: rl_games clips standardized value targets to +-5; ppo_td's value "
                     "normalization does not clip")
    env["normalize_observations"] = bool(_required(cfg, "normalize_input"))
    if env["normalize_observations"]:
        env["obs_clip"] = 5.0
        notes.append("normalize_input: rl_games updates the statistics in the update's forward passes, ppo_td as it "
                     "collects (both clip to +-5)")
    optim["lr"] = float(_required(cfg, "learning_rate"))
    optim["adam_eps"] = 1e-8
    optim.update(_lr_schedule(cfg, optim["lr"], notes))
    optim["max_grad_norm"] = float(_required(cfg, "grad_norm"))
    if not cfg.get("truncate_grads", False):
        optim["max_grad_norm"] = 1e9
        notes.append("truncate_grads: False: rl_games does not clip gradients; ppo_td clips at 1e9 (never, in "
                     "practice)")
    env["train_transforms"] = tuple(env["train_transforms"]) + _reward_shaper(cfg.get("reward_shaper") or {})
    env["clip_actions"] = bool(cfg.get("clip_actions", True))
    if env["clip_actions"]:
        notes.append("clip_actions: rl_games clips the policy's actions to [-1, 1] and rescales them to the action "
                     "bounds; ppo_td clips them to the bounds (the same for bounds of -1 and 1)")
    if "seed" in params:
        top["seed"] = int(params["seed"])
    if cfg.get("value_bootstrap", True):
        notes.append("value_bootstrap: rl_games adds gamma * V(s_t) to a timed-out step's reward; ppo_td "
                     "bootstraps every truncation from the value of the state it ended in")
    else:
        notes.append("value_bootstrap: False: ppo_td bootstraps every truncation all the same")
    if float(cfg.get("bounds_loss_coef") or 0.0):
        notes.append(f"bounds_loss_coef {cfg['bounds_loss_coef']}: ppo_td has no penalty on action means past the "
                     "bounds; ignored")
    if cfg.get("mixed_precision"):
        notes.append("mixed_precision: True: ppo_td trains in float32")
    central = cfg.get("central_value_config")
    if central:  # rl_games' asymmetric critic: the env's obs dict holds "obs" (the policy's) and "states" (its)
        model["actor_keys"], model["critic_keys"] = ("obs",), ("states",)
        model["shared_trunk"] = False  # the central value is its own network, whatever network.separate says
        notes.append("central_value_config: the critic reads the observation's 'states' entry, the actor its 'obs' "
                     "of a Gymnasium Dict observation (rl_games' names; others: --model.actor-keys NAME "
                     "--model.critic-keys NAME); ppo_td trains it in the same update as the actor, with the "
                     "actor's network sizes, optimizer and minibatches (rl_games: its own "
                     + ", ".join(k for k in ("network", "learning_rate", "mini_epochs", "minibatch_size") if k in
                                 central) + ")")
    if "seq_length" in cfg:
        notes.append(f"seq_length {cfg['seq_length']}: read by recurrent networks only; none here")
    notes.append("minibatches: rl_games cuts each epoch's minibatches from the batch in order; ppo_td shuffles it")
    for key, value in cfg.items():
        if key not in _READ and key not in PASSIVE:
            notes.append(f"{key}: {value!r} has no ppo_td counterpart; ignored")
    config = dataclasses.replace(
        base, env=type(base.env)(**env), model=type(base.model)(**{**model, "hidden_sizes": tuple(
            model["hidden_sizes"])}), loss=type(base.loss)(**loss), optim=type(base.optim)(**optim), **top)
    return config, notes


_READ = {"horizon_length", "minibatch_size", "mini_epochs", "max_epochs", "gamma", "tau", "e_clip", "clip_value",
         "critic_coef", "entropy_coef", "normalize_advantage", "normalize_rms_advantage", "normalize_value",
         "normalize_input", "learning_rate", "lr_schedule", "grad_norm", "reward_shaper", "clip_actions",
         "value_bootstrap", "bounds_loss_coef", "mixed_precision", "seq_length", "bound_loss_type",
         "use_smooth_clamp", "central_value_config"}


def _required(cfg: dict[str, Any], key: str) -> Any:
    if key not in cfg:
        raise ValueError(f"rl_games config.{key} is missing: rl_games requires it (config['{key}'])")
    return cfg[key]


def _algo(params: dict[str, Any]) -> None:
    name = str((params.get("algo") or {}).get("name", "a2c_continuous"))
    if name not in ("a2c_continuous", "a2c_discrete"):
        raise ValueError(f"rl_games algo {name!r}: ppo_td reads PPO configs (a2c_continuous, a2c_discrete)")


def _network(network: dict[str, Any], model: dict[str, Any]) -> list[str]:
    notes = []
    for key in ("rnn", "cnn"):
        if network.get(key):
            raise ValueError(f"rl_games network.{key}: ppo_td reads MLP networks from rl_games configs; give the "
                             f"network with ppo_td's flags (model.recurrent, model.encoder)")
    model["shared_trunk"] = not bool(network.get("separate", False))
    mlp = network.get("mlp") or {}
    if "units" in mlp:
        model["hidden_sizes"] = tuple(int(u) for u in mlp["units"])
    if mlp.get("d2rl"):
        raise ValueError("rl_games network.mlp.d2rl: True (each layer also reads the input) has no ppo_td counterpart")
    activation = str(mlp.get("activation", model["activation"])).lower()
    if activation not in ACTIVATIONS:
        raise ValueError(f"rl_games network.mlp.activation {activation!r}: ppo_td has {', '.join(ACTIVATIONS)}")
    model["activation"] = activation
    initializer = str((mlp.get("initializer") or {}).get("name", "default"))
    if initializer in ("orthogonal_initializer", "orthogonal"):
        model["orthogonal_init"] = True
        gain = (mlp.get("initializer") or {}).get("gain")
        if gain is not None:
            model["hidden_gain"] = float(gain)
    elif initializer == "default":
        model["orthogonal_init"] = False
        notes.append("mlp.initializer default: PyTorch's initial weights; rl_games also zeroes every bias, ppo_td "
                     "keeps PyTorch's")
    else:
        raise ValueError(f"rl_games network.mlp.initializer {initializer!r}: ppo_td initializes with PyTorch's "
                         "default or orthogonally (initializer name default or orthogonal_initializer)")
    continuous = (network.get("space") or {}).get("continuous")
    if isinstance(continuous, dict):
        if not continuous.get("fixed_sigma", True):
            raise ValueError("rl_games space.continuous.fixed_sigma: False (a sigma from the state) has no ppo_td "
                             "counterpart: ppo_td's log std is a parameter (fixed_sigma: True)")
        for key in ("mu_activation", "sigma_activation"):
            if str(continuous.get(key, "None")) != "None":
                raise ValueError(f"rl_games space.continuous.{key} {continuous[key]!r}: ppo_td's Gaussian head has "
                                 "no activation (None)")
        sigma = continuous.get("sigma_init") or {}
        if sigma.get("name") == "const_initializer":
            model["log_std_init"] = float(sigma.get("val", 0.0))
        elif sigma:
            notes.append(f"space.continuous.sigma_init {sigma.get('name')!r}: ppo_td starts the log std at "
                         f"{model['log_std_init']}")
    return notes


def _lr_schedule(cfg: dict[str, Any], lr: float, notes: list[str]) -> dict[str, Any]:
    schedule = str(cfg.get("lr_schedule"))
    if schedule == "adaptive":
        low, high = float(cfg.get("min_lr", 1e-6)), float(cfg.get("max_lr", 1e-2))
        if float(cfg.get("lr_multiplier", 1.5)) != 1.5:
            raise ValueError(f"rl_games lr_multiplier {cfg['lr_multiplier']}: ppo_td's KL-adaptive rate moves by 1.5")
        every = {"legacy": "minibatch", "per_minibatch": "minibatch", "standard": "epoch"}.get(
            str(cfg.get("schedule_type", "legacy")))
        if every is None:
            raise ValueError(f"rl_games schedule_type {cfg['schedule_type']!r}: ppo_td adapts per minibatch "
                             "(legacy, per_minibatch) or per epoch (standard)")
        notes.append("lr_schedule adaptive: rl_games measures KL(new || old) in closed form against the policy of the "
                     "last pass over each minibatch; ppo_td the k3 estimate of KL(old || new) against the collecting "
                     "policy (docs/robot-learning.md)")
        if not low <= lr <= high:  # rl_games adapts from any rate; ppo_td's bounds must hold the first one
            notes.append(f"learning_rate {lr:g} lies outside min_lr {low:g} and max_lr {high:g}: the bounds are "
                         f"widened to [{min(low, lr):g}, {max(high, lr):g}]")
        return {"desired_kl": float(_required(cfg, "kl_threshold")), "anneal_lr": False, "kl_lr_every": every,
                "min_lr": min(low, lr), "max_lr": max(high, lr)}
    if schedule == "linear":
        notes.append("lr_schedule linear: rl_games anneals to 1e-6, ppo_td to lr / num_iterations")
        return {"anneal_lr": True, "desired_kl": None}
    return {"anneal_lr": False, "desired_kl": None}


def _reward_shaper(shaper: dict[str, Any]) -> tuple[str, ...]:
    """rl_games' ``DefaultRewardsShaper``, ``clip((r + shift) * scale, min_val, max_val)``, as TorchRL transforms."""
    if shaper.get("log_val"):
        raise ValueError("rl_games reward_shaper.log_val: True has no ppo_td counterpart")
    scale, shift = float(shaper.get("scale_value", 1.0)), float(shaper.get("shift_value", 0.0))
    low, high = float(shaper.get("min_val", -math.inf)), float(shaper.get("max_val", math.inf))
    out = []
    if scale != 1.0 or shift != 0.0:
        out.append(f"torchrl.envs:RewardScaling loc={shift * scale!r} scale={scale!r}")
    bounds = " ".join(f"{name}={value!r}" for name, value in (("clamp_min", low), ("clamp_max", high))
                      if math.isfinite(value))
    if bounds:
        out.append(f"torchrl.envs:RewardClipping {bounds}")
    return tuple(out)
