"""Where each returns-suite run's time goes, beside its two floors (issue 65, item 2).

    python -m benchmarks time_split classic                 # every env of a suite, one process each
    python -m benchmarks time_split classic mujoco --envs Hopper-v5 --frames 50000 --out DIR
    python -m benchmarks time_split mujoco --compile      # the same runs with compile=True

Each env trains as its returns run does (``ppo_td.train`` on the suite's config, one torch thread, the final
evaluation of 10 episodes), for about ``--frames`` frames after one warm-up iteration, with clocks around ppo_td's own
parts: the fast collector's policy sampling, env step and partial resets, GAE, and in the update each minibatch's
forward (the loss terms), backward with gradient clipping, and Adam step (torch's public optimizer step hooks); what
is left of the collection (stores, flags) and of the update (buffer, sampling, metrics) is given as such, and the
loop's own time (the callbacks) is the training time the two halves leave; a forward the lean loss did not time (a
loss mask, a replaced forward) leaves the update undivided. Beside them, the floors
measured on the same machine in the same process: **env**, the same Gymnasium vector env stepped with random
(legal) actions; **update**, the same minibatches through the smallest plain-torch PPO step on the same networks
(``benchmarks.common.floors``), eager or with ``torch.compile``d networks, whichever is faster (compile time not
counted). Every time is in microseconds per frame; ``run / floors`` is the run's training time over the sum of the two
floors. One process per env, one at a time; writes ``DIR/time_split.jsonl`` and ``DIR/time_split.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common.floors import per_call, plain_ppo_minibatch, random_stepper, timed
from benchmarks.returns.suites import EVAL_EPISODES, ROOT, SUITES, Task, config_of

PARTS = ("policy", "env step", "resets", "collection other", "GAE", "forward", "backward + clip", "Adam",
         "update other", "loop")
"""The columns of the run's time, in microseconds per frame."""


class Clocks:
    """A training callback: at its first call (after the warm-up iteration) it puts clocks around the pipeline's
    parts (attributes of ppo_td's own objects; torch's public optimizer hooks), then adds up every iteration's."""

    def __init__(self) -> None:
        self.clock: dict[str, float] = {}
        self.iterations = self.frames = 0
        self.started_time = self.last_time = self.first_iteration = 0.0
        self.ended = 0.0
        self.divided = {"collection": False, "update": False}
        self._forward_end: float | None = None
        self._step_start = 0.0
        self.unpaired = 0
        """Optimizer steps without a timed forward before them (a minibatch the lean loss did not take: a loss mask,
        a replaced forward): the update's split is then not reported."""

    def __call__(self, metrics: dict[str, Any], p: Any) -> None:
        self.ended = time.perf_counter()
        if not self.clock:
            self._install(p)
            self.started_time, self.last_time, self.start_frames = metrics["time"], metrics["time"], metrics["frames"]
            self.first_iteration = metrics["time"]  # (with compile: the compilation's seconds in it)
            return
        self.iterations += 1
        self.frames = metrics["frames"] - self.start_frames
        self.clock["collect"] += metrics["collect_seconds"]
        self.clock["update"] += metrics["update_seconds"]
        self.last_time = metrics["time"]

    def _install(self, p: Any) -> None:
        self.clock = dict.fromkeys(("policy", "env step", "resets", "collect", "GAE", "forward", "backward + clip",
                                    "Adam", "update"), 0.0)
        collector = p.collector
        if hasattr(collector, "fast_policy"):  # ppo_td's FastCollector: its own policy and env objects
            collector.fast_policy.sample = timed(self.clock, "policy", collector.fast_policy.sample)
            collector.fast_env.step = timed(self.clock, "env step", collector.fast_env.step)
            collector.fast_env.reset = timed(self.clock, "resets", collector.fast_env.reset)
            self.divided["collection"] = True
        p.advantage = timed(self.clock, "GAE", p.advantage)  # the Pipeline's field (ppo_td's dataclass)
        lean = getattr(p.loss, "fast", None)
        if lean is not None and not p.compiled:  # ppo_td's lean loss terms, one call a minibatch
            terms = lean.terms

            def forward(td: Any) -> Any:
                start = time.perf_counter()
                try:
                    return terms(td)
                finally:
                    self._forward_end = time.perf_counter()
                    self.clock["forward"] += self._forward_end - start
            lean.terms = forward
            p.optimizer.register_step_pre_hook(self._pre)
            p.optimizer.register_step_post_hook(self._post)
            self.divided["update"] = True

    def _pre(self, *_: Any) -> None:
        self._step_start = time.perf_counter()
        if self._forward_end is None:
            self.unpaired += 1
            return
        self.clock["backward + clip"] += self._step_start - self._forward_end
        self._forward_end = None

    def _post(self, *_: Any) -> None:
        self.clock["Adam"] += time.perf_counter() - self._step_start


