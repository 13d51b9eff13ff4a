"""ppo_td beside rsl_rl (``rsl-rl-lib``) on the same batched simulator, at rsl_rl's settings: frames/s and return
against seconds (issue 62).

    python -m benchmarks rsl_rl                                        # here: Brax ant, 256 envs, 20 iterations
    python -m benchmarks rsl_rl --num-envs 4096 --iterations 300 --device cuda    # one GPU (jax[cuda12])

Both train Isaac Lab's ANYmal-C flat config for rsl_rl (the ``rsl-rl-flat`` preset: 24 steps a copy, 5 epochs of 4
minibatches, lr 1e-3 adapted to a KL of 0.01, ELU [128, 128, 128], value coefficient 1, entropy 0.005, gradients clipped
at 1) on the Brax env ``ppo_td.envs.simulators:brax_batch`` makes (``BraxBatch``; ``--simulator brax``: TorchRL's
``BraxEnv``, which runs stored without the field stepped) with ``--num-envs`` copies, episodes cut at 1,000 steps.
rsl_rl steps it through a ``VecEnv`` adapter written here (TorchRL's ``step_and_maybe_reset`` under a ``StepCounter``
for the cut; time-outs in ``extras["time_outs"]``, which rsl_rl bootstraps), ppo_td through its own env loop. Each run
is its own process, one torch thread, the libraries alternating seed by seed; each run's episodes (frames, seconds,
return) are written to ``STORE/runs.jsonl`` as it finishes (a rerun skips finished ones).

``env`` is the floor: the env stepped alone with random actions, 24 steps an iteration. Prints per library: frames/s
after the first iteration (which pays JAX's compilation), the mean return of the last
100 episodes, and the seconds until the mean of 20 episodes first reached the target (90% of the lower of the two
libraries' median last-100 return, less a tenth of its size where it is negative).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def ppo_td_config(spec: dict[str, Any]) -> Any:
    """ppo_td's config for ``spec``: the rsl-rl-flat preset on the spec's env, batch and seed."""
    import ppo_td

    n = spec["num_envs"]
    base = ppo_td.get_preset("rsl-rl-flat")
    if spec.get("lr_schedule", "adaptive") == "fixed":  # rsl_rl's schedule 'fixed': the lr stays 1e-3
        base = dataclasses.replace(base, optim=dataclasses.replace(base.optim, desired_kl=None))
    config = dataclasses.replace(
        base, seed=spec["seed"], device=spec["device"], eval_episodes=0, frames_per_batch=24 * n,
        total_frames=spec["iterations"] * 24 * n,
        env=dataclasses.replace(base.env, env_id=f"ppo_td.envs.simulators:{spec['simulator']}", num_envs=n,
                                kwargs=(f"env_name={spec['env']!r}",
                                                              f"device={spec['device']!r}")))
    return config


def config_digest(spec: dict[str, Any]) -> str:
    """What identifies ppo_td's config of ``spec`` in the store (a stored ppo_td run is reused only where it trained
    this config: the preset changes with the library), as the returns store digests its runs' configs."""
    from benchmarks.returns.suites import config_digest as digest

    return digest(ppo_td_config(spec))


