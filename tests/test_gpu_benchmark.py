"""``python -m benchmarks gpu``'s compile runs and pinned-memory moves, checked on this CPU: the table names each mode
and its device; CUDA graphs or pinned memory off a CUDA device, or a preset whose env cannot be made, are refused
before anything runs; the moves are timed and checked with stand-ins for CUDA's pinning."""

import json
import subprocess
import sys

import pytest

from benchmarks.__main__ import main as benchmarks


def test_cuda_graphs_on_the_cpu_or_an_env_not_made_here_are_refused_before_any_run(tmp_path, capsys, monkeypatch):
    for args, says in (
            (["--pinned-presets"], "--compile-modes cudagraphs on --device cpu"),
            (["--pinned-presets", "--compile-preset", "nope"], "--compile-preset nope: unknown preset 'nope'"),
            (["--compile-modes", "cpu"], "--pinned-presets on --device cpu: pinned memory is CUDA's")):
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
                    "--pinned-presets", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert "its env HalfCheetah-v5 cannot be made here (DependencyNotInstalled" in err and "pendulum" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # two one-iteration HalfCheetah runs, each in its own process
def test_compile_modes_run_and_are_tabled(tmp_path):
    pytest.importorskip("mujoco")
    assert benchmarks(["gpu", "--device", "cpu", "--vmas-envs", "--atari-frames", "0", "--compile-frames", "2048",
                       "--compile-modes", "cpu", "eager", "--pinned-presets", "--timeout", "300",
                       "--out", str(tmp_path)]) == 0
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


def test_the_pinned_moves_are_timed_checked_and_tabled(tmp_path):
    """Pendulum's own batch and step, with stand-ins for pinning (a copy) and CUDA's synchronize: every way of moving
    them is timed, each copy is checked against its source (a move that changes what it moves is an error naming
    it), and the table gives each way's saving an iteration against the pageable move."""
    from benchmarks.gpu import pinned
    from ppo_td import get_preset

    preset = get_preset("pendulum")
    batch, step, steps = pinned.collected("pendulum", 1)
    assert batch.batch_size == (preset.env.num_envs, steps) and steps * preset.env.num_envs == preset.frames_per_batch
    assert step.batch_size == (preset.env.num_envs,) and list(step.keys()) == ["observation"]
    ms = pinned.timed_moves(batch, step, "cpu", 2, pin=lambda td: td.clone(), synchronize=lambda: None)
    assert list(ms) == [f"{what}, {way}" for what in ("batch", "step") for way in pinned.MOVES]
    assert all(0 < t["min"] <= t["median"] <= t["max"] for t in ms.values())
    with pytest.raises(RuntimeError, match=r"the batch moved pinned on the way to cpu differs from its source: "):
        pinned.timed_moves(batch, step, "cpu", 1, pin=lambda td: td.clone().apply(lambda t: t + 1),
                           synchronize=lambda: None)
    with pytest.raises(ValueError, match="pinned memory is CUDA's: --device cpu"):
        pinned.measure("pendulum", "cpu", 1, 1)

    def took(*medians):
        return {way: {"median": m, "min": m, "max": m} for way, m in zip(pinned.MOVES, medians, strict=True)}

    row = {"preset": "pendulum", "device": "a GPU", "batch_mb": 0.5, "step_kb": 0.1, "steps": 256,
           "ms": {**{f"batch, {w}": t for w, t in took(1.0, 1.5, 0.75, 0.5).items()},
                  **{f"step, {w}": t for w, t in took(0.05, 0.06, 0.02, 0.01).items()}}}
    pinned.write([row], tmp_path)
    table = (tmp_path / "pinned.md").read_text()
    assert "| pendulum (a GPU) | batch | 0.50 MB | 1.000 (1.000-1.000) |" in table
    assert "| -0.50 on the way, +0.25 through a buffer, +0.50 from pinned |" in table
    assert "| pendulum (a GPU) | step (x256) | 0.1 kB |" in table
    assert "| -2.56 on the way, +7.68 through a buffer, +10.24 from pinned |" in table
    assert json.loads((tmp_path / "pinned.jsonl").read_text()) == row
