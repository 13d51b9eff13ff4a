"""One PPO run over two ranks started by torchrun (gloo, on this machine's CPU): the update equals one process's on
the whole batch, the ranks hold the same weights and statistics at every iteration, a stop anywhere stops all, a
resume on as many ranks is exact and on another count says why, a killed rank ends the run keeping the last
checkpoint, Ctrl-C on the launcher stops every rank with a checkpoint. Each test launches real ranks
(tests/scripts/ranks_oracle.py, tests/scripts/ranks_run.py)."""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import small_config
from ppo_td.config import EnvConfig
from ppo_td.persist import load_checkpoint
from ppo_td.training.ranks import Ranks

SCRIPTS = Path(__file__).parent / "scripts"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
ROUNDING = 1e-6
"""How far an update on two ranks may end from one process's, per weight (weights of magnitude about 1): float32
sums taken in another order (measured: at most 3e-8)."""


def torchrun(*args: str, ranks: int = 2, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    command = [*TORCHRUN, "--standalone", f"--nproc-per-node={ranks}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


def rows(folder: Path, rank: int) -> list[dict]:
    return json.loads((folder / f"rank{rank}.json").read_text())


@pytest.mark.slow
def test_an_update_on_two_ranks_is_one_process_update_on_the_whole_batch(tmp_path):
    done = torchrun(str(SCRIPTS / "ranks_oracle.py"), str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for report in reports:
        for case in report["updates"]:
            assert case["diff"]["actor"] < ROUNDING and case["diff"]["critic"] < ROUNDING, case
            assert case["epochs"][0] == case["epochs"][1], case  # the KL stop decided on the whole batch
            assert case["diff"]["alone"] > 100 * ROUNDING, case  # the control: a half alone is another update
        assert {c["name"]: c["epochs"][0] for c in report["updates"]}["kl stop"] == 1
        for case in (c for c in report["updates"] if c["name"].startswith("kl adaptive")):  # the whole batch's KL
            assert case["lr"][0] == case["lr"][1] != case["lr"][2], case  # moved the rate alike
        # every rank's observations merged: the statistics of all of them (float64 rounding)
        assert max(report["statistics"].values()) < 1e-12, report["statistics"]
    assert [c["weights"] for c in reports[0]["updates"]] == [c["weights"] for c in reports[1]["updates"]]


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    """An uninterrupted 2-rank run (observations and rewards normalized), each rank's checksums per iteration."""
    folder = tmp_path_factory.mktemp("whole")
    done = torchrun(str(SCRIPTS / "ranks_run.py"), str(folder / "run"), str(folder), "train")
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, done


@pytest.mark.slow
def test_ranks_hold_the_same_weights_and_statistics_at_every_iteration(whole_run):
    folder, done = whole_run
    first, second = rows(folder, 0), rows(folder, 1)
    assert len(first) == 6 and first == second
    assert len({r["weights"] for r in first}) == 6  # the weights change, alike
    # rank 0 writes the run folder: every rank's episodes, one line of progress per iteration, one evaluation
    episodes = (folder / "run" / "episodes.csv").read_text().splitlines()[1:]
    assert len(episodes) == sum(r["episodes"] for r in first)
    assert done.stdout.count("iteration 6/6") == 1 and done.stdout.count("deterministic evaluation") == 1
    assert json.loads((folder / "run" / "run.json").read_text())["ranks"] == 2
    state = load_checkpoint(folder / "run" / "checkpoint.pt")
    assert len(state["ranks"]) == 2 and state["frames"] == 6 * 128


@pytest.mark.slow
def test_a_stop_on_one_rank_stops_all_and_the_resume_on_two_ranks_is_exact(whole_run, tmp_path):
    full, _ = whole_run
    stopped = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "stop-at", "3")
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert len(rows(tmp_path, 1)) == 3  # rank 0's callback stopped it; rank 1 stopped at the same iteration
    resumed = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "exactly: the same batches as an uninterrupted run" in resumed.stdout
    assert rows(tmp_path, 0) == rows(tmp_path, 1) == rows(full, 0)[3:]  # bit for bit the uninterrupted run's


@pytest.mark.slow
def test_a_two_rank_checkpoint_resumed_in_one_process_goes_on_saying_why(tmp_path):
    stopped = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "stop-at", "2")
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    one = subprocess.run([sys.executable, str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path),
                          "resume"], capture_output=True, text=True, timeout=300, env={**os.environ, "RANK": "0"})
    assert one.returncode == 0, one.stderr[-3000:]
    assert "checkpointed on 2 ranks and continues on 1" in one.stdout
    assert rows(tmp_path, 0)[-1]["frames"] == 6 * 128
    resumes = json.loads((tmp_path / "run" / "run.json").read_text())["resumes"]
    assert resumes[-1]["exact"] is False and "2 ranks" in resumes[-1]["why"]


