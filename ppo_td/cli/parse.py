"""``ppo-td train``'s flags read into a :class:`~ppo_td.cli.command.TrainCommand`: the defaults (a preset, the one
made for ``--env.env-id``, an RL Zoo entry with ``--from-zoo``, or a config file with ``--config``), then every
flag over them. ``ppo-td tune`` reads its base config the same way. An unknown flag (naming the one meant) and an
unknown Gymnasium id are refused before anything else is said."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import os
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

import tyro

from ppo_td.cli.command import TrainCommand
from ppo_td.config import TrainConfig, from_dict
from ppo_td.presets import DEFAULT_PRESET, fit_recurrent, get_preset, preset_for


def say(line: str) -> None:
    """A line about the command's settings, printed once: by the one process, or by rank 0 of the ranks torchrun
    started (each parses the same command)."""
    if os.environ.get("RANK", "0") in ("", "0"):
        print(line)


def train_command(args: list[str], prog: str, other_flags: Iterable[str] = ()) -> tuple[TrainCommand, list[str]]:
    """The command ``args`` give (validated), and the arguments as read (``--model.recurrent`` taken out where it
    is fitted to the batch). ``other_flags``: the caller's own flags (``ppo-td tune``'s), offered for a typo."""
    args = compile_flags(args)
    check_flags(args, other_flags)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--preset")
    pre.add_argument("--env.env-id", "--env.env_id", dest="env_id")
    pre.add_argument("--from-zoo", "--from_zoo", dest="from_zoo")
    pre.add_argument("--from-rl-games", "--from_rl_games", dest="from_rl_games")
    pre.add_argument("--env.num-envs", "--env.num_envs", dest="num_envs")
    pre.add_argument("--config")
    pre.add_argument("--env.suite", "--env_suite", dest="suite")
    known = pre.parse_known_args(args)[0]
    preset_name = known.preset or DEFAULT_PRESET
    resuming = any(a.startswith("--resume") for a in args)  # (the id is the checkpoint's: --env.env-id is refused)
    if known.config is not None:
        if known.preset or known.from_zoo or known.from_rl_games:
            raise ValueError(f"--config {known.config} is a whole config: drop --preset/--from-zoo/--from-rl-games "
                             "(flags given with it still change its fields)")
        default = TrainCommand(config=config_file(known.config), preset="config")
        _check_env_id(known.env_id, known.suite or default.config.env.suite)
        args = _without(args, "--config")
    elif known.from_zoo and known.from_rl_games:
        raise ValueError("--from-zoo and --from-rl-games: give one of them")
    elif known.from_zoo:
        _check_env_id(known.env_id, known.suite or "gymnasium")  # (RL Zoo's entries are Gymnasium envs)
        default = _zoo_command(known.from_zoo, known.env_id, known.preset)
    elif known.from_rl_games:
        envs = int(known.num_envs) if (known.num_envs or "").isdigit() else None  # (a bad value: tyro says so)
        default = _rl_games_command(known.from_rl_games, known.env_id, known.suite, known.preset, envs)
    else:
        why = None
        if known.preset is None and known.env_id and not resuming:
            _import_module_of(known.env_id)  # (a module next to the user's script registers it: the build's lookup)
            preset_name, why = preset_for(known.env_id)  # not CartPole's tuned values for another env
        if not resuming:  # (the suite of the preset chosen: vmas-navigation's id is no Gymnasium id)
            _check_env_id(known.env_id, known.suite or get_preset(preset_name).env.suite)
        if why is not None:
            say(f"defaults: preset {preset_name!r}, {why} (--preset NAME to choose)")
        default = TrainCommand(config=_for_env(get_preset(preset_name), preset_name, known.env_id),
                               preset=preset_name)
    recurrent, args = _recurrent_to_fit(args, default.config)
    cmd = tyro.cli(TrainCommand, default=default, args=args, prog=prog)  # validated: now the libraries
    if recurrent is not None:
        fitted, note = fit_recurrent(cmd.config, recurrent)
        say(f"note: {note}")
        cmd = dataclasses.replace(cmd, config=fitted)
    return cmd, args


# other libraries' names for ppo_td's flags (CleanRL's ppo.py, docs/cleanrl-names.md; SB3's PPO and RL Zoo), by the
# flag's last dotted part, dashes for underscores: the flag to give, and what differs. Names ppo_td shares with them
# (gamma, gae_lambda, max_grad_norm, target_kl, num_envs, seed...) are found under their section without this table
SYNONYMS: dict[str, tuple[str, str]] = {
    "learning-rate": ("--optim.lr", ""),
    "total-timesteps": ("--total-frames", ""),
    "n-timesteps": ("--total-frames", ""),
    "num-steps": ("--frames-per-batch", "it counts frames across all envs: num_envs x num_steps"),
    "n-steps": ("--frames-per-batch", "it counts frames across all envs: num_envs x n_steps"),
    "n-envs": ("--env.num-envs", ""),
    "env": ("--env.env-id", ""),
    "n-epochs": ("--optim.update-epochs", ""),
    "batch-size": ("--optim.num-minibatches", "ppo_td counts minibatches: frames_per_batch / batch_size"),
    "minibatch-size": ("--optim.num-minibatches", "ppo_td counts minibatches: frames_per_batch / minibatch_size"),
    "ent-coef": ("--loss.entropy-coeff", ""),
    "vf-coef": ("--loss.critic-coeff", "critic_coeff = 0.5 x vf_coef: TorchRL's l2 loss has no 1/2"),
    "clip-coef": ("--loss.clip-epsilon", ""),
    "clip-range": ("--loss.clip-epsilon", ""),
    "clip-vloss": ("--loss.clip-value", "the value clip range, a float, or None for none"),
    "clip-range-vf": ("--loss.clip-value", ""),
    "norm-adv": ("--loss.normalize-advantage", ""),
    "use-sde": ("--model.exploration", "as --model.exploration gsde"),
    "sde-sample-freq": ("--model.sde-sample-every", ""),
    "capture-video": ("--video-every", "a video of one evaluation episode every N iterations"),
    "track": ("--logger", "as --logger wandb"),
    "wandb-project-name": ("--project", ""),
    "cuda": ("--device", "cpu, cuda, cuda:N or auto"),
}


def check_flags(args: list[str], other_flags: Iterable[str] = ()) -> None:
    """Refuse a ``--flag`` that is none of ``ppo-td train``'s (nor in ``other_flags``), naming the flag meant: a
    synonym from another library, the same name in another section, else a close spelling. Tokens after ``--``
    and those with one dash (values: ``-1``, ``-3e-4``) are left to tyro."""
    known = known_flags() | {f.replace("_", "-") for f in other_flags}
    unknown = []
    for arg in args:
        if arg == "--":
            break
        given = arg.split("=", 1)[0]
        if arg.startswith("--") and given.replace("_", "-") not in known and given not in unknown:
            unknown.append(given)
    if unknown:
        raise ValueError("; ".join(_meant(given, known) for given in unknown))


def _meant(given: str, known: frozenset[str]) -> str:
    """``unknown flag FLAG: did you mean ...?``, or where to find the flags."""
    flag = given.replace("_", "-")
    name = flag[2:].rpartition(".")[2]
    bare = name.removeprefix("no-")  # --no-norm-adv: --loss.no-normalize-advantage
    meant, note = SYNONYMS.get(bare, (None, ""))
    if meant is None:  # the same name under another section: --optim.gamma, --lr
        same = sorted(f for f in known if f.rpartition(".")[2].removeprefix("--") == bare)
        meant = same[0] if len(same) == 1 else None
    if meant is not None and bare != name:
        head, dot, tail = meant.rpartition(".")
        negated = f"{head}{dot}{'' if dot else '--'}no-{tail.removeprefix('--')}"
        meant = negated if negated in known else meant  # (--no-cuda: --device)
    if meant is None or meant not in known:
        close = difflib.get_close_matches(flag, sorted(known), n=1)
        meant, note = (close[0], "") if close else (None, "")
    if meant is None:
        return f"unknown flag {given}: ppo-td train --help lists every flag"
    return f"unknown flag {given}: did you mean {meant}?" + (f" ({note})" if note else "")


@functools.cache
def known_flags() -> frozenset[str]:
    """Every flag ``ppo-td train`` reads, as tyro names them (dashes): :class:`TrainCommand`'s fields and the
    config's (``--section.field``, ``--no-X`` beside a bool), ``--config`` and ``--help``."""
    return frozenset({"--help", "--config", *_field_flags(TrainCommand, "")})


