"""`ppo-td train` writes a complete run folder; `ppo-td eval` reads it back."""

import csv
import json

from ppo_td.cli import main
from ppo_td.persist import load_checkpoint


def test_train_writes_run_folder_and_eval_reads_it(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "--preset", "cleanrl", "--total-frames", "1024", "--model.hidden-sizes", "16", "16",
                 "--run-dir", str(run), "--no-progress", "--eval-episodes", "2", "--tensorboard"])
    assert code == 0
    out = capsys.readouterr().out
    assert "deterministic evaluation:" in out and "over 2 episodes" in out
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
    assert "over 3 episodes" in capsys.readouterr().out


def test_help_lists_commands(capsys):
    assert main([]) == 0
    assert "train" in capsys.readouterr().out
    assert main(["bogus"]) == 2
