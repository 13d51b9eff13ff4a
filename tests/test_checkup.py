"""`ppo-td doctor`: every preset audits clean; a user's buggy loss is caught."""

import dataclasses
import sys
from pathlib import Path

import pytest

from ppo_td.cli import main
from ppo_td.doctor import checkup
from ppo_td.presets import MUJOCO_PRESETS, PRESETS, SIMULATOR_PRESETS
from ppo_td.training import build_pipeline

sys.path.insert(0, str(Path(__file__).parent))  # makes doctor_plugins importable as module:function


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in (*MUJOCO_PRESETS, *SIMULATOR_PRESETS)
                                  else n for n in sorted(PRESETS)])
def test_every_preset_audits_clean(name):
    config = PRESETS[name]
    if name in SIMULATOR_PRESETS:  # 4,096 copies of a JAX simulator: its wiring at 64 (Brax compiles on the CPU)
        pytest.importorskip("brax")
        config = dataclasses.replace(config, env=dataclasses.replace(config.env, num_envs=64),
                                     frames_per_batch=64 * 24)
    if config.frames_per_batch > 4096 and not config.env.multiagent:  # its wiring, not its batch (BipedalWalker's
        # 65,536 frames take minutes): 4,096 frames in minibatches of the preset's size
        frames = 4096 // config.env.num_envs * config.env.num_envs
        config = dataclasses.replace(config, frames_per_batch=frames, optim=dataclasses.replace(
            config.optim, num_minibatches=max(1, frames // config.minibatch_size)))
    audit = checkup(build_pipeline(config))
    assert audit.ok, audit.report()
    assert "no findings" in audit.report()


def test_cli_doctor_exit_codes(capsys):
    assert main(["doctor", "--preset", "cleanrl", "--loss", "doctor_plugins:correct_loss"]) == 0
    assert "no findings" in capsys.readouterr().out
    assert main(["doctor", "--preset", "cleanrl", "--loss", "doctor_plugins:buggy_loss"]) == 1
    out = capsys.readouterr().out
    assert "[2] the policy loss puts gradient on value-network parameters" in out and "critic.head.0.weight" in out


def test_cli_doctor_bad_plugin_spec(capsys):
    assert main(["doctor", "--loss", "no_colon_here"]) == 2
    assert "module:function" in capsys.readouterr().err


def test_cli_doctor_refuses_a_factory_that_returns_nothing_or_the_wrong_thing(capsys):
    assert main(["doctor", "--preset", "cleanrl", "--critic", "doctor_plugins:returns_none"]) == 2
    assert "doctor_plugins:returns_none returned None; it must return a TensorDict module" in capsys.readouterr().err
    assert main(["doctor", "--preset", "cleanrl", "--actor", "doctor_plugins:returns_a_linear"]) == 2
    assert "actor=Linear is not a TensorDict module" in capsys.readouterr().err
