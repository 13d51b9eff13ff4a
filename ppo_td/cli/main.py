"""Command line: ``ppo-td train``, ``eval``, ``export``, ``play`` and ``doctor``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ppo_td.cli.command import RESUME_FLAGS
from ppo_td.cli.parse import train_command
from ppo_td.config import MAX_EVAL_EPISODES
from ppo_td.experiment.signals import SIGNALS, exit_code, interrupt_on_signals, signal_name
from ppo_td.presets import DEFAULT_PRESET, get_preset

USAGE = """usage: ppo-td COMMAND [ARGS]

commands:
  train   train PPO (no arguments: the tuned CartPole-v1 preset); --help lists every field
  tune    search hyper-parameters with Optuna: several seeds a trial, the top trials confirmed on fresh seeds
  eval    run deterministic (or --sampled) episodes of a checkpoint and print mean +- std; --video records them
  export  write a trained policy as a file that runs without ppo_td (--format torchscript|export|onnx)
  play    play a turn-based game (connect four, tic-tac-toe) against a trained policy in the terminal
  arena   a round robin of trained policies of a turn-based game and fixed anchors: results and ratings;
          of a team game's runs: every run's groups against every run's
  doctor  audit your PPO script or notebook (SCRIPT.py|NOTEBOOK.ipynb [ARGS] [--steps N] [--json]), or one
          update of a pipeline, for autograd mistakes

