"""RL Zoo's PPO hyper-parameters (``hyperparams/ppo.yml`` of rl-baselines3-zoo) as a ppo_td config.

RL Zoo's files are what users bring: tuned settings per env, in Stable-Baselines3's names, over SB3's
defaults. :func:`from_zoo` reads one entry and maps it onto the ``generic`` preset (SB3's defaults) and
returns the keys it could not map, so nothing is dropped silently.

===================  ==========================================================
RL Zoo key           ppo_td field
===================  ==========================================================
n_envs               env.num_envs (1 when absent, as in RL Zoo)
n_timesteps          total_frames
n_steps              frames_per_batch = n_steps * n_envs
batch_size           optim.num_minibatches = frames_per_batch / batch_size
n_epochs             optim.update_epochs
learning_rate        optim.lr; ``lin_X`` anneals linearly (optim.anneal_lr)
gamma, gae_lambda    loss.gamma, loss.gae_lambda
clip_range           loss.clip_epsilon (constant: a ``lin_`` schedule is named)
clip_range_vf        loss.clip_value
ent_coef, vf_coef    loss.entropy_coeff, loss.critic_coeff (SB3's and TorchRL's
                     value losses are both the squared error without 1/2)
max_grad_norm        optim.max_grad_norm
target_kl            optim.target_kl = 1.5 x target_kl (SB3's stopping threshold), per epoch
normalize_advantage  loss.normalize_advantage
normalize            env.normalize_observations / normalize_rewards (``true``:
                     both; or a dict with norm_obs / norm_reward)
policy               the encoders pick themselves from the observation;
                     CnnPolicy shares the CNN, heads on its features
policy_kwargs        net_arch (same for pi and vf), activation_fn (nn.Tanh,
                     nn.ReLU), log_std_init, ortho_init (model.orthogonal_init)
use_sde              model.exploration = 'gsde' (ppo_td.models.gsde)
sde_sample_freq      model.sde_sample_every (-1, once per rollout: 0)
env_wrapper          AtariWrapper -> env.atari; other wrapper classes (no
                     arguments) -> env.wrappers (FlatObsWrapper: MiniGrid)
frame_stack          4 with env.atari (part of it)
===================  ==========================================================
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig
from ppo_td.presets import get_preset

_PASSIVE = {"policy"}  # read, nothing to set


def zoo_entry(path: str | Path, env_id: str) -> tuple[str, dict[str, Any]]:
    """The entry of ``env_id`` (its bare id; ``atari`` for an ``ALE/`` id without one) in the RL Zoo file."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"--from-zoo {path}: cannot read it as an RL Zoo hyper-parameter file ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"--from-zoo {path}: an RL Zoo file maps env ids to settings; this one holds a "
                         f"{type(data).__name__}")
    bare = env_id.rpartition(":")[2]
    for key in (bare, "atari" if bare.startswith("ALE/") or "NoFrameskip" in bare else None):
        if key is not None and isinstance(data.get(key), dict):
            return key, data[key]
    close = difflib.get_close_matches(bare, [str(k) for k in data], n=3)
    raise ValueError(f"--from-zoo {path}: no entry for {bare!r}" + (f"; close: {close}" if close else "")
                     + ". Give the entry's env id with --env.env-id (the entry names must match)")