COMPILE_VALUES = {"auto": "auto", "true": "True", "false": "False", "on": "True", "off": "False"}
"""What ``--compile`` takes (any case): ``auto``, ``True``/``on``, ``False``/``off``."""


def compile_flags(args: list[str]) -> list[str]:
    """``args`` with ``--compile`` as the config reads it: alone (before another flag or at the end) it is
    ``--compile True``, ``--no-compile`` is ``--compile False`` (the field was a plain switch before ``'auto'``), and
    a value in any case is spelled as tyro takes it; a value it cannot take is refused naming the three."""
    out: list[str] = []
    for i, a in enumerate(args):
        if a == "--no-compile":
            out += ["--compile", "False"]
        elif a == "--compile" and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out += ["--compile", "True"]
        elif out and out[-1] == "--compile" or a.startswith("--compile="):
            value = a.removeprefix("--compile=")
            if value.lower() not in COMPILE_VALUES:
                raise ValueError(f"--compile {value}: give auto (compile where it pays, the default), True (on) or "
                                 "False (off)")
            out += (["--compile"] if a.startswith("--compile=") else []) + [COMPILE_VALUES[value.lower()]]
        else:
            out.append(a)
    return out


def _field_flags(cls: type, prefix: str) -> Iterator[str]:
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        marks = getattr(hint, "__metadata__", ())
        if tyro.conf.Suppress in marks:
            continue
        named = [m.name for m in marks if isinstance(m, _ARG_CONFIG) and m.name is not None]
        name = named[0] if named else field.name.replace("_", "-")
        kind = typing.get_args(hint)[0] if marks else hint
        if dataclasses.is_dataclass(kind):  # a section: its fields under "name." (no prefix where named "")
            yield from _field_flags(kind, f"{prefix}{name}." if name else prefix)
            continue
        yield f"--{prefix}{name}"
        if kind is bool or name == "compile":  # (compile: 'auto' or a bool; compile_flags reads --no-compile)
            yield f"--{prefix}no-{name}"


