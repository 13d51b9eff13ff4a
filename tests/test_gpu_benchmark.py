"""``python -m benchmarks gpu``'s HalfCheetah runs, checked on this CPU: the table names each mode and its device,
and CUDA graphs off a CUDA device are refused before anything runs."""

import json
import subprocess
import sys

import pytest

from benchmarks.__main__ import main as benchmarks


def test_cuda_graphs_on_the_cpu_are_refused_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--mujoco-modes cudagraphs on --device cpu" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # two one-iteration HalfCheetah runs, each in its own process
def test_halfcheetah_modes_run_and_are_tabled(tmp_path):
    pytest.importorskip("mujoco")
    assert benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--mujoco-frames", "2048",
                       "--mujoco-modes", "cpu", "eager", "--timeout", "300", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "gpu.md").read_text()
    assert "| HalfCheetah-v5, 1 env (CleanRL's settings) | ppo_td cpu | cpu | 2,048 |" in table
    assert "| ppo_td eager | cpu | 2,048 |" in table and (tmp_path / "gpu.png").stat().st_size > 0


def test_the_workers_cudagraphs_reaches_the_config():
    """The cudagraphs mode's worker spec sets config.cudagraphs: on this CPU the run is refused by that field's own
    check, by name."""
    spec = {"library": "ppo_td", "preset": "cleanrl", "seed": 1, "total_frames": 512, "eval_episodes": 0,
            "device": "cpu", "compile": True, "cudagraphs": True}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode != 0 and "cudagraphs=True on device 'cpu'" in proc.stderr
