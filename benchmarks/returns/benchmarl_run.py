"""One BenchMARL run, executed by the Python of BenchMARL's own virtualenv (BenchMARL 1.5.2 needs torchrl < 0.12,
so it cannot share ppo_td's environment). ``python -m benchmarks multiagent`` starts it as
``BENCHMARL_PYTHON benchmarks/returns/benchmarl_run.py JSON`` and reads the one JSON line it prints.

Spec keys: ``algorithm`` ("mappo" | "ippo"), ``seed``, ``max_n_frames``, ``folder`` (where BenchMARL's CSV logger
writes), ``task`` (a VMAS task of BenchMARL's, "navigation" by default, or "simple_tag": two agent groups).
Everything else is BenchMARL's defaults for the task (its YAML files), with one torch thread and no rendering.
With ``"settings_only": true`` it prints the settings it would train with (:func:`settings`, the task's own
included) and stops: the harness compares them with ppo_td's preset before either library trains. It imports
nothing of ppo_td.
"""

from __future__ import annotations

import csv
import json
import resource
import sys
import time
from pathlib import Path


def _scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    """The (step, value) rows of BenchMARL's scalar ``tag``: its CSV logger writes ``scalars/<tag>.csv`` with the
    tag's slashes as underscores (``timers/collection_time`` -> ``timers_collection_time.csv``)."""
    rows = []
    for path in folder.rglob(f"scalars/{tag.replace('/', '_')}.csv"):
        with path.open() as f:
            rows += [(int(float(r[0])), float(r[1])) for r in csv.reader(f) if r and r[0][0].isdigit()]
    return sorted(rows)


def settings(config, algorithm, model) -> dict:
    """The training settings BenchMARL's defaults amount to, in ppo_td's terms. Its training loop takes
    ``on_policy_n_minibatch_iters`` passes over the batch, each of ceil(batch / minibatch size) minibatches
    (experiment.py), so the gradient steps per batch are their product."""
    batch, minibatch = config.on_policy_collected_frames_per_batch, config.on_policy_minibatch_size
    return {"frames_per_batch": batch, "num_envs": config.on_policy_n_envs_per_worker, "minibatch_size": minibatch,
            "gradient_steps_per_batch": config.on_policy_n_minibatch_iters * -(-batch // minibatch),
            "lr": config.lr, "adam_eps": config.adam_eps,
            "max_grad_norm": config.clip_grad_val if config.clip_grad_norm else f"by value at {config.clip_grad_val}",
            "loss_critic_type": algorithm.loss_critic_type,
            "gamma": config.gamma, "gae_lambda": algorithm.lmbda, "clip_epsilon": algorithm.clip_epsilon,
            "entropy_coeff": algorithm.entropy_coef, "critic_coeff": algorithm.critic_coef,
            "hidden_sizes": list(model.num_cells)}


def main() -> None:
    spec = json.loads(sys.argv[1])
    import torch

    torch.set_num_threads(1)
    from benchmarl.algorithms import IppoConfig, MappoConfig
    from benchmarl.environments import VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = spec["max_n_frames"]
    config.loggers = ["csv"]
    config.create_json = False
    config.render = False
    config.save_folder = spec["folder"]
    if 0 < spec["max_n_frames"] < config.evaluation_interval:  # a short run: its last evaluation at its end (BenchMARL
        config.evaluation_interval = spec["max_n_frames"]      # evaluates after iteration 1 and every interval)
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    algorithm = (MappoConfig if spec["algorithm"] == "mappo" else IppoConfig).get_from_yaml()
    task = getattr(VmasTask, spec.get("task", "navigation").upper()).get_from_yaml()
    if spec.get("settings_only"):
        print(json.dumps({**settings(config, algorithm, MlpConfig.get_from_yaml()), "task": dict(task.config)}))
        return
    if any(Path(spec["folder"]).rglob("scalars/*.csv")):  # the timers below read every CSV under the folder
        raise SystemExit(f"{spec['folder']} already holds BenchMARL logs (an earlier run's timers would be summed "
                         "with this one's): give an empty folder")
    experiment = Experiment(task=task, algorithm_config=algorithm,
                            model_config=MlpConfig.get_from_yaml(), critic_model_config=MlpConfig.get_from_yaml(),
                            seed=spec["seed"], config=config)
    start = time.perf_counter()
    experiment.run()
    wall = time.perf_counter() - start
    folder = Path(spec["folder"])
    collection = [v for _, v in _scalars(folder, "timers/collection_time")]
    training = [v for _, v in _scalars(folder, "timers/training_time")]
    groups = {g: [v for _, v in _scalars(folder, f"eval/{g}/reward/episode_reward_mean")]
              for g in experiment.group_map}  # each group's reward per agent, per evaluation
    agents = {g: len(members) for g, members in experiment.group_map.items()}
    rounds = min(len(v) for v in groups.values())
    evals = [sum(agents[g] * groups[g][i] for g in groups) / sum(agents.values()) for i in range(rounds)]
    if not (collection and training and evals):
        raise RuntimeError(f"BenchMARL's CSV logs in {folder} lack the timers or the evaluation rewards")
    print(json.dumps({
        "frames": int(experiment.total_frames),
        "wall_seconds": wall,
        "collect_seconds": sum(collection),
        "update_seconds": sum(training),
        "train_seconds": sum(collection) + sum(training),
        "eval_rewards": evals,  # all agents' reward per agent (each group weighted by its agents)
        "eval_group_rewards": groups,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "spec": spec,
    }))


if __name__ == "__main__":
    main()