_ARG_CONFIG = type(tyro.conf.arg())  # what tyro.conf.arg(name=...) puts in an Annotated field


def _check_env_id(env_id: str | None, suite: str) -> None:
    """Refuse a plain Gymnasium id that is not registered, with the build's message (``check_env_id``), before the
    defaults are chosen and the config is checked: a typo first, not a complaint about a field. A registered id
    needs no TorchRL; one that is not is read by the build's own check (which registers ``ALE/``, ``...NoFrameskip``,
    ``MinAtar/`` and ``MiniGrid-`` ids first, importing TorchRL: only then). ``module:Name`` ids (importing the module
    registers them) and the multi-agent suites' ids are left to the build."""
    if env_id is None or ":" in env_id or suite != "gymnasium":
        return
    import gymnasium as gym

    if env_id in gym.registry:
        return
    from ppo_td.envs.ids import check_env_id

    check_env_id(env_id)


def config_file(path: str) -> TrainConfig:
    """The config in a JSON file written by ppo_td (a run folder's ``config.json``, ``ppo-td tune``'s
    ``best_config.json``: :func:`ppo_td.config.to_dict`'s form)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"--config {path}: cannot read it ({err})") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"--config {path}: not JSON ({err}); give a run folder's config.json or ppo-td tune's "
                         "best_config.json") from err
    try:
        return from_dict(data)
    except (TypeError, ValueError) as err:
        raise ValueError(f"--config {path}: {err}") from err


def _without(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag`` and its value (``--flag V`` or ``--flag=V``)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def _for_env(config: TrainConfig, preset: str, env_id: str | None) -> TrainConfig:
    """A multi-agent preset pointed at another env (``--env.env-id``): the preset's env keyword arguments are its
    own env's (``N=3`` for simple_spread, VMAS navigation's lidar), so the other env starts from its own defaults,
    said in one line (``--env.kwargs`` sets any). One-agent presets keep theirs: they hold for the suite (Atari's
    frame skip)."""
    if env_id is None or env_id == config.env.env_id or not config.env.multiagent or not config.env.kwargs:
        return config
    say(f"note: preset {preset!r} sets env.kwargs {' '.join(config.env.kwargs)} for {config.env.env_id}; "
          f"{env_id} starts from its own defaults (--env.kwargs KEY=VALUE to set some)")
    return dataclasses.replace(config, env=dataclasses.replace(config.env, kwargs=()))


def _recurrent_to_fit(args: list[str], default: TrainConfig) -> tuple[str | None, list[str]]:
    """``--model.recurrent lstm|gru`` given without ``--optim.sequence-length`` or ``--optim.num-minibatches`` (nor a
    preset made recurrent): the model to fit to the batch once the other flags are parsed, and ``args`` without
    it; else (None, ``args``)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--model.recurrent", dest="recurrent")
    known, _ = pre.parse_known_args(args)
    chosen = {a.split("=")[0].replace("_", "-") for a in args if a.startswith("--optim.")}
    resuming = any(a.startswith("--resume") for a in args)
    if (known.recurrent in (None, "none") or default.model.recurrent != "none" or resuming
            or chosen & {"--optim.sequence-length", "--optim.num-minibatches"}):
        return None, args
    return known.recurrent, _without(args, "--model.recurrent")