examples:
  ppo-td train
  ppo-td train --preset cleanrl --optim.lr 3e-4 --env.num-envs 8 --frames-per-batch 1024
  ppo-td tune --env.env-id FrozenLake8x8-v1 --trials 40 --seeds 3 --frames 200000 --workers 2
  ppo-td train --config tune/FrozenLake8x8-v1-1a2b3c4d/best_config.json
  ppo-td eval runs/cartpole-seed1 --episodes 20
  ppo-td eval runs/cartpole-seed1 --video
  ppo-td export runs/cartpole-seed1 --format onnx
  ppo-td arena runs/connect-four runs/connect-four-self --games 200
  ppo-td doctor my_ppo.py --steps 10
  ppo-td doctor my_first_ppo.ipynb
  ppo-td doctor --preset cleanrl --loss my_project.losses:make_loss
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppo-td`` script; returns the exit code. Called from Python (a test, a notebook), it
    leaves the process and its signal handlers as they were; the script itself also ends promptly (:func:`command`)."""
    return command(argv)[0]


def command(argv: list[str] | None = None) -> tuple[int, str | None]:
    """:func:`main`'s exit code, and how a signal ended the command: None (none did, or the doctor's user script
    had its own Ctrl-C), ``"now"`` (a run stopped at once: the second signal) or ``"after"`` (any other command a
    signal ended, a run stopped at the end of its iteration with its checkpoint among them). The ``ppo-td`` script
    ends its process promptly after either (:func:`~ppo_td.cli.script`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0, None
    name, rest = argv[0], argv[1:]
    commands = {"train": _train, "tune": _tune, "eval": _eval, "export": _export, "doctor": _doctor, "play": _play,
                "arena": _arena}
    if name not in commands:
        print(f"ppo-td: unknown command {name!r}\n\n{USAGE}", file=sys.stderr)
        return 2, None
    # the doctor lets a user's script see its own Ctrl-C; elsewhere SIGINT and SIGTERM stop the command at once
    # (training: at the end of an iteration, with a checkpoint), saying what they stopped
    guard = contextlib.nullcontext() if name == "doctor" else interrupt_on_signals()
    try:
        with guard:
            code = commands[name](rest)
    except KeyboardInterrupt as err:
        print(f"ppo-td {name}: {signal_name(err)}: stopped", file=sys.stderr)
        return exit_code(err), None if name == "doctor" else "now" if name == "train" else "after"
    except Exception as err:
        from ppo_td.collect import WorkerError  # e.g. workers that could not start

        if _out_of_memory(err):  # an estimate of the run's size fell short: torch's allocator said no
            print(f"ppo-td {name}: error: out of memory: {str(err).splitlines()[0]} (lower env.num_envs, "
                  "frames_per_batch or model.hidden_sizes)", file=sys.stderr)
            return 2, None
        if not isinstance(err, (ValueError, TypeError, OSError, ImportError, WorkerError)):
            raise  # OSError: a full disk, a read-only or missing folder (the message names the file)
        print(f"ppo-td {name}: error: {err}", file=sys.stderr)
        return 2, None
    return code, "after" if name != "doctor" and code - 128 in SIGNALS else None


def _out_of_memory(err: BaseException) -> bool:
    """A ``MemoryError``, or torch's ``RuntimeError`` for an allocation the machine refused."""
    import torch

    return isinstance(err, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(err, RuntimeError) and "can't allocate memory" in str(err))


def _quiet_torchrl() -> None:
    """Import TorchRL (seconds) once the arguments are valid, and keep its INFO lines off the progress bar: it sets
    its logger's level when imported, so import first, then quieten it. (A user's script under the doctor never
    gets here: it needs no TorchRL.)"""
    import torchrl  # noqa: F401

    logging.getLogger("torchrl").setLevel(logging.WARNING)


def _train(args: list[str]) -> int:
    from ppo_td.cli.run import run_training

    cmd, args = train_command(args, "ppo-td train")
    from ppo_td.persist.loggers import check_loggers

    check_loggers(cmd.logger)  # an unknown name, or its library missing: before anything is built
    _quiet_torchrl()
    if cmd.threads is not None and cmd.threads < 1:
        raise ValueError(f"--threads {cmd.threads}: give the number of torch threads (>= 1)")
    if cmd.resume:
        given = {a.split("=")[0].replace("_", "-") for a in args if a.startswith("--")}
        refused = sorted(given - RESUME_FLAGS)
        if refused:  # checked by name: a flag equal to the default would otherwise pass unnoticed
            raise ValueError(f"--resume continues a run with the config stored in its checkpoint and writes to the "
                             f"same folder: drop {', '.join(refused)} (only --collector, --workers, --ray-address, "
                             "--device, --threads and --eval-max-steps may change, i.e. where collection and the "
                             "update run, how the run is shown and checkpointed, and where evaluation episodes are "
                             "cut)")
        return run_training(dataclasses.replace(
            cmd, resume_device=cmd.config.device if "--device" in given else None,
            resume_eval_max_steps=cmd.config.eval_max_steps if "--eval-max-steps" in given else None))
    return run_training(dataclasses.replace(cmd, config=cmd.resolved_config()))


def _tune(args: list[str]) -> int:
    from ppo_td.cli.tune import tune_command

    return tune_command(args, _quiet_torchrl)


def _play(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ppo-td play", description="Play a turn-based game against a trained "
                                     "policy in the terminal (docs/games.md): the board drawn as text, your move "
                                     "typed, an illegal one refused.")
    parser.add_argument("checkpoint", help="checkpoint file, or a run folder holding checkpoint.pt")
    parser.add_argument("--sampled", action="store_true", help="the policy samples its moves (default: its mode)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the game (your seat is drawn from it)")
    ns = parser.parse_args(args)
    if _no_checkpoint(ns.checkpoint, "play", "last"):
        return 2
    _quiet_torchrl()
    from ppo_td.deploy.play import play

    play(ns.checkpoint, sampled=ns.sampled, seed=ns.seed)
    return 0


def _arena(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ppo-td arena", description="A round robin of trained policies of one two-seat turn-based game and fixed "
        "anchors (docs/games.md): every pair plays --games games, the seats alternating; prints each pair's wins, "
        "draws and losses with a 95 percent interval, and OpenSkill ratings. A run's checkpoints "
        "(RUN/checkpoints/*.pt, kept with --keep-checkpoints) give its rating curve (--plot).")
    parser.add_argument("players", nargs="+", metavar="RUN_OR_CHECKPOINT",
                        help="run folders (their checkpoint.pt) or checkpoint files of the same game")
    parser.add_argument("--games", type=int, default=100, help="games every pair plays (default 100)")
    parser.add_argument("--anchors", nargs="*", default=None, metavar="NAME",
                        help="fixed players: random, connect-four-heuristic, tictactoe-heuristic, module:Name "
                             "(default: random, and the game's heuristic in those two; --anchors alone: none)")
    parser.add_argument("--mode", action="store_true", help="each policy plays its mode (default: it samples its "
                        "moves, as in training; two modes meeting repeat one game per seat)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the games (default 0)")
    parser.add_argument("--which", choices=("last", "best"), default="last",
                        help="a run folder's checkpoint.pt (last, the default) or best.pt")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write every game, the pairs and the ratings to FILE")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE",
                        help="also draw the runs' rating curves (their checkpoints' ratings against frames) to FILE")
    parser.add_argument("--episodes", type=int, default=20,
                        help="team games (several agent groups: VMAS or MPE simple_tag): episodes of every "
                             "assignment of the runs to the groups (default 20)")
    ns = parser.parse_args(args)
    if ns.games < 1:
        raise ValueError(f"--games {ns.games}: give the games every pair plays (>= 1)")
    if ns.episodes < 1:
        raise ValueError(f"--episodes {ns.episodes}: give the episodes every match plays (>= 1)")
    for out in (ns.json, ns.plot):
        if out is not None and not out.parent.is_dir():
            raise ValueError(f"{out}: its folder {out.parent} does not exist")
    if any(_no_checkpoint(player, "arena", ns.which) for player in ns.players):
        return 2
    _quiet_torchrl()
    from ppo_td.deploy.arena import ArenaInterrupted, arena, write_json
    from ppo_td.deploy.team_arena import TEAM_ONLY, TeamArenaInterrupted, is_team_run

    if ns.plot is not None and is_team_run(ns.players[0], ns.which):
        raise ValueError(f"{ns.players[0]} {TEAM_ONLY}")

    def on_round(done: int, rounds: int) -> None:
        if done == rounds or done % max(1, rounds // 10) == 0:
            print(f"round {done} of {rounds}", file=sys.stderr, flush=True)

    try:
        result = arena(ns.players, games=ns.games, anchors=ns.anchors, sampled=not ns.mode, seed=ns.seed,
                       which=ns.which, on_round=on_round, episodes=ns.episodes)
    except (ArenaInterrupted, TeamArenaInterrupted) as err:  # what was played is kept: shown, and written where asked
        print(err.result.table())
        if ns.json is not None:
            print(f"wrote {write_json(err.result, ns.json)}")
        raise
    print(result.table())
    if ns.json is not None:
        print(f"wrote {write_json(result, ns.json)}")
    if ns.plot is not None:
        if not result.curves():
            print("--plot: no run's checkpoints played (pass RUN/checkpoints/*.pt for a rating curve); nothing drawn",
                  file=sys.stderr)
        else:
            print(f"wrote {result.plot(ns.plot)}")
    return 0


def _eval(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ppo-td eval", description="Evaluation episodes of a checkpoint: the "
                                     "policy's mode (deterministic, the default) or actions sampled from it.")
    parser.add_argument("checkpoint", help="checkpoint file, or a run folder holding checkpoint.pt")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the evaluation envs (default 0)")
    parser.add_argument("--sampled", action="store_true", help="sample actions from the policy, as in training")
    parser.add_argument("--which", choices=("last", "best"), default="last",
                        help="a run folder's checkpoint.pt (last, the default) or best.pt (best: the best evaluation "
                             "during training, --eval-every)")
    parser.add_argument("--video", nargs="?", const="", default=None, metavar="FOLDER",
                        help="also record episodes as MP4 videos into FOLDER (default: <run folder>/videos); needs "
                             "the env to render rgb_array frames and the video extra (moviepy)")
    parser.add_argument("--video-episodes", type=int, default=1, help="episodes to record with --video (default 1)")
    parser.add_argument("--max-steps", type=int, default=None, metavar="N",
                        help="cut an episode still running after N steps, on an env without a time limit of its own "
                             "(default: the run's eval_max_steps, 10,000 unless set); a cut episode has no return")
    ns = parser.parse_args(args)
    if not 1 <= ns.episodes <= MAX_EVAL_EPISODES or ns.video_episodes < 1:  # the flags first, then the files
        raise ValueError(f"--episodes {ns.episodes} --video-episodes {ns.video_episodes}: --episodes must be in "
                         f"[1, {MAX_EVAL_EPISODES:,}] (each return is kept) and --video-episodes >= 1")
    if ns.max_steps is not None and ns.max_steps < 1:
        raise ValueError(f"--max-steps {ns.max_steps}: give the steps an episode may run (>= 1)")
    if _no_checkpoint(ns.checkpoint, "eval", ns.which):
        return 2
    _quiet_torchrl()
    from ppo_td.experiment.report import cut_note, evaluation_start, format_evaluation
    from ppo_td.persist import checkpoint_in, load_for_evaluation
    from ppo_td.training import evaluate

    config, actor, obs_stats, transform_states = load_for_evaluation(checkpoint_in(ns.checkpoint, ns.which))
    if ns.video is not None and config.env.multiagent:  # refused before the episodes run
        raise ValueError(f"--video records one-agent runs; {ns.checkpoint} trained agents of env.suite="
                         f"{config.env.suite!r} (videos of multi-agent runs are not supported yet)")
    if ns.max_steps is not None:
        config = dataclasses.replace(config, eval_max_steps=ns.max_steps)
    how = "sampled" if ns.sampled else "deterministic"
    print(evaluation_start(config.env, ns.episodes, [how], config.eval_max_steps), flush=True)
    try:
        ev = evaluate(actor, config.env, ns.episodes, seed=ns.seed, obs_stats=obs_stats, sampled=ns.sampled,
                      max_steps=config.eval_max_steps, transform_states=transform_states)
    except KeyboardInterrupt as err:
        print(f"ppo-td eval: {signal_name(err)}: the {how} evaluation stopped before its episodes ended",
              file=sys.stderr)
        return exit_code(err)
    note = cut_note([ev], [how], "--max-steps")
    if note:
        print(note)
    print(format_evaluation(ev, how, per_agent=config.env.multiagent))
    if ns.video is not None:
        from ppo_td.deploy import load_policy
        from ppo_td.deploy.video import headless_rendering, record_video

        headless_rendering()
        folder = ns.video or str(_run_folder(ns.checkpoint) / "videos")
        # evaluation's operations, bit for bit, so the first video is the first episode evaluated above
        policy = load_policy(ns.checkpoint, which=ns.which, deterministic=not ns.sampled, inference="torch")
        try:
            videos = record_video(policy, folder, episodes=ns.video_episodes, seed=ns.seed, name_prefix="eval",
                                  as_evaluation=True,  # seeded as the evaluation above seeded its first copy
                                  max_steps=config.eval_max_steps)
        except KeyboardInterrupt as err:
            print(f"ppo-td eval: {signal_name(err)}: the video recording stopped (a partly written video is "
                  "removed)", file=sys.stderr)
            return exit_code(err)
        for video in videos:
            ending = (f"cut at {video.steps:,} steps, reward so far {video.total:.1f}" if video.cut
                      else f"return {video.total:.1f}")
            print(f"video: {video.path} ({ending})")
    return 0


def _no_checkpoint(checkpoint: str, command: str, which: str = "last") -> bool:
    """Say so (as :func:`~ppo_td.persist.load_checkpoint` would) and return True where ``checkpoint`` is neither a
    file nor a folder holding checkpoint.pt: before TorchRL's import (seconds), so a mistyped path is told at once.
    Printed here, not raised: :func:`main`'s error handler imports TorchRL too."""
    path = Path(checkpoint)
    file = path / "checkpoint.pt" if path.is_dir() else path
    if file.is_file() or (path.is_dir() and which != "last"):  # (a folder's best.pt: checkpoint_in says why not)
        return False
    why = f"no checkpoint at {file}: pass a checkpoint file or a run folder with checkpoint.pt"
    if (path / "config.json").is_file():  # a run folder whose run wrote none yet: what it holds instead
        held = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
        earlier = sorted((path / "checkpoints").glob("iter_*.pt"), key=lambda p: (len(p.name), p.name))
        why += (f". {path} is a run folder holding {', '.join(held)}: " + (
            f"pass its latest checkpoint, {earlier[-1]}" if earlier else
            "its run has written no checkpoint (one every --checkpoint-every iterations and one at the end): it is "
            "still running, or stopped before its first"))
    print(f"ppo-td {command}: error: {why}", file=sys.stderr)
    return True


def _run_folder(checkpoint: str) -> Path:
    """The run folder of a checkpoint argument (itself, or the folder holding the file or its checkpoints/)."""
    path = Path(checkpoint)
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def _export(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ppo-td export", description="Write a trained policy as one file that runs without ppo_td: the "
        "observation normalizer, the networks and the deterministic action baked in; batched inputs.")
    parser.add_argument("checkpoint", help="checkpoint file, or a run folder holding checkpoint.pt")
    parser.add_argument("--format", required=True, choices=["torchscript", "export", "onnx"],
                        help="torchscript (torch.jit.load), export (torch.export.load) or onnx (onnxruntime; the "
                             "export extra)")
    parser.add_argument("--out", default=None, help="file to write (default: <run folder>/policy.pt, .pt2 or .onnx)")
    ns = parser.parse_args(args)
    if _no_checkpoint(ns.checkpoint, "export"):
        return 2
    _quiet_torchrl()
    from ppo_td.deploy import TeamPolicy, load_policy
    from ppo_td.deploy.export import FORMATS, check_export, export_policy, export_team, input_specs, output_names

    policy = load_policy(ns.checkpoint)
    out = Path(ns.out) if ns.out else _run_folder(ns.checkpoint) / f"policy{FORMATS[ns.format]}"
    if isinstance(policy, TeamPolicy):  # several agent groups: a file each, all checked before any is written
        written = export_team(policy, ns.format, out)
        parts = [(f"group {g}: ", policy[g], path) for g, path in written.items()]
    else:
        parts = [("", policy, export_policy(policy, ns.format, out))]  # checked before it is written
    for head, one, path in parts:
        print(f"{head}wrote {path} ({ns.format})")
        print(f"inputs: {'; '.join(input_specs(one))}")
        print(f"outputs: {', '.join(output_names(one))}")
        error = check_export(one, ns.format, path)
        print("checked: " + (f"its actions match the policy's on 64 random inputs (max difference {error:.2g})"
                             if error is not None else "onnxruntime is not installed, so the file was not run here"))
    return 0


def _script_at(args: list[str]) -> int | None:
    return next((i for i, a in enumerate(args) if a.endswith((".py", ".ipynb")) and not a.startswith("-")), None)


def _doctor(args: list[str]) -> int:
    script = _script_at(args)
    if script is not None:
        return _doctor_script(args[:script], args[script], args[script + 1:])
    parser = argparse.ArgumentParser(
        prog="ppo-td doctor",
        description="Run one collection and one update of a ppo_td pipeline under the autograd audit; exit 1 if "
        "anything is found. Each PART is module:function; the function gets (env, config) for "
        "--actor/--critic/--transform and (actor, critic, config) for --loss.",
        epilog="Your own script: ppo-td doctor SCRIPT.py [ARGS ...] [--steps 20] [--timeout 600] [--json] runs "
        "it unmodified under the audit (ppo-td doctor x.py --help for its options); a NOTEBOOK.ipynb runs its "
        "code cells in order.",
    )
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="preset to build the pipeline from")
    for part in ("actor", "critic", "loss", "transform"):
        parser.add_argument(f"--{part}", metavar="MODULE:FUNCTION", help=f"your own {part} factory")
    ns = parser.parse_args(args)
    _quiet_torchrl()
    from ppo_td.doctor import checkup
    from ppo_td.models import make_actor_critic
    from ppo_td.training import build_pipeline, make_train_env

    config = dataclasses.replace(get_preset(ns.preset), compile=False)  # one update: compiling would only add seconds
    built = make_train_env(config)
    env = built.env
    if ns.transform:
        env.append_transform(_made(ns.transform, "a TorchRL Transform", env, config))
    actor, critic = make_actor_critic(env, config.model)
    actor = _made(ns.actor, "a TensorDict module", env, config) if ns.actor else actor
    critic = _made(ns.critic, "a TensorDict module", env, config) if ns.critic else critic
    parts = {"loss": _made(ns.loss, "a TorchRL LossModule", actor, critic, config)} if ns.loss else {}
    audit = checkup(build_pipeline(config, env=built, actor=actor, critic=critic, **parts))
    print(audit.report())
    return 0 if audit.ok else 1