def one_env(task: Task, frames: int, seed: int = 1, compile: bool = False) -> dict[str, Any]:
    """Train ``task``'s config for about ``frames`` frames after a warm-up iteration, with :class:`Clocks`; then its
    floors. Microseconds per frame, the warm-up iteration's seconds and the final evaluation's. ``compile``: with
    ``compile=True`` (the loss and the torch policy step through torch.compile; the forward is then not timed apart
    from the backward)."""
    import torch

    from ppo_td.training import train

    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    base = config_of(task)
    iterations = max(3, -(-frames // base.frames_per_batch))
    config = dataclasses.replace(base, seed=seed, eval_episodes=EVAL_EPISODES,
                                 compile=True if compile else base.compile,
                                 total_frames=base.frames_per_batch * (iterations + 1))
    clocks = Clocks()
    train(config, callbacks=[clocks])
    evaluation = time.perf_counter() - clocks.ended
    c, n = clocks.clock, clocks.frames
    us = {k: 1e6 * v / n for k, v in c.items()}
    out = {"policy": us["policy"], "env step": us["env step"], "resets": us["resets"],
           "collection other": us["collect"] - us["policy"] - us["env step"] - us["resets"], "GAE": us["GAE"],
           "forward": us["forward"], "backward + clip": us["backward + clip"], "Adam": us["Adam"],
           "update other": us["update"] - us["GAE"] - us["forward"] - us["backward + clip"] - us["Adam"],
           "loop": 1e6 * (clocks.last_time - clocks.started_time) / n - us["collect"] - us["update"]}
    if not clocks.divided["collection"]:
        out.update({"policy": None, "env step": None, "resets": None, "collection other": us["collect"]})
    if not clocks.divided["update"] or clocks.unpaired:
        out.update({"forward": None, "backward + clip": None, "Adam": None,
                    "update other": us["update"] - us["GAE"]})
    total = 1e6 * (clocks.last_time - clocks.started_time) / n
    floors = _floors(config)
    return {"env": task.env_id, "settings": task.settings, "num_envs": config.env.num_envs,
            "frames_per_batch": config.frames_per_batch, "epochs": config.optim.update_epochs,
            "minibatches": config.optim.num_minibatches, "minibatch_size": config.minibatch_size, "frames": n,
            "frames_per_second": 1e6 / total, "us_per_frame": total, "parts": out, **floors,
            "run_over_floors": total / (floors["env_floor"] + floors["update_floor"])
            if floors["update_floor"] is not None else None,
            "evaluation_seconds": evaluation, "evaluation_episodes": EVAL_EPISODES, "compile": config.compile,
            "first_iteration_seconds": clocks.first_iteration}


def _floors(config: Any) -> dict[str, Any]:
    """The env floor (random actions in a fresh copy of the run's vector env) and the update floor (the plain PPO
    minibatch on fresh networks of the run's shape, eager and compiled), in microseconds per frame."""
    import torch

    from ppo_td import keys
    from ppo_td.training import build_pipeline

    p = build_pipeline(dataclasses.replace(config, eval_episodes=0))
    try:
        vec = p.built.vector
        step = random_stepper(vec, seed=0)
        for _ in range(20):
            step()
        calls = max(200, 20_000 // config.env.num_envs)
        env_floor = 1e6 * per_call(step, calls) / config.env.num_envs
        lean = getattr(p.loss, "fast", None)
        if lean is None:
            return {"env_floor": env_floor, "update_floor": None, "update_floor_eager": None,
                    "update_floor_compiled": None}
        net, value = lean.actor, lean.critic
        # a minibatch of observations the networks read (indices for a Discrete observation, a TensorDict for a
        # Dict one): drawn from the env's observation spec
        rows = p.env.observation_spec_unbatched[keys.OBSERVATION].rand(torch.Size([config.minibatch_size]))
        per_frame = 1e6 * config.optim.update_epochs * config.optim.num_minibatches / config.frames_per_batch
        eager = per_frame * _minibatch_seconds(plain_ppo_minibatch(config, net, value, rows, p.parameters))
        compiled = None
        try:
            step_c = plain_ppo_minibatch(config, torch.compile(net), torch.compile(value), rows, p.parameters)
            compiled = per_frame * _minibatch_seconds(step_c)
        except Exception as err:  # noqa: BLE001 (no compiler here: the eager floor stands, and says why)
            print(f"compiled floor not measured: {type(err).__name__}: {str(err)[:200]}", file=sys.stderr)
        return {"env_floor": env_floor, "update_floor": min(x for x in (eager, compiled) if x is not None),
                "update_floor_eager": eager, "update_floor_compiled": compiled}
    finally:
        p.collector.shutdown()


def _minibatch_seconds(step: Callable[[], None]) -> float:
    for _ in range(5):  # warm-up (a compiled step compiles here)
        step()
    return per_call(step, 300)


def _cell(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}" if abs(x) < 100 else f"{x:,.0f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table: one row per env."""
    lines = ["| env | envs x steps, epochs x minibatches | frames/s | " + " | ".join(PARTS)
             + " | env floor | update floor | run / floors | evaluation s | warm-up s |",
             "|---|---|---:|" + "---:|" * (len(PARTS) + 5)]
    for r in rows:
        shape = (f"{r['num_envs']} x {r['frames_per_batch'] // r['num_envs']}, {r['epochs']} x {r['minibatches']} "
                 f"of {r['minibatch_size']}")
        floor = _cell(r["update_floor"]) + (" (compiled)" if r["update_floor_compiled"] is not None
                                            and r["update_floor"] == r["update_floor_compiled"] else "")
        ratio = "-" if r["run_over_floors"] is None else f"{r['run_over_floors']:.2f}"
        lines.append(f"| {r['env']} | {shape} | {r['frames_per_second']:,.0f} | "
                     + " | ".join(_cell(r["parts"][k]) for k in PARTS)
                     + f" | {_cell(r['env_floor'])} | {floor} | {ratio} | {r['evaluation_seconds']:.1f} | "
                     + (f"{r['first_iteration_seconds']:.1f}" if "first_iteration_seconds" in r else "-")
                     + (" (compiled)" if r.get("compile") else "") + " |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks time_split", description=__doc__.split("\n\n")[0])
    kinds = ", ".join(s for s in SUITES if s != "multiagent")
    parser.add_argument("suites", nargs="+", help=f"returns suites ({kinds})")
    parser.add_argument("--envs", nargs="+", help="only these env ids of the suites")
    parser.add_argument("--frames", type=int, default=50_000, help="frames timed per env after a warm-up (50,000)")
    parser.add_argument("--out", type=Path, default=Path("time_split"))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per env before it is ended (1800)")
    parser.add_argument("--compile", action="store_true",
                        help="train with compile=True (the warm-up iteration's seconds hold the compilation)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # (the child process: one env id, its JSON printed)
    args = parser.parse_args(argv)
    unknown = [s for s in args.suites if s not in SUITES or s == "multiagent"]
    if unknown:
        parser.error(f"no such suite {unknown} here (multi-agent runs have another collector): choose from "
                     f"{', '.join(s for s in SUITES if s != 'multiagent')}")
    tasks = [t for s in args.suites for t in SUITES[s] if args.envs is None or t.env_id in args.envs]
    if args.envs and len({t.env_id for t in tasks}) != len(set(args.envs)):
        parser.error(f"--envs {sorted(set(args.envs) - {t.env_id for t in tasks})}: not in {args.suites}")
    if args.one is not None:
        print(json.dumps(one_env(next(t for t in tasks if t.env_id == args.one), args.frames, compile=args.compile)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], 0
    for task in tasks:
        command = [sys.executable, "-m", "benchmarks", "time_split", *args.suites, "--frames", str(args.frames),
                   *(["--compile"] if args.compile else []), "--one", task.env_id]
        try:
            proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{task.env_id}: over --timeout {args.timeout:.0f} s", file=sys.stderr)
            failed += 1
            continue
        if proc.returncode:
            print(f"{task.env_id} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}", file=sys.stderr)
            failed += 1
            continue
        row = {**json.loads(proc.stdout.strip().splitlines()[-1]),
               "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        rows.append(row)
        with (args.out / "time_split.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{task.env_id}: {row['frames_per_second']:,.0f} frames/s, run / floors "
              f"{row['run_over_floors'] or float('nan'):.2f}", flush=True)
    text = "\n".join([f"# Where the time goes ({dt.date.today().isoformat()}, microseconds per frame)", "",
                      f"`python -m benchmarks time_split {' '.join(argv)}`", "", *table(rows), ""])
    (args.out / "time_split.md").write_text(text)
    print(text)
    return 1 if failed else 0
