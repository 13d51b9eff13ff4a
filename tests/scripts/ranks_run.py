"""Run under torchrun: a short ppo_td.train over the ranks, recording on every rank, at every iteration, a checksum of
the weights and of the normalizers' statistics (tests/test_ranks.py compares the ranks'). ``argv``: the run folder,
the output folder, then what to do: ``train`` (a whole run), ``stop-at N`` (rank 0's callback stops the run after
iteration N, to be resumed), ``resume``, ``die-at N`` (rank 1 kills itself at iteration N), ``hang-at N`` (rank 1
sleeps at iteration N; the script makes the process group itself, with a 5-second timeout), ``slow`` (iterations of
a second: the test sends Ctrl-C), ``workers`` (a whole run, each rank collecting in two worker processes)."""

import dataclasses
import datetime
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import torch

import ppo_td
from ppo_td.config import CollectorConfig, EnvConfig, ModelConfig
from ppo_td.envs import running_moments
from ppo_td.training import StopTraining

torch.set_num_threads(1)


def checksum(tensors) -> str:
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


class Record:
    def __init__(self, out: Path, rank: int, stop_at: int, die_at: int, slow: bool, hang_at: int = 0) -> None:
        self.out, self.rank, self.stop_at, self.die_at, self.slow = out, rank, stop_at, die_at, slow
        self.hang_at = hang_at
        self.rows = []

    def __call__(self, metrics, pipeline) -> None:
        stats = [v for t in running_moments(pipeline.env) for v in t.moments().values()]
        self.rows.append({"iteration": metrics["iteration"], "frames": metrics["frames"],
                          "weights": checksum([*pipeline.actor.parameters(), *pipeline.critic.parameters()]),
                          "statistics": checksum(stats), "episodes": metrics["episodes"]})
        (self.out / f"rank{self.rank}.json").write_text(json.dumps(self.rows))
        if self.die_at and metrics["iteration"] == self.die_at and self.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hang_at and metrics["iteration"] == self.hang_at and self.rank == 1:
            time.sleep(300)
        if self.slow:
            (self.out / "started").touch()
            time.sleep(1.0)
        if self.stop_at and metrics["iteration"] == self.stop_at and self.rank == 0:
            raise StopTraining("the test stops rank 0 here")


def main() -> None:
    run_dir, out, what = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    number = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    rank = int(os.environ["RANK"])
    record = Record(out, rank, number if what == "stop-at" else 0, number if what == "die-at" else 0, what == "slow",
                    number if what == "hang-at" else 0)
    if what == "hang-at":  # the program's own process group: ppo_td keeps it, and its timeout
        torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
    if what == "resume":
        ppo_td.resume(run_dir, callbacks=[record], progress="lines", checkpoint_every=2)
        return
    base = ppo_td.get_preset("cleanrl")
    iterations = 40 if what == "slow" else 6
    config = dataclasses.replace(  # RANKS_DEVICE=cuda: each rank on its GPU (tests/test_ranks.py, with two GPUs)
        base, env=EnvConfig("CartPole-v1", num_envs=4, normalize_observations=True, normalize_rewards=True),
        model=ModelConfig(hidden_sizes=(16, 16)), device=os.environ.get("RANKS_DEVICE", base.device),
        frames_per_batch=128, total_frames=128 * iterations, eval_episodes=2)
    if what == "workers":  # each rank's copies stepped in two worker processes of its own
        config = dataclasses.replace(config, collector=CollectorConfig(backend="process", num_workers=2))
    ppo_td.train(config, run_dir=run_dir, callbacks=[record], progress="lines", log_every=1, checkpoint_every=2)


if __name__ == "__main__":
    main()