DOCTOR_FLAGS = {"--steps": True, "--timeout": True, "--json": False}  # flag -> takes a value


def _doctor_script(before: list[str], script: str, after: list[str]) -> int:
    """``ppo-td doctor SCRIPT.py [ARGS ...]``: run the script unmodified under the audit and print the report.

    The doctor's flags (--steps, --timeout, --json) may come before the script or among its arguments; the
    script gets every other argument, and everything after ``--``."""
    parser = argparse.ArgumentParser(
        prog="ppo-td doctor SCRIPT.py [ARGS ...]",
        description="Run your training script, unmodified, under the autograd audit (a notebook: its code "
        "cells in order, magics skipped, nothing displayed; lines named 'nb.ipynb, cell N, line L', cell N being "
        "the N-th code cell): modules are discovered as it calls them, optimizers as they step. Stops after "
        "--steps optimizer steps, at the script's first error, or at its end; exit 1 if anything is found.")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps to audit (default 20)")
    parser.add_argument("--timeout", type=float, default=600.0, help="stop the script after this many seconds")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (the script's output goes "
                        "to stderr)")
    mine, theirs = list(before), []
    rest = iter(after)
    for arg in rest:
        if arg == "--":
            theirs += list(rest)
            break
        flag = arg.split("=", 1)[0]
        if flag in DOCTOR_FLAGS:
            mine.append(arg)
            value = next(rest, None) if DOCTOR_FLAGS[flag] and "=" not in arg else None
            if value is not None:
                mine.append(value)
        else:
            theirs.append(arg)
    try:
        ns = parser.parse_args(mine)
    except SystemExit as err:
        return 0 if err.code == 0 else 2
    if ns.steps < 1 or ns.timeout <= 0:
        raise ValueError(f"--steps {ns.steps} / --timeout {ns.timeout:g}: both must be positive")
    import json

    from ppo_td.doctor.script import run_script

    with _stdout_to_stderr() if ns.json else contextlib.nullcontext():
        audit, ended = run_script(script, theirs, steps=ns.steps, timeout=ns.timeout)
    if ns.json:
        print(json.dumps({"script": script, "ended": ended, **audit.to_dict()}, indent=1))
    else:
        print(f"ppo-td doctor: ran {script}: {ended}\n{audit.report()}")
    return 0 if audit.ok and audit.audited else 1


@contextlib.contextmanager
def _stdout_to_stderr():
    """Send everything written to stdout (Python's and file descriptor 1: subprocesses, C code) to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _made(spec: str, what: str, *args: Any) -> Any:
    """Call the factory ``spec`` (module:function); a factory that returns nothing is refused, not replaced by the
    default (the doctor would give a clean bill to code it never ran)."""
    made = _load(spec)(*args)
    if made is None:
        raise TypeError(f"{spec} returned None; it must return {what}")
    return made


def _load(spec: str):
    """Import ``module:function`` (the current folder is searched too, as Gymnasium's ``module:EnvId`` is)."""
    from ppo_td.envs import import_attr

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not of the form module:function (e.g. my_pkg.nets:make_actor)")
    return import_attr(spec, spec)


if __name__ == "__main__":
    sys.exit(main())