def ppo_td_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One ppo_td run of ``spec``: its episodes and iteration times."""
    import ppo_td

    config = ppo_td_config(spec)
    episodes: list[tuple[int, float, float]] = []
    ticks: list[tuple[int, float]] = []
    lrs: list[float] = []

    def record(metrics: dict[str, Any], _: Any) -> None:
        now = float(metrics["time"])  # seconds since training started (the env built, as rsl_rl's clock starts)
        ticks.append((int(metrics["frames"]), now))
        lrs.append(float(metrics["lr"]))  # where the iteration's update left the (KL-adaptive) rate
        episodes.extend((int(e["frames"]), now, float(e["return"])) for e in metrics["ended_episodes"])

    ppo_td.train(config, callbacks=[record], progress=False, threads=1)
    return {"episodes": episodes, "ticks": ticks, "lrs": lrs}


def rsl_rl_run(spec: dict[str, Any]) -> dict[str, Any]:
    """One rsl_rl run of ``spec`` (OnPolicyRunner, PPO) on the same env through :class:`TorchRLVecEnv`."""
    import torch
    from rsl_rl.runners import OnPolicyRunner
    from torchrl.envs import StepCounter, TransformedEnv

    from ppo_td.envs import simulators

    torch.manual_seed(spec["seed"])
    made = getattr(simulators, spec["simulator"])(spec["env"], num_envs=spec["num_envs"], device=spec["device"])
    env = TransformedEnv(made, StepCounter(max_steps=1000))
    env.set_seed(spec["seed"])
    vec = TorchRLVecEnv(env)
    hidden = [128, 128, 128]
    variant = spec.get("rsl_variant", "default")  # ppo_td's two known differences, together or alone
    log_std, per_minibatch = variant in ("ppo_td-like", "log-std"), variant in ("ppo_td-like", "minibatch-advantages")
    cfg = {"num_steps_per_env": 24, "save_interval": 10**9, "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
           "algorithm": {"class_name": "PPO", "value_loss_coef": 1.0, "use_clipped_value_loss": True,
                         "clip_param": 0.2, "entropy_coef": 0.005, "num_learning_epochs": 5, "num_mini_batches": 4,
                         "learning_rate": 1e-3, "schedule": spec.get("lr_schedule", "adaptive"), "gamma": 0.99,
                         "lam": 0.95,
                         "desired_kl": 0.01, "max_grad_norm": 1.0,
                         **({"normalize_advantage_per_mini_batch": True} if per_minibatch else {})},
           "actor": {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu", "obs_normalization": False,
                     "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0,
                                          **({"std_type": "log"} if log_std else {})}},
           "critic": {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu",
                      "obs_normalization": False}}
    runner = OnPolicyRunner(vec, cfg, log_dir=None, device=spec["device"])
    vec.start = time.perf_counter()
    lrs = []
    for _ in range(spec["iterations"]):  # one iteration a call: the time of each, as ppo_td's callbacks give them
        runner.learn(1)
        vec.ticks.append((vec.frames, time.perf_counter() - vec.start))
        lrs.append(float(runner.alg.learning_rate))
    env.close()
    return {"episodes": vec.episodes, "ticks": vec.ticks, "lrs": lrs}


def env_run(spec: dict[str, Any]) -> dict[str, Any]:
    """The floor: the same env stepped alone with uniform random actions in [-1, 1], 24 steps an iteration."""
    import torch
    from torchrl.envs import StepCounter, TransformedEnv

    from ppo_td.envs import simulators

    torch.manual_seed(spec["seed"])
    made = getattr(simulators, spec["simulator"])(spec["env"], num_envs=spec["num_envs"], device=spec["device"])
    env = TransformedEnv(made, StepCounter(max_steps=1000))
    env.set_seed(spec["seed"])
    td, ticks, frames = env.reset(), [], 0
    start = time.perf_counter()
    for _ in range(spec["iterations"]):
        for _ in range(24):
            td["action"] = torch.rand(env.action_spec.shape) * 2 - 1
            _, td = env.step_and_maybe_reset(td)
            frames += spec["num_envs"]
        ticks.append((frames, time.perf_counter() - start))
    env.close()
    return {"episodes": [], "ticks": ticks}


def _vec_env_class() -> type:
    from rsl_rl.env import VecEnv

    class _TorchRLVecEnv(VecEnv):
        """rsl_rl's ``VecEnv`` over a one-batch-dimension TorchRL env with Box actions in [-1, 1]: the env's own
        ``step_and_maybe_reset`` (done copies come back reset, as Isaac Lab's do), its observation as the ``policy``
        group, truncations as ``time_outs``; each ended episode's return recorded with the frames and seconds."""

        def __init__(self, env: Any) -> None:
            import torch

            self.env, self.num_envs = env, int(env.batch_size[0])
            self.num_actions = int(env.action_spec.shape[-1])
            self.max_episode_length, self.device, self.cfg = 1000, env.device or "cpu", {}
            self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long)
            self.td = env.reset()
            self.returns = torch.zeros(self.num_envs)
            self.frames, self.start = 0, time.perf_counter()
            self.episodes: list[tuple[int, float, float]] = []
            self.ticks: list[tuple[int, float]] = []

        def get_observations(self) -> Any:
            from tensordict import TensorDict

            return TensorDict({"policy": self.td["observation"]}, batch_size=[self.num_envs])

        def step(self, actions: Any) -> tuple[Any, Any, Any, dict]:
            self.td["action"] = actions.clamp(-1.0, 1.0)  # as ppo_td clips for the env (env.clip_actions)
            out, self.td = self.env.step_and_maybe_reset(self.td)
            reward = out["next", "reward"].reshape(-1)
            done = out["next", "done"].reshape(-1)
            time_outs = out["next", "truncated"].reshape(-1) & ~out["next", "terminated"].reshape(-1)
            self.frames += self.num_envs
            self.returns += reward
            now = time.perf_counter() - self.start
            for i in done.nonzero().flatten().tolist():
                self.episodes.append((self.frames, now, float(self.returns[i])))
            self.returns[done] = 0.0
            self.episode_length_buf = self.td["step_count"].reshape(-1)
            return self.get_observations(), reward, done.long(), {"time_outs": time_outs.long()}

    return _TorchRLVecEnv


