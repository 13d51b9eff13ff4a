"""The run folder: config, metrics CSV, episodes CSV, optional TensorBoard, learning curve."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, to_dict
from ppo_td.training import Pipeline

METRIC_COLUMNS = [
    "iteration", "frames", "time", "sps", "collect_seconds", "collect_sps", "update_seconds", "lr",
    "episodes", "episode_return", "episode_length",
    "loss_policy", "loss_value", "loss_entropy", "entropy", "kl_k1", "kl_k3",
    "clip_fraction", "value_clip_fraction", "explained_variance", "grad_norm", "epochs",
]  # fmt: skip


EPISODE_COLUMNS = ["iteration", "frames", "return", "length"]


class RunLogger:
    """Training callback that writes ``config.json``, ``metrics.csv``, ``episodes.csv`` (and TensorBoard events).

    With ``resume_iteration`` it continues an existing run folder: rows after that
    iteration (written after the checkpoint being resumed) are dropped, new rows appended.

    Example:
        >>> logger = RunLogger("runs/demo", config)
        >>> train(config, callbacks=[logger])
    """

    def __init__(self, run_dir: str | Path, config: TrainConfig, tensorboard: bool = False,
                 resume_iteration: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume_iteration is None:
            (self.run_dir / "config.json").write_text(json.dumps(to_dict(config), indent=2) + "\n")
        self._metrics = _CsvTable(self.run_dir / "metrics.csv", METRIC_COLUMNS, resume_iteration)
        self._episodes = _CsvTable(self.run_dir / "episodes.csv", EPISODE_COLUMNS, resume_iteration)
        self._tb = None
        if tensorboard:
            from torchrl.record.loggers.tensorboard import TensorboardLogger

            try:
                self._tb = TensorboardLogger(exp_name="tensorboard", log_dir=str(self.run_dir))
            except ImportError as err:
                raise ImportError("--tensorboard needs tensorboard: pip install -e '.[tensorboard]'") from err

    def __call__(self, metrics: dict[str, Any], pipeline: Pipeline) -> None:
        self._metrics.write([metrics])
        self._episodes.write(metrics.get("ended_episodes", []))
        if self._tb is not None:
            for name, value in metrics.items():
                if name not in ("iteration", "frames") and isinstance(value, (int, float)) and not math.isnan(value):
                    self._tb.log_scalar(name, float(value), step=int(metrics["frames"]))

    def close(self) -> None:
        self._metrics.close()
        self._episodes.close()


class _CsvTable:
    """An append-only CSV file keyed by iteration, flushed after every write."""

    def __init__(self, path: Path, columns: list[str], keep_through: int | None) -> None:
        kept = []
        if keep_through is not None and path.exists():
            with path.open(newline="") as f:
                kept = [row for row in csv.DictReader(f) if int(row["iteration"]) <= keep_through]
        self._file = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=columns, extrasaction="ignore")
        self._writer.writeheader()
        self.write(kept)

    def write(self, rows: list[dict[str, Any]]) -> None:
        self._writer.writerows(rows)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_episodes(run_dir: str | Path) -> list[dict[str, float]]:
    """Every episode of a run folder (``episodes.csv``), for plots of resumed runs."""
    with (Path(run_dir) / "episodes.csv").open(newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def plot_learning_curve(episodes: list[dict[str, float]], path: str | Path, title: str) -> Path:
    """PNG of episode return against frames (each episode, and a 20-episode moving mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    frames = [e["frames"] for e in episodes]
    returns = [e["return"] for e in episodes]
    ax.plot(frames, returns, ".", alpha=0.3, label="episode return")
    window = 20
    if len(returns) >= window:
        smooth = [sum(returns[i - window:i]) / window for i in range(window, len(returns) + 1)]
        ax.plot(frames[window - 1:], smooth, "-", label=f"mean of last {window}")
    ax.set_xlabel("frames")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