def test_a_rank_without_a_gpu_of_its_own_is_refused_naming_the_count():
    assert Ranks(rank=1, world=2, local_rank=1).run_device(torch.device("cpu")) == torch.device("cpu")
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match=r"rank 1 of 2 \(LOCAL_RANK 1\) has no GPU of its own: this machine has "):
            Ranks(rank=1, world=2, local_rank=1).run_device(torch.device("cuda"))
    else:
        assert Ranks(rank=1, world=2, local_rank=1).run_device(torch.device("cuda")) == torch.device("cuda", 1)


@pytest.mark.slow
def test_ranks_collecting_in_worker_processes_hold_the_same_weights(tmp_path):
    done = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "workers")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(tmp_path, 0) == rows(tmp_path, 1) and len(rows(tmp_path, 0)) == 6
    assert len({r["statistics"] for r in rows(tmp_path, 0)}) == 6  # the workers' statistics merged, then the ranks'


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="two GPUs: one a rank (nccl)")
def test_ranks_on_gpus_hold_the_same_weights_at_every_iteration(tmp_path):
    done = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "train",
                    env={**os.environ, "RANKS_DEVICE": "cuda"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(tmp_path, 0) == rows(tmp_path, 1) and len(rows(tmp_path, 0)) == 6


@pytest.mark.slow
def test_a_killed_rank_ends_the_run_within_seconds_and_the_last_checkpoint_stays(tmp_path):
    started = time.monotonic()
    done = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "die-at", "3", timeout=120)
    seconds = time.monotonic() - started
    assert done.returncode != 0
    assert seconds < 60, seconds  # startup included; torchrun stops rank 0, gloo's socket to rank 1 closes
    # rank 0 says it before torchrun's SIGTERM (sent within a fraction of a second) can end it
    assert "rank 0 of 2:" in done.stderr and "another rank stopped" in done.stderr, done.stderr[-3000:]
    assert f"last good checkpoint: {tmp_path / 'run' / 'checkpoint.pt'}" in done.stderr
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")  # iteration 2's (every 2), intact
    assert state["iteration"] == 2 and len(state["ranks"]) == 2


@pytest.mark.slow
def test_a_rank_that_hangs_ends_the_run_at_the_process_groups_timeout(tmp_path):
    started = time.monotonic()
    done = torchrun(str(SCRIPTS / "ranks_run.py"), str(tmp_path / "run"), str(tmp_path), "hang-at", "3", timeout=240)
    seconds = time.monotonic() - started
    # rank 1 sleeps 300 s: rank 0 gives up at the 5-second timeout, torchrun stops rank 1 (SIGKILL 30 s after asking)
    assert done.returncode != 0 and seconds < 120, seconds
    assert "did not answer within the process group's timeout" in done.stderr
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["iteration"] == 2


