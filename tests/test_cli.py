"""`ppo-td train` writes a complete run folder; `ppo-td eval` reads it back."""

import csv
import json
import sys

import pytest

from ppo_td.cli import main
from ppo_td.persist import load_checkpoint


def test_train_writes_run_folder_and_eval_reads_it(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "--preset", "cleanrl", "--total-frames", "1024", "--model.hidden-sizes", "16", "16",
                 "--run-dir", str(run), "--no-progress", "--eval-episodes", "2", "--tensorboard"])
    assert code == 0
    out = capsys.readouterr().out
    assert "deterministic evaluation:" in out and "sampled evaluation:" in out and "over 2 episodes" in out
    summary = json.loads((run / "summary.json").read_text())
    assert len(summary["eval_returns"]) == len(summary["eval_returns_sampled"]) == 2
    names = {p.name for p in run.iterdir()}
    assert {"config.json", "metrics.csv", "learning_curve.png", "checkpoint.pt", "summary.json", "tensorboard"} <= names
    config = json.loads((run / "config.json").read_text())
    assert config["total_frames"] == 1024 and config["model"]["hidden_sizes"] == [16, 16]
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert len(rows) == 2 and rows[-1]["frames"] == "1024"
    assert any((run / "tensorboard").rglob("events.out.tfevents*"))
    assert (run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert load_checkpoint(run)["frames"] == 1024

    assert main(["eval", str(run), "--episodes", "3"]) == 0
    assert "deterministic evaluation:" in (out := capsys.readouterr().out) and "over 3 episodes" in out
    assert main(["eval", str(run), "--episodes", "3", "--sampled"]) == 0
    assert "sampled evaluation:" in capsys.readouterr().out


def test_sampled_evaluation_is_reproducible_leaves_the_rng_and_differs_from_the_mode():
    """An untrained CartPole policy (logits near zero): its mode is one action, pushing the cart one way (short
    episodes); sampled actions keep it up longer. Same seed, same returns; torch's RNG is left as it was."""
    import torch

    from conftest import small_config
    from ppo_td.training import build_pipeline, evaluate

    pipeline = build_pipeline(small_config())
    actor, env = pipeline.actor, pipeline.config.env
    pipeline.collector.shutdown()
    before = torch.get_rng_state()
    first = evaluate(actor, env, 8, seed=3, sampled=True)
    assert torch.equal(torch.get_rng_state(), before)
    assert evaluate(actor, env, 8, seed=3, sampled=True) == first
    assert first != evaluate(actor, env, 8, seed=3)


def test_help_lists_commands(capsys):
    assert main([]) == 0
    assert "train" in capsys.readouterr().out
    assert main(["bogus"]) == 2


def test_output_without_a_terminal_is_summary_lines(tmp_path, capfd):
    """Piped (as here: pytest's stdout and stderr are no terminal) ppo-td train prints one summary line every
    --log-every iterations and at the last, and never a carriage return; --no-progress does the same."""
    args = ["train", "--preset", "cleanrl", "--total-frames", "2560", "--model.hidden-sizes", "8",
            "--eval-episodes", "1"]
    assert main([*args, "--run-dir", str(tmp_path / "a"), "--log-every", "2"]) == 0
    out, err = capfd.readouterr()
    assert "\r" not in out + err
    lines = [line for line in out.splitlines() if line.startswith("iteration ")]
    assert [line.split()[1] for line in lines] == ["2/5", "4/5", "5/5"]
    assert "frames 2,560/2,560" in lines[-1] and " sps " in lines[-1] and "return" in lines[-1]
    assert main([*args, "--run-dir", str(tmp_path / "b"), "--no-progress"]) == 0
    out, err = capfd.readouterr()
    assert "\r" not in out + err
    assert [line.split()[1] for line in out.splitlines() if line.startswith("iteration ")] == [
        "1/5", "2/5", "3/5", "4/5", "5/5"]  # the default: about 20 lines per run, here every iteration


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    from ppo_td.experiment.progress import Progress

    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    assert Progress(100, 10, bar=True, stream=io.StringIO())._bar is not None
    assert Progress(100, 10, bar=False, stream=io.StringIO())._bar is None  # --no-progress
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert Progress(100, 10, bar=True, stream=io.StringIO())._bar is None  # piped


def test_an_env_id_without_a_preset_gets_defaults_made_for_it(tmp_path, capsys):
    """Not CartPole's tuned values: the preset made for the env, else SB3's generic PPO defaults; said, and kept
    in run.json (config.json has the values)."""
    run = tmp_path / "taxi"
    assert main(["train", "--env.env-id", "Taxi-v4", "--total-frames", "2048", "--eval-episodes", "1",
                 "--no-progress", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "defaults: preset 'generic', no preset is made for Taxi-v4" in out
    config = json.loads((run / "config.json").read_text())
    assert (config["frames_per_batch"], config["loss"]["gamma"], config["optim"]["lr"]) == (2048, 0.99, 3e-4)
    assert json.loads((run / "run.json").read_text())["preset"] == "generic"
    assert main(["train", "--env.env-id", "Acrobot-v1", "--total-frames", "4096", "--eval-episodes", "1",
                 "--no-progress", "--run-dir", str(tmp_path / "acrobot")]) == 0
    assert "defaults: preset 'acrobot', the preset made for Acrobot-v1" in capsys.readouterr().out  # RL Zoo's


def test_evaluation_is_printed_with_the_precision_its_spread_needs():
    from ppo_td.experiment.report import format_evaluation
    from ppo_td.training import Evaluation

    # Blackjack-like returns: -0.05 and -0.14 must not both print -0.1
    blackjack = format_evaluation(Evaluation([-1.0, 1.0, 0.0, -1.0, 0.75]))
    assert blackjack.startswith("deterministic evaluation: -0.05 +- 0.")
    assert format_evaluation(Evaluation([-0.14] * 4)).startswith("deterministic evaluation: -0.14 +- 0.00 ")
    assert format_evaluation(Evaluation([500.0] * 3)).startswith("deterministic evaluation: 500.0 +- 0.0 ")
    assert format_evaluation(Evaluation([200.3, 250.1, 180.0])).startswith("deterministic evaluation: 210.1 +- 29.5 ")


def test_a_total_that_is_no_multiple_of_the_batch_is_said_once(tmp_path, capsys):
    assert main(["train", "--preset", "cleanrl", "--env.num-envs", "4", "--frames-per-batch", "64",
                 "--total-frames", "150", "--model.hidden-sizes", "8", "--eval-episodes", "0", "--no-progress",
                 "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("total_frames=150 is not a multiple of frames_per_batch=64: the run trains 2 batches, "
                     "128 frames") == 1


def test_threads_are_chosen_for_the_work_and_can_be_set(tmp_path, capsys):
    import torch

    tiny = ["--preset", "cleanrl", "--env.num-envs", "4", "--frames-per-batch", "64", "--total-frames", "64",
            "--model.hidden-sizes", "8", "--eval-episodes", "0", "--no-progress"]
    try:
        torch.set_num_threads(2)  # torch's default on a 2-core machine
        assert main(["train", *tiny, "--run-dir", str(tmp_path / "auto")]) == 0
        assert json.loads((tmp_path / "auto" / "run.json").read_text())["threads"] == 1  # small networks: one thread
        assert torch.get_num_threads() == 2  # the run's count while it ran, the process's put back (as ppo_td.train)
        assert main(["train", *tiny, "--threads", "2", "--run-dir", str(tmp_path / "two")]) == 0
        assert json.loads((tmp_path / "two" / "run.json").read_text())["threads"] == 2
        assert main(["train", *tiny, "--threads", "0", "--run-dir", str(tmp_path / "zero")]) == 2
        assert "--threads 0: give the number of torch threads (>= 1)" in capsys.readouterr().err
        assert not (tmp_path / "zero").exists()  # refused before anything was written
    finally:
        torch.set_num_threads(1)


def test_a_bad_value_is_refused_before_the_heavy_imports():
    """Validation runs before TorchRL is imported (seconds): the refusal comes at once."""
    import subprocess
    import sys

    code = ("import sys\nfrom ppo_td.cli import main\ntry:\n    main(['train', '--optim.lr', '-1'])\n"
            "except SystemExit as err:\n    print('exit', err.code)\n"
            "print('torchrl imported', 'torchrl' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "exit 2" in done.stdout and "torchrl imported False" in done.stdout, done.stdout + done.stderr
    assert "optim.lr=-1.0 is invalid" in done.stderr


def test_train_help_lists_every_preset(capsys):
    import pytest

    from ppo_td.presets import PRESETS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("│", "")
    assert all(name in text for name in PRESETS), [n for n in PRESETS if n not in text]


def test_a_recurrent_model_on_any_env_gets_sequences_that_fit(tmp_path, capsys):
    assert main(["train", "--preset", "generic", "--model.recurrent", "gru", "--frames-per-batch", "512",
                 "--total-frames", "512", "--model.hidden-sizes", "8", "--eval-episodes", "0", "--no-progress",
                 "--run-dir", str(tmp_path / "fit")]) == 0
    assert ("note: model.recurrent=gru: sequences of optim.sequence_length=32 steps, optim.num_minibatches=16 "
            "(16 sequences per batch of 512 frames") in capsys.readouterr().out
    config = json.loads((tmp_path / "fit" / "config.json").read_text())
    assert config["model"]["recurrent"] == "gru" and config["optim"]["sequence_length"] == 32
    # a choice of the user's is kept, and a misfit refused with the way out
    assert main(["train", "--preset", "generic", "--model.recurrent", "lstm", "--optim.num-minibatches", "32",
                 "--run-dir", str(tmp_path / "misfit")]) == 2
    assert "optim.sequence_length, say 32" in capsys.readouterr().err


def test_an_image_env_without_a_preset_starts_from_pixel_defaults():
    from ppo_td.presets import get_preset, preset_for

    name, why = preset_for("CarRacing-v3")
    assert name == "pixels" and "observes images" in why
    pixels = get_preset("pixels")
    assert (pixels.env.num_envs, pixels.steps_per_env, pixels.optim.update_epochs, pixels.optim.num_minibatches,
            pixels.model.encoder) == (8, 128, 4, 4, "auto")  # the Nature CNN from 36x36, the small one below
    assert preset_for("Taxi-v4")[0] == "generic" and preset_for("MyMissingEnv-v0")[0] == "generic"


def test_a_small_image_env_a_users_module_registers_starts_from_pixel_defaults(tmp_path, capsys):
    from ppo_td.presets import preset_for

    name, why = preset_for("image_envs:PpoTdTest/SmallImage-v0")  # the module imported to read its space
    assert name == "pixels" and "--model.no-scale-images" in why  # uint8: pixels, unless its entries are indices
    assert main(["train", "--env.env-id", "image_envs:PpoTdTest/SmallImage-v0", "--total-frames", "1024",
                 "--eval-episodes", "1", "--no-progress", "--run-dir", str(tmp_path / "run")]) == 0
    assert "preset 'pixels'" in capsys.readouterr().out  # its threads: tests/test_threads.py
    assert json.loads((tmp_path / "run" / "run.json").read_text())["threads"] == 1
    name, why = preset_for("image_envs:PpoTdTest/BoolGrid-v0")
    assert name == "pixels" and "scale" not in why  # bool channels are images too (MinAtar's), never scaled


def test_an_image_env_registered_by_a_module_in_the_current_folder_starts_from_pixel_defaults(
        tmp_path, monkeypatch, capsys):
    """The module is not on sys.path, only in the folder the command runs in (as a user's my_envs.py beside their
    script): the preset is chosen after importing it as the build does (it was 'generic' before, 4x slower)."""
    (tmp_path / "cwd_image_envs.py").write_text(
        "import gymnasium as gym\nfrom image_envs import SmallImage\n"
        "gym.register('PpoTdCwd/SmallImage-v0', entry_point=SmallImage, max_episode_steps=20)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    assert main(["train", "--env.env-id", "cwd_image_envs:PpoTdCwd/SmallImage-v0", "--total-frames", "1024",
                 "--eval-episodes", "1", "--no-progress", "--run-dir", str(tmp_path / "run")]) == 0
    assert "preset 'pixels'" in capsys.readouterr().out


def test_a_minatar_id_registers_its_game_and_starts_from_its_preset(tmp_path, capsys):
    pytest.importorskip("minatar")
    import gymnasium as gym

    from ppo_td.presets import preset_for

    assert preset_for("MinAtar/Breakout-v1") == ("minatar", "MinAtar/Breakout-v1 is a MinAtar game")
    assert main(["train", "--env.env-id", "MinAtar/SpaceInvaders-v1", "--total-frames", "1024", "--frames-per-batch",
                 "1024", "--eval-episodes", "1", "--eval-max-steps", "50", "--no-progress",
                 "--run-dir", str(tmp_path / "run")]) == 0
    assert "preset 'minatar'" in capsys.readouterr().out
    assert "MinAtar/SpaceInvaders-v1" in gym.registry  # registered by the run's build, not by importing ppo_td


def test_a_minigrid_id_without_its_module_starts_from_the_minigrid_preset(tmp_path, capsys):
    """A bare MiniGrid id (no ``minigrid:``) is registered by the run's build (importing ppo_td registers nothing)
    and gets the minigrid preset, RL Zoo's entry: the image and mission flattened, then normalized."""
    pytest.importorskip("minigrid")
    from ppo_td.presets import get_preset, preset_for

    assert preset_for("MiniGrid-DoorKey-5x5-v0")[0] == "minigrid"
    assert get_preset("pixels").model.scale_images is True
    assert main(["train", "--env.env-id", "MiniGrid-Empty-5x5-v0", "--total-frames", "1024", "--eval-episodes", "1",
                 "--no-progress", "--run-dir", str(tmp_path / "run")]) == 0
    assert "preset 'minigrid'" in capsys.readouterr().out
    env = json.loads((tmp_path / "run" / "config.json").read_text())["env"]
    assert env["wrappers"] == ["minigrid.wrappers:FlatObsWrapper"] and env["normalize_observations"]


def test_a_symbolic_image_is_read_as_it_is_with_no_scale_images(tmp_path):
    """The image route for MiniGrid (its 7x7x3 alone, ImgObsWrapper) with --model.no-scale-images: the small CNN
    reads the indices as they are."""
    pytest.importorskip("minigrid")
    from ppo_td import load_policy

    assert main(["train", "--env.env-id", "MiniGrid-Empty-5x5-v0", "--env.wrappers", "minigrid.wrappers:ImgObsWrapper",
                 "--env.no-normalize-observations", "--model.no-scale-images", "--total-frames", "1024",
                 "--eval-episodes", "1", "--no-progress", "--run-dir", str(tmp_path / "run")]) == 0
    trunk = load_policy(tmp_path / "run").policy_net.trunk
    assert type(trunk).__name__ == "SmallCNN" and trunk.input.scale == 1.0
