"""``python -m benchmarks gpu``'s compile runs, checked on this CPU: the table names each mode and its device, and
CUDA graphs off a CUDA device, or a preset whose env cannot be made, are refused before anything runs."""

import json
import subprocess
import sys

import pytest

from benchmarks.__main__ import main as benchmarks


def test_cuda_graphs_on_the_cpu_or_an_env_not_made_here_are_refused_before_any_run(tmp_path, capsys, monkeypatch):
    for args, says in (
            ([], "--compile-modes cudagraphs on --device cpu"),
            (["--compile-preset", "nope"], "--compile-preset nope: unknown preset 'nope'")):
        with pytest.raises(SystemExit) as exit_:
            benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--out", str(tmp_path / "o"),
                        "--compile-preset", "pendulum", *args])
        assert exit_.value.code == 2 and says in capsys.readouterr().err
    import gymnasium as gym

    def no_mujoco(env_id, **kwargs):  # a machine without MuJoCo, as Gymnasium says it
        raise gym.error.DependencyNotInstalled("MuJoCo is not installed, run `pip install \"gymnasium[mujoco]\"`")

    monkeypatch.setattr(gym, "make", no_mujoco)
    with pytest.raises(SystemExit):
        benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--compile-modes", "cpu",
                    "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert "its env HalfCheetah-v5 cannot be made here (DependencyNotInstalled" in err and "pendulum" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # two one-iteration HalfCheetah runs, each in its own process
def test_compile_modes_run_and_are_tabled(tmp_path):
    pytest.importorskip("mujoco")
    assert benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--compile-frames", "2048",
                       "--compile-modes", "cpu", "eager", "--timeout", "300", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "gpu.md").read_text()
    assert "| HalfCheetah-v5, preset halfcheetah | ppo_td cpu | cpu | 2,048 |" in table
    assert "| ppo_td eager | cpu | 2,048 |" in table and (tmp_path / "gpu.png").stat().st_size > 0


def test_the_workers_cudagraphs_reaches_the_config():
    """The cudagraphs mode's worker spec sets config.cudagraphs: on this CPU the run is refused by that field's own
    check, by name."""
    spec = {"library": "ppo_td", "preset": "cleanrl", "seed": 1, "total_frames": 512, "eval_episodes": 0,
            "device": "cpu", "compile": True, "cudagraphs": True}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.common.worker", json.dumps(spec)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode != 0 and "cudagraphs=True on device 'cpu'" in proc.stderr