@pytest.mark.slow
def test_ctrl_c_on_the_launcher_stops_every_rank_with_a_checkpoint(tmp_path):
    launcher = subprocess.Popen([*TORCHRUN, "--standalone", "--nproc-per-node=2", str(SCRIPTS / "ranks_run.py"),
                                 str(tmp_path / "run"), str(tmp_path), "slow"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and launcher.poll() is None, "the ranks never started"
            time.sleep(0.1)
        os.killpg(launcher.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the launcher and both ranks get it
        output, _ = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert output.count("stopped by SIGINT after iteration") == 2, output[-3000:]  # both ranks, at one iteration
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    first, second = rows(tmp_path, 0), rows(tmp_path, 1)
    assert state["iteration"] == len(first) == len(second) and len(state["ranks"]) == 2
    assert first == second


@pytest.mark.slow
def test_the_command_line_trains_over_ranks_into_one_run_folder(tmp_path):
    done = torchrun("-m", "ppo_td.cli", "train", "--preset", "cartpole", "--total-frames", "2048", "--eval-episodes",
                    "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    folders = list((tmp_path / "runs").iterdir())
    assert len(folders) == 1, folders  # rank 0 names it (the time in a default name is rank 0's)
    assert json.loads((folders[0] / "run.json").read_text())["ranks"] == 2
    assert done.stdout.count("trained 2048 frames") == 1


@pytest.mark.slow
def test_two_nodes_on_this_machine_meet_through_the_c10d_rendezvous(tmp_path):
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    node = [*TORCHRUN, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=ppo-td-test", str(SCRIPTS / "ranks_run.py"),
            str(tmp_path / "run"), str(tmp_path), "train"]
    agents = [subprocess.Popen(node, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        outputs = [agent.communicate(timeout=300)[0] for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
    assert [a.returncode for a in agents] == [0, 0], outputs
    assert rows(tmp_path, 0) == rows(tmp_path, 1) and len(rows(tmp_path, 0)) == 6


def test_a_run_that_does_not_divide_over_the_ranks_is_refused_naming_the_fix():
    config = small_config(env=EnvConfig("CartPole-v1", num_envs=6), frames_per_batch=96)
    with pytest.raises(ValueError, match=r"env.num_envs=6 does not divide over 4 ranks.*multiple of 4"):
        Ranks(rank=0, world=4).local_config(config)
    with pytest.raises(ValueError, match=r"each rank runs env.num_envs=2 and frames_per_batch=48"):
        Ranks(rank=1, world=2).local_config(small_config(env=EnvConfig("CartPole-v1", num_envs=4),
                                                         frames_per_batch=96, optim=dataclasses.replace(
                                                             small_config().optim, num_minibatches=32)))


def test_what_does_not_run_over_ranks_yet_is_refused_in_one_line():
    from ppo_td.training import build_pipeline

    with pytest.raises(ValueError, match=r"compile=True on 2 ranks: .* set compile=False"):
        build_pipeline(small_config(compile=True), ranks=Ranks(rank=0, world=2))
    with pytest.raises(ValueError, match=r"multi-agent runs do not run over ranks yet; run one process"):
        build_pipeline(dataclasses.replace(small_config(), env=EnvConfig("simple_spread_v3", suite="pettingzoo",
                                                                         num_envs=2)), ranks=Ranks(rank=0, world=2))


def test_a_normalizer_the_ranks_cannot_merge_is_refused_naming_ppo_tds():
    from torchrl.envs import VecNormV2

    from ppo_td.training import build_pipeline

    with pytest.raises(ValueError, match=r"VecNormV2, whose running statistics each of the 2 ranks would keep apart"):
        build_pipeline(small_config(), transforms=[VecNormV2(in_keys=["observation"])],
                       ranks=Ranks(rank=0, world=2))


def test_each_rank_steps_its_own_share_of_the_copies():
    config = small_config(env=EnvConfig("CartPole-v1", num_envs=8), frames_per_batch=128, total_frames=1000, seed=5)
    shares = [Ranks(rank=r, world=2).local_config(config) for r in (0, 1)]
    assert [s.env.num_envs for s in shares] == [4, 4] and [s.frames_per_batch for s in shares] == [64, 64]
    assert [s.seed for s in shares] == [5, 9]  # copies seeded 5..8 and 9..12: one process's 5..12
    assert [s.num_iterations for s in shares] == [config.num_iterations] * 2
    assert torch.distributed.is_available()
