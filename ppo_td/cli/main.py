"""Command line: ``ppo-td train`` and ``ppo-td eval``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from ppo_td.config import TrainConfig, from_dict
from ppo_td.presets import DEFAULT_PRESET, get_preset

USAGE = """usage: ppo-td COMMAND [ARGS]

commands:
  train   train PPO (no arguments: the tuned CartPole-v1 preset); --help lists every field
  eval    run deterministic episodes of a checkpoint and print mean +- std
  doctor  audit one collection and one update of a pipeline for autograd mistakes

examples:
  ppo-td train
  ppo-td train --preset cleanrl --optim.lr 3e-4 --env.num-envs 8 --frames-per-batch 1024
  ppo-td eval runs/cartpole-seed1 --episodes 20
  ppo-td doctor --preset cleanrl --loss my_project.losses:make_loss
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ppo-td`` script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    import torchrl  # noqa: F401 - it sets its logger's level when imported: import first, then quieten it

    logging.getLogger("torchrl").setLevel(logging.WARNING)  # its INFO lines would break the progress bar
    commands = {"train": _train, "eval": _eval, "doctor": _doctor}
    if command not in commands:
        print(f"ppo-td: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    try:
        return commands[command](rest)
    except Exception as err:
        from ppo_td.collect import WorkerError  # e.g. workers that could not start

        if not isinstance(err, (ValueError, TypeError, OSError, ImportError, WorkerError)):
            raise  # OSError: a full disk, a read-only or missing folder (the message names the file)
        print(f"ppo-td {command}: error: {err}", file=sys.stderr)
        return 2


@dataclasses.dataclass(frozen=True)
class TrainCommand:
    """Train PPO and write a run folder (config, metrics CSV, learning curve, checkpoints)."""

    config: Annotated[TrainConfig, tyro.conf.arg(name="")]
    preset: str = DEFAULT_PRESET
    """Preset to start from: cartpole, cleanrl, pendulum, trading, halfcheetah, hopper, walker2d, ant."""
    run_dir: str | None = None
    """Run folder to write; default runs/<env>-<preset>-seed<seed>-<time>."""
    resume: str | None = None
    """Run folder to continue from its checkpoint.pt (config, weights, RNG and counters come from it)."""
    checkpoint_every: int = 10
    """Write a checkpoint every N iterations (0: only at the end and on interruption)."""
    keep_checkpoints: int = 3
    """How many periodic checkpoints to keep in <run_dir>/checkpoints."""
    tensorboard: bool = False
    """Also write TensorBoard events to <run_dir>/tensorboard."""
    progress: bool = True
    """On a terminal, show a live progress bar; piped, to a file, or with --no-progress, print a summary line
    every --log-every iterations instead."""
    log_every: int | None = None
    """Iterations between summary lines when there is no progress bar (default: about 20 lines per run)."""
    collector: Literal["inprocess", "process", "ray"] | None = None
    """Shorthand for --collector.backend: where collection runs."""
    workers: int | None = None
    """Shorthand for --collector.num-workers."""
    ray_address: str | None = None
    """Shorthand for --collector.ray-address: 'local' (start Ray here), 'auto' (running cluster) or host:port."""
    overwrite: bool = False
    """Replace the run that --run-dir already holds (without it, a folder holding a run is refused)."""

    def collector_changes(self) -> dict[str, Any]:
        """The collector fields the shorthand flags set (only those given)."""
        shorthand = {"backend": self.collector, "num_workers": self.workers, "ray_address": self.ray_address}
        changes = {k: v for k, v in shorthand.items() if v is not None}
        if self.collector is not None and self.workers is None:
            changes["num_workers"] = None  # the backend's default (1 in-process, else 2)
        return changes

    def resolved_config(self) -> TrainConfig:
        """The config with the shorthand collector flags applied."""
        changes = self.collector_changes()
        if not changes:
            return self.config
        return dataclasses.replace(self.config, collector=dataclasses.replace(self.config.collector, **changes))


# what --resume may change: where collection runs, how the run is watched and checkpointed; never the config
RESUME_FLAGS = {"--resume", "--collector", "--workers", "--ray-address", "--checkpoint-every", "--keep-checkpoints",
                "--tensorboard", "--no-tensorboard", "--progress", "--no-progress", "--log-every"}


def _train(args: list[str]) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", default=DEFAULT_PRESET)
    preset_name = pre.parse_known_args(args)[0].preset
    default = TrainCommand(config=get_preset(preset_name), preset=preset_name)
    cmd = tyro.cli(TrainCommand, default=default, args=args, prog="ppo-td train")
    if cmd.resume:
        given = {a.split("=")[0].replace("_", "-") for a in args if a.startswith("--")}
        refused = sorted(given - RESUME_FLAGS)
        if refused:  # checked by name: a flag equal to the default would otherwise pass unnoticed
            raise ValueError(f"--resume continues a run with the config stored in its checkpoint and writes to the "
                             f"same folder: drop {', '.join(refused)} (only --collector, --workers and --ray-address "
                             "may change, i.e. where collection runs, and how the run is shown and checkpointed)")
        return run_training(cmd)
    return run_training(dataclasses.replace(cmd, config=cmd.resolved_config()))


@contextlib.contextmanager
def _stop_on_signals(checkpointer):
    """First SIGINT/SIGTERM: checkpoint and stop after the current iteration. A second SIGINT aborts."""
    received: list[int] = []

    def handler(signum, frame):
        if received and signum == signal.SIGINT:
            raise KeyboardInterrupt
        received.append(signum)
        checkpointer.request_stop()
        print(f"\n{signal.Signals(signum).name}: stopping at the end of this iteration, with a checkpoint "
              "(Ctrl-C again stops now, without one)", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_training(cmd: TrainCommand) -> int:
    """Train (or resume) as ``cmd`` says, write the run folder, print the evaluation; returns the exit code.

    The run folder is locked while it runs. The final checkpoint is written before the final evaluation, and
    ``--resume`` of a run whose training finished but whose evaluation did not (interrupted, crashed) runs
    the evaluation and writes the summary and plot.
    """
    from ppo_td.persist import RunFolder, load_checkpoint

    if cmd.resume:
        folder = RunFolder(cmd.resume)
        with folder.locked():
            state = load_checkpoint(folder.path / "checkpoint.pt")
            folder.check_checkpoint(state, folder.path / "checkpoint.pt")
            config = from_dict(state["config"])
            if state["frames"] >= config.num_iterations * config.frames_per_batch:
                return _finish_complete_run(folder.path, config)
            return _train_in(folder, cmd, resume=True)
    c = cmd.config
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = RunFolder(cmd.run_dir or f"runs/{c.env.env_id}-{cmd.preset}-seed{c.seed}-{stamp}")
    with folder.locked():
        folder.create(overwrite=cmd.overwrite)
        return _train_in(folder, cmd, resume=False)


def _train_in(folder, cmd: TrainCommand, resume: bool) -> int:
    from ppo_td.cli.progress import Progress
    from ppo_td.collect import WorkerError, shutdown
    from ppo_td.persist import Checkpointer, RunLogger, resume_pipeline
    from ppo_td.training import NonFiniteError, build_pipeline, run

    started = time.perf_counter()
    out = folder.path
    checkpointer = Checkpointer(out, cmd.checkpoint_every, cmd.keep_checkpoints, run_id=folder.run_id)
    elapsed = 0.0
    if resume:
        resumed = resume_pipeline(out / "checkpoint.pt", collector=cmd.collector_changes())
        pipeline, frames, iteration, elapsed = resumed.pipeline, resumed.frames, resumed.iteration, resumed.elapsed
        print(f"resuming {out} {resumed.describe()}")
    else:
        pipeline, frames, iteration = build_pipeline(cmd.config), 0, 0
    config = pipeline.config
    try:
        folder.write_config(config)  # atomically; on resume, with the collector settings the run now uses
        logger = RunLogger(out, config, tensorboard=cmd.tensorboard, resume_iteration=iteration if resume else None)
    except BaseException:
        shutdown(pipeline.collector)  # worker processes or a Ray instance may already be running
        raise
    bar = Progress(config.num_iterations * config.frames_per_batch, config.num_iterations, initial=frames,
                   bar=cmd.progress, every=cmd.log_every)
    with _stop_on_signals(checkpointer) as received:
        try:
            result = run(pipeline, callbacks=[logger, bar, checkpointer], frames=frames, iteration=iteration,
                         elapsed=elapsed, evaluate_at_end=False)
        except NonFiniteError as err:
            kept = out / "checkpoint.pt"
            print(f"ppo-td train: error: {err}\nlast good checkpoint: "
                  f"{kept if kept.exists() else 'none (use --checkpoint-every)'}", file=sys.stderr)
            return 1
        except WorkerError as err:
            print(f"ppo-td train: error: {err}\ntraining stopped after iteration {err.iteration}", file=sys.stderr)
            checkpointer.save(pipeline, err.frames, err.iteration)  # the last completed iteration, intact
            print(f"checkpoint: {out / 'checkpoint.pt'}\ncontinue with: ppo-td train --resume {out}", file=sys.stderr)
            return 1
        finally:
            bar.close()
            logger.close()
        last = result.history[-1] if result.history else {"frames": frames, "iteration": iteration, "time": elapsed}
        if result.stopped:
            print(f"stopped by signal {received[0]} after iteration {last['iteration']}; "
                  f"checkpoint: {out / 'checkpoint.pt'}\ncontinue with: ppo-td train --resume {out}")
            return 128 + received[0]
        checkpointer.save(pipeline, last["frames"], last["iteration"], last["time"])  # before the evaluation
    trained = last["frames"] - frames
    sps = trained / (last["time"] - elapsed) if last["time"] > elapsed else 0.0
    print(f"trained {trained} frames in {last['time'] - elapsed:.1f} s ({sps:.0f} frames/s)")
    return _finish_complete_run(out, config, started)  # outside the signal guard: Ctrl-C acts at once


def _finish_complete_run(out: Path, config: TrainConfig, started: float | None = None) -> int:
    """The final evaluation, ``summary.json`` and the learning curve of a run whose training is complete."""
    try:  # the checkpoint is written: an interrupt here loses nothing
        return _finish(out, config, time.perf_counter() if started is None else started)
    except KeyboardInterrupt:
        print(f"evaluation interrupted; the trained run is checkpointed. Finish it with: ppo-td train --resume {out}",
              file=sys.stderr)
        return 130


def _finish(out: Path, config: TrainConfig, started: float) -> int:
    from ppo_td.persist import load_actor, plot_learning_curve, read_episodes, read_metrics
    from ppo_td.training import evaluate

    if (out / "summary.json").exists():
        raise ValueError(f"{out}: the run is complete (summary.json is written), nothing to resume; evaluate it "
                         f"with `ppo-td eval {out}`")
    _, actor, obs_stats = load_actor(out / "checkpoint.pt")
    returns = evaluate(actor, config.env, config.eval_episodes, seed=config.seed + 10_000,
                       obs_stats=obs_stats) if config.eval_episodes else []
    plot_learning_curve(read_episodes(out), out / "learning_curve.png", f"{config.env.env_id}")
    last = read_metrics(out)[-1]
    summary = {"train_seconds": float(last["time"]), "finish_seconds": time.perf_counter() - started,
               "frames": int(last["frames"]), "eval_returns": returns}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if returns:
        print(_format_returns(returns))
    print(f"run folder: {out}")
    return 0


def _eval(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ppo-td eval", description="Deterministic evaluation of a checkpoint.")
    parser.add_argument("checkpoint", help="checkpoint file, or a run folder holding checkpoint.pt")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the evaluation envs (default 0)")
    ns = parser.parse_args(args)
    from ppo_td.persist import load_actor
    from ppo_td.training import evaluate

    config, actor, obs_stats = load_actor(ns.checkpoint)
    returns = evaluate(actor, config.env, ns.episodes, seed=ns.seed, obs_stats=obs_stats)
    print(_format_returns(returns))
    return 0


def _doctor(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ppo-td doctor",
        description="Run one collection and one update under the autograd audit; exit 1 if anything is found. "
        "Each PART is module:function; the function gets (env, config) for --actor/--critic/--transform "
        "and (actor, critic, config) for --loss.",
    )
    parser.add_argument("--preset", default=DEFAULT_PRESET, help="preset to build the pipeline from")
    for part in ("actor", "critic", "loss", "transform"):
        parser.add_argument(f"--{part}", metavar="MODULE:FUNCTION", help=f"your own {part} factory")
    ns = parser.parse_args(args)
    from ppo_td.doctor import checkup
    from ppo_td.models import make_actor_critic
    from ppo_td.training import build_pipeline, make_train_env

    config = get_preset(ns.preset)
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


def _made(spec: str, what: str, *args: Any) -> Any:
    """Call the factory ``spec`` (module:function); a factory that returns nothing is refused, not replaced by the
    default (the doctor would give a clean bill to code it never ran)."""
    made = _load(spec)(*args)
    if made is None:
        raise TypeError(f"{spec} returned None; it must return {what}")
    return made


def _load(spec: str):
    """Import ``module:function`` (the working directory is searched first, as with ``python -m``)."""
    import importlib
    import os

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{spec!r} is not of the form module:function (e.g. my_pkg.nets:make_actor)")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot load {spec!r}: {err}. Is the module on PYTHONPATH?") from err


def _format_returns(returns: list[float]) -> str:
    std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
    return f"deterministic evaluation: {statistics.fmean(returns):.1f} +- {std:.1f} over {len(returns)} episodes"


if __name__ == "__main__":
    sys.exit(main())
