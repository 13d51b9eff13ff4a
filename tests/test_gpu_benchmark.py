"""``python -m benchmarks gpu``'s HalfCheetah runs, checked on this CPU: the table names each mode and its device,
and CUDA graphs off a CUDA device are refused before anything runs."""

import pytest

from benchmarks.__main__ import main as benchmarks

pytest.importorskip("mujoco")


def test_cuda_graphs_on_the_cpu_are_refused_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "--mujoco-modes cudagraphs on --device cpu" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # two one-iteration HalfCheetah runs, each in its own process
def test_halfcheetah_modes_run_and_are_tabled(tmp_path):
    assert benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--mujoco-frames", "2048",
                       "--mujoco-modes", "cpu", "eager", "--timeout", "300", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "gpu.md").read_text()
    assert "| HalfCheetah-v5, 1 env (CleanRL's settings) | ppo_td cpu | cpu | 2,048 |" in table
    assert "| ppo_td eager | cpu | 2,048 |" in table and (tmp_path / "gpu.png").stat().st_size > 0