def from_zoo(entry: dict[str, Any], env_id: str, base: TrainConfig | None = None) -> tuple[TrainConfig, list[str]]:
    """``base`` (default: the ``generic`` preset, SB3's defaults) with an RL Zoo entry's settings, for ``env_id``;
    and a note per key it could not map (naming the key and what ppo_td does instead).

    Raises:
        ValueError: a value that does not fit (batch_size not dividing n_steps * n_envs, a bad schedule...).
    """
    base = base or get_preset("generic")
    env, model, loss, optim = (dataclasses.asdict(base.env), dataclasses.asdict(base.model),
                               dataclasses.asdict(base.loss), dataclasses.asdict(base.optim))
    top: dict[str, Any] = {}
    notes: list[str] = []
    env["env_id"] = env_id
    n_envs = int(entry.get("n_envs", 1))
    env["num_envs"] = n_envs
    n_steps = int(entry.get("n_steps", 2048))
    top["frames_per_batch"] = n_steps * n_envs
    if "n_timesteps" in entry:
        top["total_frames"] = int(float(entry["n_timesteps"]))
    batch_size = int(entry.get("batch_size", 64))
    if top["frames_per_batch"] % batch_size:
        raise ValueError(f"RL Zoo batch_size {batch_size} does not divide n_steps * n_envs = {top['frames_per_batch']}"
                         "; ppo_td cuts each batch into equal minibatches")
    optim["num_minibatches"] = top["frames_per_batch"] // batch_size
    simple = {"n_epochs": (optim, "update_epochs", int), "gamma": (loss, "gamma", float),
              "gae_lambda": (loss, "gae_lambda", float), "ent_coef": (loss, "entropy_coeff", float),
              "vf_coef": (loss, "critic_coeff", float), "max_grad_norm": (optim, "max_grad_norm", float),
              "normalize_advantage": (loss, "normalize_advantage", bool)}
    policy = str(entry.get("policy", "MlpPolicy"))
    if policy == "CnnPolicy":  # SB3's: one Nature CNN shared by both heads, which sit right on its features
        model.update(hidden_sizes=(), shared_trunk=True)
    elif policy == "MultiInputPolicy":
        notes.append("policy MultiInputPolicy: SB3 shares one feature extractor; ppo_td gives the actor and the "
                     "critic an encoder each (model.shared_trunk=True shares the hidden layers too)")
    for key, value in entry.items():
        if key in ("n_envs", "n_steps", "n_timesteps", "batch_size") or key in _PASSIVE:
            continue
        if key in simple:
            section, field, kind = simple[key]
            section[field] = None if value is None else kind(value)
        elif key == "learning_rate":
            optim["lr"], optim["anneal_lr"] = _schedule(value, key)
        elif key == "clip_range":
            loss["clip_epsilon"], scheduled = _schedule(value, key)
            if scheduled:
                notes.append(f"clip_range {value}: ppo_td keeps the clip range constant at {loss['clip_epsilon']}")
        elif key == "clip_range_vf":
            loss["clip_value"] = None if value is None else _schedule(value, key)[0]
            if value is not None:
                notes.append(f"clip_range_vf {value}: SB3 takes the squared error of the clipped value only; "
                             "ppo_td the larger of the clipped and unclipped errors (CleanRL's and TorchRL's)")
        elif key == "target_kl":
            optim["target_kl"] = None if value is None else 1.5 * float(value)
            if value is not None:
                notes.append(f"target_kl {value}: SB3 stops within an epoch once the KL passes 1.5 x target_kl; "
                             f"ppo_td checks after each epoch, at optim.target_kl = {1.5 * float(value):g}")
        elif key == "normalize":
            obs_norm, reward_norm = _normalize(value)
            env["normalize_observations"], env["normalize_rewards"] = obs_norm, reward_norm
        elif key == "policy_kwargs":
            notes += _policy_kwargs(value, model)
        elif key == "env_wrapper" and "AtariWrapper" in str(value):
            env["atari"] = True
            env["kwargs"] = tuple(sorted(set(env["kwargs"]) | {"frameskip=1", "repeat_action_probability=0.0"}))
            model.update(hidden_sizes=(), activation="relu", shared_trunk=True)
        elif key == "env_wrapper" and (isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(w, str) for w in value))):
            names = [value] if isinstance(value, str) else list(value)  # module.Class -> module:Class
            env["wrappers"] = tuple(env["wrappers"]) + tuple(":".join(w.rsplit(".", 1)) for w in names)
        elif key == "frame_stack" and int(value) == 4 and "AtariWrapper" in str(entry.get("env_wrapper", "")):
            continue
        elif key == "use_sde":
            model["exploration"] = "gsde" if value else "gaussian"
        elif key == "sde_sample_freq":
            model["sde_sample_every"] = max(int(value), 0)  # SB3's -1 (once per rollout) is ppo_td's 0
        else:
            notes.append(f"{key}: {value!r} has no ppo_td counterpart; ignored")
    config = dataclasses.replace(
        base, env=type(base.env)(**env), model=type(base.model)(**{**model, "hidden_sizes": tuple(
            model["hidden_sizes"])}), loss=type(base.loss)(**loss), optim=type(base.optim)(**optim), **top)
    return config, notes


def _schedule(value: Any, key: str) -> tuple[float, bool]:
    """A constant or RL Zoo's ``lin_X`` (linear from X to 0): (X, annealed)."""
    if isinstance(value, str) and value.startswith("lin_"):
        return float(value[4:]), True
    try:
        return float(value), False
    except (TypeError, ValueError):
        raise ValueError(f"RL Zoo {key}: {value!r} is neither a number nor lin_<number>") from None


def _normalize(value: Any) -> tuple[bool, bool]:
    if isinstance(value, bool):
        return value, value
    parsed = ast.literal_eval(value.replace("true", "True").replace("false", "False")) if isinstance(value, str) \
        else value
    if isinstance(parsed, bool):
        return parsed, parsed
    if isinstance(parsed, dict):
        return bool(parsed.get("norm_obs", True)), bool(parsed.get("norm_reward", True))
    raise ValueError(f"RL Zoo normalize: {value!r} is neither a bool nor a dict of norm_obs/norm_reward")


def _policy_kwargs(value: Any, model: dict[str, Any]) -> list[str]:
    """Map RL Zoo's ``policy_kwargs`` (a ``dict(...)`` string or a mapping) onto ``model``; notes for the rest."""
    kwargs = _read_policy_kwargs(value) if isinstance(value, str) else dict(value)
    notes = []
    for key, item in kwargs.items():
        if key == "net_arch":
            arch = item[0] if isinstance(item, list) and item and isinstance(item[0], dict) else item
            if isinstance(arch, dict):
                pi, vf = list(arch.get("pi", [])), list(arch.get("vf", []))
                if pi != vf:
                    notes.append(f"policy_kwargs net_arch pi={pi} vf={vf}: ppo_td uses one width list for both; "
                                 f"took pi's")
                model["hidden_sizes"] = tuple(int(w) for w in pi)
            else:
                model["hidden_sizes"] = tuple(int(w) for w in arch)
        elif key == "activation_fn":
            name = str(item).rpartition(".")[2].lower()
            if name not in ("tanh", "relu"):
                notes.append(f"policy_kwargs activation_fn {item}: ppo_td has tanh and relu; kept "
                             f"{model['activation']}")
            else:
                model["activation"] = name
        elif key == "log_std_init":
            model["log_std_init"] = float(item)
        elif key == "ortho_init":
            model["orthogonal_init"] = bool(item)
        else:
            notes.append(f"policy_kwargs {key}={item!r} has no ppo_td counterpart; ignored")
    return notes


def _read_policy_kwargs(text: str) -> dict[str, Any]:
    """RL Zoo's ``"dict(net_arch=..., activation_fn=nn.ReLU, ...)"`` without eval: literals, lists, dict(...)
    calls and dotted names (kept as text)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        return _literal(tree)
    except (SyntaxError, ValueError) as err:
        raise ValueError(f"RL Zoo policy_kwargs {text!r}: cannot read it ({err})") from None


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(n) for n in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Attribute | ast.Name):
        return ast.unparse(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    raise ValueError(f"unsupported expression {ast.unparse(node)!r}")
