"""ppo_td's benchmarks: ``python -m benchmarks NAME [ARGS]`` runs NAME's module (``python -m benchmarks NAME --help``).

The suites in more words; quick, mujoco, atari, scaling, recurrent, multiagent and doctor share one harness and its
options, ``python -m benchmarks SUITE [--seeds 1 2 3] [--out DIR]`` (``python -m benchmarks quick --help``):
  quick   CartPole time-to-solve (ppo_td default preset vs Stable-Baselines3 with RL-Zoo's tuned
          settings and with the same hyperparameters), throughput at CleanRL's settings, the
          masked trading env.  A few minutes.
  mujoco  HalfCheetah-v5 throughput at the published PPO MuJoCo settings, ppo_td vs SB3
          (``--full`` adds the 1M-frame HalfCheetah-v5 and Hopper-v5 runs: about an hour).
  atari   ALE/Pong-v5 throughput at CleanRL's Atari settings, ppo_td vs SB3's PPO("CnnPolicy") (``.[atari]``).
  scaling frames/s and peak RSS of ppo_td and SB3 for 1, 4, 16, 64 CartPole copies (CleanRL's settings) and
          1, 8 HalfCheetah copies, a table and a plot (``python -m benchmarks scaling_workers`` is the worker-process
          one).
  recurrent  ppo_td's recurrent PPO vs sb3-contrib's RecurrentPPO on CartPole and Pendulum without velocities (the
          cartpole-novel and pendulum-novel presets): frames/s, frames to solve, returns.  About an hour.
  multiagent  ppo_td's MAPPO (and IPPO, ``--algorithms``) vs BenchMARL's on VMAS navigation at BenchMARL's defaults,
          600k frames: frames/s, collection and update time, the per-agent evaluation reward. BenchMARL runs from
          its own virtualenv (``--benchmarl-python``; it needs torchrl < 0.12).  About half an hour per seed;
          ``--frames 60000`` compares throughput in about six minutes a seed. ``--task simple_tag``: two agent
          groups (3 adversaries chase 1 agent; the vmas-tag preset), each group's reward beside the other's.
  latency per-call latency of a trained Policy (and its exported files) on one observation beside SB3's predict
          (``--calls``, ``--rounds``).  A few minutes.
  doctor  the cost of the doctor's audit per update.
  entry_points  the same run from ``ppo-td train``, ``ppo_td.train``, ``build_pipeline`` + ``run`` and a
          ``gym.make_vec`` object, beside a busy process: frames/s and the ratio to the CLI (``--seeds``, ``--busy``).
  returns multi-seed returns of suites of envs (classic, box2d, mujoco, toytext, minigrid, multiagent), ppo_td beside
          SB3 at the same settings, with a result store that a rerun continues and a report with rliable's intervals
          (``python -m benchmarks returns --help``).  Hours: run it with nohup.
  distributed  one run over 1, 2, ... ranks (torchrun): frames/s, the update's seconds and the speed-up per rank
          count on HalfCheetah-v5, and returns on 3 seeds with seconds to a target (``--help``).  About an hour.
  asymmetric  the asymmetric actor-critic on Pendulum with a noisy observation: the critic reading the state against
          reading the actor's observation, 5 seeds paired (``--help``).  About 10 minutes.
  symmetry  symmetry augmentation and the mirror loss (Pendulum; ``--env Walker2d-v5``) against neither, 5 seeds
          paired (``--help``).  About 15 minutes on Pendulum.
  rsl_rl  ppo_td beside rsl_rl (rsl-rl-lib) on Brax ant at rsl_rl's settings: frames/s, return against seconds
          (``--num-envs``, ``--iterations``, ``--device cuda`` on a GPU).  About 10 minutes here.
  games   PPO on a PettingZoo classic game (connect four) against a random player and in self-play, 3 seeds,
          played against a random player and a win-or-block heuristic (``--help``).  About an hour.
  team_selfplay  team self-play against every group learning at once on VMAS simple_tag, 3 seeds, then every
          run's adversaries against every run's agent in the team arena (``--help``).  About an hour.
  soak    RSS over a long CartPole run and its slope after warm-up (``--minutes 5``).
  gpu     VMAS navigation at 4,096 and 32,768 envs (ppo_td beside TorchRL's own MAPPO parts), Atari Pong with 16
          env processes (ppo_td beside SB3's SubprocVecEnv) and HalfCheetah on the CPU and on the GPU eager, compiled
          and as CUDA graphs, on ``--device cuda``: frames/s, collection and update apart, reward against wall time
          (``python -m benchmarks gpu --help``).

Every run is a separate process (benchmarks/common/worker.py), one at a time, with
``torch.set_num_threads(1)``; the libraries alternate seed by seed so machine noise hits
both, and ratios are taken pairwise within a seed. Writes DIR/results.jsonl (one line
per run), DIR/results_SUITE.md (the tables) and DIR/*.png (return vs frames and vs seconds).
Needs the ``bench`` extra (stable-baselines3, sb3-contrib, skrl; skrl is timed where it is installed).

Until 2026-12-06 the single benchmarks ran as ``python -m benchmarks.NAME``; each is now ``python -m benchmarks NAME``
with the same arguments, its module in its kind's folder. Two have a name of their own, a suite having theirs:
``python -m benchmarks.scaling`` is ``python -m benchmarks scaling_workers`` and ``python -m benchmarks.mujoco`` is
``python -m benchmarks mujoco_full``.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Command(NamedTuple):
    """What ``python -m benchmarks NAME`` runs: ``module``'s ``main``, called as ``call`` says (``suite``: with all the
    arguments, the suite's name among them, for the harness's parser; ``argv``: with those after NAME; ``named``: with
    NAME and those after it; ``sys.argv``: with none, ``sys.argv`` set to ``["python -m benchmarks NAME", ...]``)."""

    module: str
    call: str
    line: str


COMMANDS: dict[str, Command] = {
    # speed: throughput and cost
    "quick": Command("benchmarks.speed.suites", "suite",
                     "CartPole time to solve, throughput at CleanRL's settings, action masking; beside SB3"),
    "mujoco": Command("benchmarks.speed.suites", "suite",
                      "HalfCheetah-v5 throughput at the published PPO MuJoCo settings (--full: the 1M-frame runs)"),
    "atari": Command("benchmarks.speed.suites", "suite", "ALE/Pong-v5 throughput at CleanRL's Atari settings"),
    "latency": Command("benchmarks.speed.latency", "sys.argv",
                       "per-call latency of a trained Policy and its exported files beside SB3's predict"),
    "entry_points": Command("benchmarks.speed.entry_points", "sys.argv",
                            "one run from ppo-td train, ppo_td.train, build_pipeline + run and gym.make_vec"),
    "env_paths": Command("benchmarks.speed.env_paths", "argv",
                         "the path a config takes through ppo_td to a built env, and the build's time, per kind"),
    "soak": Command("benchmarks.speed.soak", "sys.argv", "RSS over a long CartPole run and its slope after warm-up"),
    "commits": Command("benchmarks.speed.commits", "argv", "the same benchmark at several commits, interleaved"),
    "compile": Command("benchmarks.speed.compile", "sys.argv", "seconds per update with compile=True against eager"),
    "fast_paths": Command("benchmarks.speed.fast_paths", "sys.argv", "ppo_td's fast paths on vs off, whole runs"),
    "guard_overhead": Command("benchmarks.speed.guard_overhead", "sys.argv",
                              "the cost of the FiniteCheck guard: env steps/s and whole runs"),
    "masking": Command("benchmarks.speed.masking", "sys.argv", "masked vs unmasked PPO on ppo_td's trading env"),
    "mujoco_full": Command("benchmarks.speed.mujoco", "sys.argv",
                           "MuJoCo presets at 1M frames, as CleanRL reports PPO (was python -m benchmarks.mujoco)"),
    "presets": Command("benchmarks.speed.presets", "sys.argv", "the final score of presets over seeds"),
    "profile_steps": Command("benchmarks.speed.profile_steps", "sys.argv",
                             "where one env step and one minibatch go, against their physical limits"),
    "record_check": Command("benchmarks.speed.record_check", "sys.argv",
                            "what checking an env object's record costs (ppo_td.envs.verify)"),
    "spaces": Command("benchmarks.speed.spaces", "sys.argv", "collection frames/s by observation space"),
    "threads": Command("benchmarks.speed.threads", "sys.argv",
                       "seconds per update with N torch threads, optionally beside busy processes"),
    "torchrl_envs": Command("benchmarks.speed.torchrl_envs", "sys.argv",
                            "a TorchRL env trained by ppo_td beside the same env by its Gymnasium id"),
    "envpool_floor": Command("benchmarks.speed.envpool_floor", "argv",
                             "the env floor of ppo_td's Gymnasium vector env beside EnvPool's, rounds alternating"),
    "vectorization": Command("benchmarks.speed.vectorization", "sys.argv",
                             "collection frames/s with the env copies in this process, in processes or envpool"),
    "vmas_resets": Command("benchmarks.speed.vmas_resets", "sys.argv",
                           "what a finished VMAS copy costs: reset_at beside a step and a full reset"),
    # returns: returns over seeds, the learning comparisons
    "returns": Command("benchmarks.returns.run", "argv",
                       "multi-seed returns of suites of envs beside SB3: a result store and a report (hours)"),
    "time_split": Command("benchmarks.returns.time_split", "argv",
                          "where each returns-suite run's time goes, beside the env and update floors"),
    "paired": Command("benchmarks.returns.paired", "argv",
                      "frames/s of ppo_td and SB3 on a returns suite's configs, both running at once, ratio per seed"),
    "published": Command("benchmarks.returns.published", "argv",
                         "every published return recomputed from the result store"),
    "store_history": Command("benchmarks.returns.store_history", "argv",
                             "what each stored run's evaluation started from, read from its commit"),
    "recurrent": Command("benchmarks.returns.recurrent", "suite",
                         "recurrent PPO vs sb3-contrib's RecurrentPPO, CartPole and Pendulum without velocities"),
    "multiagent": Command("benchmarks.returns.multiagent", "suite",
                          "MAPPO and IPPO vs BenchMARL on VMAS at BenchMARL's defaults"),
    "rsl_rl": Command("benchmarks.returns.rsl_rl_side", "argv",
                      "ppo_td beside rsl_rl on Brax ant at rsl_rl's settings"),
    "games": Command("benchmarks.returns.games", "argv",
                     "PPO on a PettingZoo classic game against a random player and in self-play"),
    "team_selfplay": Command("benchmarks.returns.team_selfplay", "argv",
                             "team self-play against every group learning at once, VMAS simple_tag, in the team arena"),
    "asymmetric": Command("benchmarks.returns.robot_parts", "named",
                          "the asymmetric actor-critic against the critic reading the actor's observation, paired"),
    "symmetry": Command("benchmarks.returns.robot_parts", "named",
                        "symmetry augmentation and the mirror loss against neither, paired by seed"),
    # doctor
    "doctor": Command("benchmarks.doctor.suite", "suite", "the cost of the doctor's audit per update, two presets"),
    "doctor_overhead": Command("benchmarks.doctor.overhead", "sys.argv",
                               "the cost of the doctor's audit per update, side by side in one run"),
    "doctor_matrix": Command("benchmarks.doctor.matrix", "sys.argv",
                             "which classic PPO mistakes the doctor finds, in which hand, at which line"),
    "doctor_device": Command("benchmarks.doctor.device", "sys.argv",
                             "the doctor on a GPU: the gallery's TorchRL loop on a device"),
    # scaling
    "scaling": Command("benchmarks.scaling.env_scaling", "suite",
                       "frames/s and peak RSS of ppo_td and SB3 against env copies, a table and a plot"),
    "scaling_workers": Command("benchmarks.scaling.workers", "sys.argv",
                               "collection in-process vs 2 worker processes vs 2 Ray workers "
                               "(was python -m benchmarks.scaling)"),
    "distributed": Command("benchmarks.scaling.distributed", "argv",
                           "one run over 1, 2, ... ranks (torchrun): speed-up per rank count, and returns"),
    # gpu
    "gpu": Command("benchmarks.gpu.run", "argv",
                   "VMAS at 4,096 and 32,768 envs, Atari Pong with 16 env processes, HalfCheetah eager, compiled "
                   "and as CUDA graphs, on --device cuda"),
    # common
    "worker": Command("benchmarks.common.worker", "sys.argv",
                      "one run of a JSON spec, as every suite starts it; prints its result as a JSON line"),
}
"""Every name ``python -m benchmarks`` runs, by kind (the folder of its module), with one line about it."""


def usage() -> str:
    """What ``python -m benchmarks --help`` prints: every name with its line, by kind, then the suites in more words."""
    first, rest = __doc__.split("\n\n", 1)
    lines = [first, "", "Names (python -m benchmarks NAME ..., by kind: the folder under benchmarks/ of its module):"]
    kind = None
    for name, command in COMMANDS.items():
        if command.module.split(".")[1] != kind:
            kind = command.module.split(".")[1]
            lines.append(f"{kind}/")
        lines.append(f"  {name:<16} {command.line}")
    return "\n".join([*lines, "", rest.rstrip()])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark ``argv`` names (``sys.argv[1:]`` by default); its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(usage())
        return 0
    if not argv:
        print(usage(), file=sys.stderr)
        return 2
    if argv[0].startswith("-"):  # options before the suite's name: the harness's parser finds it (or says why not)
        from benchmarks.common.harness import parse

        name = parse(argv).suite
    else:
        name = argv[0]
    if name not in COMMANDS:
        print(f"python -m benchmarks: no benchmark named {name!r} (python -m benchmarks --help lists them)",
              file=sys.stderr)
        return 2
    module, call, _ = COMMANDS[name]
    run = importlib.import_module(module).main
    if call == "suite":
        return run(argv) or 0
    sys.argv = [f"python -m benchmarks {name}", *argv[1:]]
    if call == "argv":
        return run(argv[1:]) or 0
    if call == "named":
        return run(name, argv[1:]) or 0
    return run() or 0


if __name__ == "__main__":
    sys.exit(main())
