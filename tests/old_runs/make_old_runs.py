"""Write the run folders of ``tests/test_old_runs.py``: one small run per kind of env, trained by the ppo_td of the
commit this is run at and stopped after its first iteration (as Ctrl-C leaves it), with what that ppo_td's
evaluation, policy and ``--resume`` gave on it (``expected.json``).

    python tests/old_runs/make_old_runs.py     # from the repository root; about a minute, one thread

The folders are committed, so a later ppo_td is checked against checkpoints an earlier one wrote (issue 46: the
env layer rebuilt, every kind's checkpoints from before still load). Atari and EnvPool are left out: their Nature
CNN makes a checkpoint of tens of MB, and their env stack has no state a checkpoint keeps (no normalizer).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # tests/user_transforms.py, as the tests import it

from ppo_td import ModelConfig, OptimConfig, get_preset, train  # noqa: E402
from ppo_td.config import EnvConfig  # noqa: E402

SMALL = ModelConfig(hidden_sizes=(16,))
ONE_EPOCH = OptimConfig(update_epochs=1, num_minibatches=2)


def _small(name: str, **changes) -> object:
    """Preset ``name`` with ``changes``, for two batches (the run is stopped after the first)."""
    config = dataclasses.replace(get_preset(name), eval_episodes=2, **changes)
    return dataclasses.replace(config, total_frames=2 * config.frames_per_batch)


def kinds() -> dict[str, object]:
    """Each kind of env, with the state its checkpoints keep."""
    pendulum = get_preset("pendulum")
    return {
        # Gymnasium's numpy-vectorized CartPole
        "cartpole-numpy": _small("cartpole"),
        # a Gymnasium id with both normalizers (RunningObsNorm and ReturnScaling keep statistics)
        "pendulum-normalized": _small("pendulum", model=SMALL),
        # the user's stateful transform before the normalizer (the user-transform order of layers)
        "pendulum-user-transform": _small("pendulum", model=SMALL, env=dataclasses.replace(
            pendulum.env, transforms=("user_transforms:CountingShift shift=0.1",))),
        # a factory (module:function), recurrent
        "factory-recurrent": _small("cartpole-novel"),
        # a TorchRL env class, observations read from its entries
        "torchrl-class": dataclasses.replace(
            get_preset("generic"), env=EnvConfig(env_id="torchrl.envs.custom.pendulum:PendulumEnv", num_envs=2,
                                                 max_episode_steps=50),
            model=SMALL, optim=ONE_EPOCH, frames_per_batch=256, total_frames=512, eval_episodes=2),
        # an action mask in the observation (the masks layer)
        "masked": _small("trading", model=SMALL),
        # a MinAtar id (registered when read), flat encoder to keep the checkpoint small
        "minatar": _small("minatar", model=dataclasses.replace(SMALL, encoder="flat"), optim=ONE_EPOCH),
        # VMAS and PettingZoo (agent groups)
        "vmas": _small("vmas-navigation", model=dataclasses.replace(get_preset("vmas-navigation").model,
                                                                          hidden_sizes=(16,)), optim=ONE_EPOCH),
        "pettingzoo": _small("mpe-spread", optim=ONE_EPOCH,
                             model=dataclasses.replace(get_preset("mpe-spread").model, hidden_sizes=(16,))),
    }


def expected(run: Path, actions: bool) -> dict[str, object]:
    """What this ppo_td gives on ``run``: 3 deterministic evaluation episodes (seed 0), and for one-agent Gymnasium
    envs (``actions``) the policy's actions on 3 observations of a fresh env (seed 0)."""
    from ppo_td.deploy import load_policy
    from ppo_td.envs import gym_env
    from ppo_td.persist import load_for_evaluation
    from ppo_td.training import evaluate

    config, actor, obs_stats, transform_states = load_for_evaluation(run)
    ev = evaluate(actor, config.env, 3, seed=0, obs_stats=obs_stats, max_steps=config.eval_max_steps,
                  transform_states=transform_states)
    out: dict[str, object] = {"returns": ev.returns, "groups": ev.groups}
    if actions:
        policy = load_policy(run)
        env = gym_env(config.env)
        obs, _ = env.reset(seed=0)
        taken = []
        for _ in range(3):
            action = policy(obs)
            taken.append(action.tolist() if hasattr(action, "tolist") else action)
            obs, *_ = env.step(action)
        env.close()
        out["actions"] = taken
    return out


TIMING = {"time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds"}


def stop_after_first(metrics: dict, pipeline: object) -> None:
    """Ends the run after its first iteration, as Ctrl-C would: the folder is left to resume."""
    from ppo_td.training.loop import StopTraining

    if metrics["iteration"] == 1:
        raise StopTraining


def metrics_rows(run: Path) -> list[dict[str, str]]:
    """``metrics.csv`` without its timing columns (what an exact resume reproduces)."""
    with (run / "metrics.csv").open() as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def main() -> None:
    from ppo_td.cli import main as cli

    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    records = {}
    for name, config in kinds().items():
        run = HERE / name
        shutil.rmtree(run, ignore_errors=True)
        train(config, run_dir=str(run), callbacks=[stop_after_first])
        (run / "learning_curve.png").unlink(missing_ok=True)
        records[name] = expected(run, actions=not config.env.multiagent and name != "torchrl-class")
        with tempfile.TemporaryDirectory() as folder:  # what resuming it gave, on a copy
            copy = Path(folder) / name
            shutil.copytree(run, copy)
            assert cli(["train", "--resume", str(copy), "--no-progress"]) == 0
            records[name]["resumed"] = metrics_rows(copy)
        print(f"{name}: {records[name]}", flush=True)
    (HERE / "expected.json").write_text(json.dumps({"commit": commit, "runs": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()