def TorchRLVecEnv(env: Any) -> Any:  # noqa: N802 - builds the class once rsl_rl is imported
    return _vec_env_class()(env)


def child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    import torch

    torch.set_num_threads(1)
    run = {"ppo_td": ppo_td_run, "rsl_rl": rsl_rl_run, "env": env_run}[spec["library"]](spec)
    Path(spec["out"]).write_text(json.dumps({**spec, **run}))


def launch(spec: dict[str, Any], folder: Path) -> dict[str, Any]:
    out = folder / f"{spec['library']}_{spec['seed']}.json"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchmarks.returns.rsl_rl_side", "child",
                    json.dumps({**spec, "out": str(out)})], check=True, timeout=6 * 3600)
    run = json.loads(out.read_text())
    run["wall_seconds"] = time.perf_counter() - started
    return run


def summary(run: dict[str, Any]) -> dict[str, float]:
    ticks = run["ticks"]
    frames = ticks[-1][0] - ticks[0][0]
    seconds = ticks[-1][1] - ticks[0][1]
    last = [e[2] for e in run["episodes"][-100:]]
    tenth = [e[2] for e in run["episodes"] if e[0] > 0.9 * ticks[-1][0]]
    return {"sps": frames / seconds if seconds > 0 else float("nan"),
            "last100": statistics.fmean(last) if last else float("nan"), "seconds": ticks[-1][1],
            "last_tenth": statistics.fmean(tenth) if tenth else float("nan")}