def _zoo_command(path: str, env_id: str | None, preset: str | None) -> TrainCommand:
    """The defaults of ``ppo-td train --from-zoo PATH --env.env-id ID``: the RL Zoo entry of ID over ``preset``
    (default generic: SB3's defaults, which RL Zoo's entries change); every key it cannot map is printed."""
    from ppo_td.zoo import from_zoo, zoo_entry

    if not env_id:
        raise ValueError(f"--from-zoo {path}: give the env with --env.env-id ID; its entry in the file is read")
    key, entry = zoo_entry(path, env_id)
    config, notes = from_zoo(entry, env_id, get_preset(preset or "generic"))
    say(f"defaults: RL Zoo entry {key!r} of {path}, over preset {preset or 'generic'!r}")
    for note in notes:
        say(f"note: RL Zoo {note}")
    return TrainCommand(config=config, preset="zoo", from_zoo=path)


def _rl_games_command(path: str, env_id: str | None, suite: str | None, preset: str | None,
                      num_envs: int | None) -> TrainCommand:
    """The defaults of ``ppo-td train --from-rl-games PATH``: the rl_games config over ``preset`` (default generic),
    for --env.env-id or the Gymnasium id the file names (:func:`ppo_td.rlgames.read_rl_games`, as from Python);
    every setting whose meaning differs is printed."""
    from ppo_td.rlgames import read_rl_games

    config, notes, env_id = read_rl_games(path, env_id, num_envs, get_preset(preset or "generic"))
    _check_env_id(env_id, suite or "gymnasium")
    say(f"defaults: rl_games config {path} for {env_id}, over preset {preset or 'generic'!r}")
    for note in notes:
        say(f"note: rl_games {note}")
    return TrainCommand(config=config, preset="rl_games", from_rl_games=path)


def _import_module_of(env_id: str) -> None:
    """Import the module of a ``module:EnvId`` id as the build will (the current folder too), so that
    :func:`preset_for` sees the env it registers; an import that fails is left for the build to report."""
    module = env_id.rpartition(":")[0]
    if module:
        from ppo_td.envs.imports import import_from_cwd  # (ppo_td.envs imports TorchRL: only for such an id)

        try:
            import_from_cwd(module)
        except ImportError:
            pass
