"""``ppo-td tune``: the base config as ``ppo-td train`` reads it (``--preset``, ``--from-zoo``, ``--config``, every
field flag), the search's own flags, then :func:`ppo_td.tuning.tune` with the run folders ``ppo-td train`` writes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ppo_td.cli.parse import train_command
from ppo_td.experiment.signals import signal_name
from ppo_td.tuning.space import RL_ZOO_RANGES
from ppo_td.tuning.study import PRUNERS, SAMPLERS
from ppo_td.tuning.trial import SCORES

TRAIN_ONLY = ("--resume", "--run-dir", "--overwrite", "--checkpoint-every", "--keep-checkpoints", "--tensorboard",
              "--logger", "--project", "--video-every", "--progress", "--no-progress", "--log-every", "--log-info",
              "--collector", "--ray-address")
"""``ppo-td train`` flags about one run's folder and display, which a study sets for its runs itself."""


def parser() -> argparse.ArgumentParser:
    space = "\n".join(f"  {name}: {text}" for name, text in RL_ZOO_RANGES.items())
    p = argparse.ArgumentParser(
        prog="ppo-td tune", formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        description="Search hyper-parameters with Optuna. Each trial trains its config on --seeds seeds (each run a "
                    "run folder); the top trials are trained again on fresh seeds beside the base config before a "
                    "winner is named. The base config is read as ppo-td train reads it: --preset, --from-zoo, "
                    "--config FILE and every field flag (ppo-td train --help lists them); fields the search space "
                    "does not set stay as it has them. The same command continues a stopped study.",
        epilog=f"default search space (RL Zoo's PPO space, rl_zoo3/hyperparams_opt.py):\n{space}\n\nsamplers:\n"
               + "\n".join(f"  {k}: {v}" for k, v in SAMPLERS.items()) + "\n\npruners:\n"
               + "\n".join(f"  {k}: {v}" for k, v in PRUNERS.items()) + "\n\nscores:\n"
               + "\n".join(f"  {k}: {v}" for k, v in SCORES.items()))
    p.add_argument("--trials", type=int, default=30, help="trials to finish, complete or pruned (default 30)")
    p.add_argument("--seeds", type=int, default=3, help="seeds a trial trains (default 3)")
    p.add_argument("--frames", type=int, default=None, help="frames a run (default: the base config's total_frames)")
    p.add_argument("--score", default="eval", choices=list(SCORES), help="a run's score (default eval)")
    p.add_argument("--envs", nargs="+", default=(), metavar="ENV",
                   help="tune several envs together, scores normalized per env (with --score-range)")
    p.add_argument("--score-range", nargs="+", default=(), metavar="ENV=LOW:HIGH",
                   help="each env's score that maps to 0 and to 1 (e.g. a random policy's and a good one's)")
    p.add_argument("--space", default=None, metavar="MODULE:FUNCTION|FILE",
                   help="your search space: a function (trial, base config) -> {field: value}, or a .json/.toml/"
                        ".yaml file of {field: {low, high[, log, int, step]} | {choices} | value}")
    p.add_argument("--sampler", default="tpe", choices=list(SAMPLERS), help="default tpe")
    p.add_argument("--pruner", default="median", choices=list(PRUNERS), help="default median")
    p.add_argument("--sampler-seed", type=int, default=0, help="the sampler's seed (default 0; workers add theirs)")
    p.add_argument("--workers", type=int, default=1,
                   help="processes running trials, sharing the study (default 1; one per core at most)")
    p.add_argument("--storage", default=None, metavar="URL|FILE.log",
                   help="the study's storage: default a journal file in the study folder; an RDB URL (postgresql://"
                        "...) lets processes on other machines join the study")
    p.add_argument("--study-name", default="ppo_td", help="the study's name in the storage (default ppo_td)")
    p.add_argument("--study-dir", default=None,
                   help="the study folder (default tune/<env>-<hash of what the trials run>)")
    p.add_argument("--confirm", type=int, default=3, help="top trials trained again on fresh seeds (default 3)")
    p.add_argument("--confirm-seeds", type=int, default=5, help="fresh seeds for each (default 5)")
    p.add_argument("--timeout", type=float, default=None, help="seconds after which no new trial starts")
    return p


def _ranges(items: list[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for item in items:
        env, sep, span = item.rpartition("=")
        low, colon, high = span.partition(":")
        try:
            if not (sep and colon and env):
                raise ValueError
            out[env] = (float(low), float(high))
        except ValueError:
            raise ValueError(f"--score-range {item}: give ENV=LOW:HIGH, e.g. CartPole-v1=9:500") from None
    return out


def tune_command(args: list[str], quiet_torchrl: Callable[[], None]) -> int:
    """``ppo-td tune ARGS``: 0 when the study ended (its report written), 130 when Ctrl-C stopped it."""
    if "-h" in args or "--help" in args:
        parser().print_help()
        return 0
    ns, rest = parser().parse_known_args(args)
    given = sorted({a.split("=")[0].replace("_", "-") for a in rest if a.startswith("--")} & set(TRAIN_ONLY))
    if given:
        raise ValueError(f"{', '.join(given)}: a study writes its runs' folders itself (under --study-dir) and shows "
                         "its own progress; drop them (--collector.* fields set where collection runs)")
    own = [f"--{dest.replace('_', '-')}" for dest in vars(ns)]  # (each of tune's flags is named as its dest)
    cmd, _ = train_command(rest, "ppo-td tune", other_flags=own)  # a typo of one of them gets its name too
    quiet_torchrl()
    from ppo_td.experiment import train as train_run
    from ppo_td.tuning import tune

    try:
        tune(cmd.config, train=train_run, folder=ns.study_dir, trials=ns.trials, seeds=ns.seeds,
             frames=ns.frames, score=ns.score, envs=tuple(ns.envs), ranges=_ranges(list(ns.score_range)),
             space=ns.space, sampler=ns.sampler, pruner=ns.pruner, workers=ns.workers, storage=ns.storage,
             study_name=ns.study_name, seed=ns.sampler_seed, confirm=ns.confirm, confirm_seeds=ns.confirm_seeds,
             timeout=ns.timeout, threads=cmd.threads, say=lambda line: print(line, flush=True))
    except KeyboardInterrupt as err:
        print(f"ppo-td tune: {signal_name(err)}: stopped; the same command continues the study (trials stopped "
              "midway run again first; confirmation runs that ended are kept)", file=sys.stderr)
        raise
    return 0