def seconds_to(run: dict[str, Any], target: float, window: int = 20) -> float | None:
    returns = run["episodes"]
    for i in range(window, len(returns) + 1):
        if statistics.fmean(e[2] for e in returns[i - window:i]) >= target:
            return returns[i - 1][1]
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["child"]:
        child(argv[1])
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks rsl_rl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="ant", help="Brax env name (ant)")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rsl-variant", dest="rsl_variant", default="default",
                        choices=["default", "ppo_td-like", "log-std", "minibatch-advantages"],
                        help="rsl_rl as configured (default), or with the two details ppo_td does otherwise: the std "
                             "learned as its log and advantages standardized per minibatch (ppo_td-like), or one "
                             "of them (log-std, minibatch-advantages)")
    parser.add_argument("--lr-schedule", dest="lr_schedule", choices=["adaptive", "fixed"], default="adaptive",
                        help="both libraries: the KL-adaptive learning rate (rsl_rl's, the default) or a fixed 1e-3 "
                             "(rsl_rl's schedule 'fixed'; ppo_td's optim.desired_kl None)")
    parser.add_argument("--simulator", choices=["brax_batch", "brax"], default="brax_batch",
                        help="ppo_td.envs.simulators' factory both libraries step: brax_batch (ppo_td's BraxBatch, the "
                             "simulator's state in JAX, its own reset) or brax (TorchRL's BraxEnv)")
    parser.add_argument("--libraries", nargs="+", choices=["ppo_td", "rsl_rl", "env"],
                        default=["ppo_td", "rsl_rl", "env"], help="env: the env alone with random actions (the floor)")
    parser.add_argument("--store", type=Path, default=Path("rsl_rl_runs"))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    args.store.mkdir(parents=True, exist_ok=True)
    path = args.store / "runs.jsonl"
    done = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    same = ("env", "num_envs", "iterations", "device", "simulator", "rsl_variant", "lr_schedule")
    before = {"simulator": "brax", "rsl_variant": "default", "lr_schedule": "adaptive"}  # before the fields ran

    digests = {seed: config_digest({"seed": seed, **{k: getattr(args, k) for k in same}}) for seed in args.seeds}

    def found(library: str, seed: int) -> dict[str, Any] | None:  # a ppo_td run stored before its digest: not reused
        return next((r for r in done if r["library"] == library and r["seed"] == seed
                     and all(r.get(k, before.get(k)) == getattr(args, k) for k in same)
                     and (library != "ppo_td" or r.get("config_digest") == digests[seed])), None)

    for seed in args.seeds:
        for library in args.libraries:
            if found(library, seed) is None and not args.report_only:
                spec = {"library": library, "seed": seed, **{k: getattr(args, k) for k in same}}
                if library == "ppo_td":
                    spec["config_digest"] = digests[seed]
                run = launch(spec, args.store)
                with path.open("a") as f:
                    f.write(json.dumps(run) + "\n")
                done.append(run)
                s = summary(run)
                print(f"{library} seed {seed}: {s['sps']:,.0f} frames/s, last-100 return {s['last100']:.1f}, "
                      f"{s['seconds']:.0f} s", flush=True)
    runs = {lib: [r for r in (found(lib, s) for s in args.seeds) if r is not None] for lib in args.libraries}
    medians = [statistics.median(summary(r)["last100"] for r in rs) for lib, rs in runs.items() if rs and lib != "env"]
    lower = min(medians) if medians else float("nan")
    target = lower - 0.1 * abs(lower)  # 90% of a positive return; 110% of a negative one
    lines = [f"# ppo_td beside rsl_rl: Brax {args.env} ({args.simulator}), {args.num_envs} envs, {args.iterations} "
             f"iterations, {args.device} ({datetime.date.today().isoformat()})", "",
             f"`python -m benchmarks rsl_rl {' '.join(argv)}`", "",
             f"Target: {target:.1f} (the lower median last-100 return less a tenth of its size).", "",
             "| library | seeds | frames/s after the first iteration (median, range) | last-100 return | "
             "return of the episodes ended in the last tenth of the frames (per seed) | "
             "seconds to the target (median; reached) | run seconds |", "|---|---|---:|---:|---:|---:|---:|"]
    for library, rs in runs.items():
        if not rs:
            continue
        sums = [summary(r) for r in rs]
        tenths = ", ".join(f"{s['last_tenth']:.1f}" for s in sums)
        reached = [t for t in (seconds_to(r, target) for r in rs) if t is not None]
        sps = [s["sps"] for s in sums]
        if library == "env":
            lines.append(f"| the env alone (random actions) | {', '.join(str(r['seed']) for r in rs)} | "
                         f"{statistics.median(sps):,.0f} ({min(sps):,.0f}-{max(sps):,.0f}) | - | - | - | "
                         f"{statistics.median(s['seconds'] for s in sums):.0f} |")
            continue
        lines.append(f"| {library} | {', '.join(str(r['seed']) for r in rs)} | {statistics.median(sps):,.0f} "
                     f"({min(sps):,.0f}-{max(sps):,.0f}) | {statistics.fmean(s['last100'] for s in sums):.1f} +- "
                     f"{statistics.pstdev([s['last100'] for s in sums]):.1f} | "
                     f"{statistics.fmean(s['last_tenth'] for s in sums):.1f} ({tenths}) | "
                     + (f"{statistics.median(reached):.0f} ({len(reached)} of {len(rs)})" if reached
                        else f"never (0 of {len(rs)})")
                     + f" | {statistics.median(s['seconds'] for s in sums):.0f} |")
    text = "\n".join(lines) + "\n"
    variant = ("" if args.rsl_variant == "default" else f"_{args.rsl_variant}") + (
        "" if args.lr_schedule == "adaptive" else f"_{args.lr_schedule}_lr")
    (args.store / f"rsl_rl_{args.simulator}{variant}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
