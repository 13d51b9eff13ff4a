"""``ppo-td train``'s flags read into a :class:`~ppo_td.cli.command.TrainCommand`: the defaults (a preset, the one
made for ``--env.env-id``, an RL Zoo entry with ``--from-zoo``, or a config file with ``--config``), then every
flag over them. ``ppo-td tune`` reads its base config the same way."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import tyro

from ppo_td.cli.command import TrainCommand
from ppo_td.config import TrainConfig, from_dict
from ppo_td.presets import DEFAULT_PRESET, fit_recurrent, get_preset, preset_for


def train_command(args: list[str], prog: str) -> tuple[TrainCommand, list[str]]:
    """The command ``args`` give (validated), and the arguments as read (``--model.recurrent`` taken out where it
    is fitted to the batch)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--preset")
    pre.add_argument("--env.env-id", "--env.env_id", dest="env_id")
    pre.add_argument("--from-zoo", "--from_zoo", dest="from_zoo")
    pre.add_argument("--config")
    known = pre.parse_known_args(args)[0]
    preset_name = known.preset or DEFAULT_PRESET
    if known.config is not None:
        if known.preset or known.from_zoo:
            raise ValueError(f"--config {known.config} is a whole config: drop --preset/--from-zoo (flags given "
                             "with it still change its fields)")
        default = TrainCommand(config=config_file(known.config), preset="config")
        args = _without(args, "--config")
    elif known.from_zoo:
        default = _zoo_command(known.from_zoo, known.env_id, known.preset)
    else:
        if known.preset is None and known.env_id and not any(a.startswith("--resume") for a in args):
            _import_module_of(known.env_id)  # (a module next to the user's script registers it: the build's lookup)
            preset_name, why = preset_for(known.env_id)  # not CartPole's tuned values for another env
            print(f"defaults: preset {preset_name!r}, {why} (--preset NAME to choose)")
        default = TrainCommand(config=_for_env(get_preset(preset_name), preset_name, known.env_id),
                               preset=preset_name)
    recurrent, args = _recurrent_to_fit(args, default.config)
    cmd = tyro.cli(TrainCommand, default=default, args=args, prog=prog)  # validated: now the libraries
    if recurrent is not None:
        fitted, note = fit_recurrent(cmd.config, recurrent)
        print(f"note: {note}")
        cmd = dataclasses.replace(cmd, config=fitted)
    return cmd, args


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
    print(f"note: preset {preset!r} sets env.kwargs {' '.join(config.env.kwargs)} for {config.env.env_id}; "
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
    print(f"defaults: RL Zoo entry {key!r} of {path}, over preset {preset or 'generic'!r}")
    for note in notes:
        print(f"note: RL Zoo {note}")
    return TrainCommand(config=config, preset="zoo", from_zoo=path)


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
