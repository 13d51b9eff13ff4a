"""The run folder: config, metrics CSV, episodes CSV, optional TensorBoard, learning curve."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, to_dict
from ppo_td.persist.loggers import close_loggers, log_config, log_final, log_metrics, number
from ppo_td.persist.runfolder import write_atomically
from ppo_td.training import Pipeline

METRIC_COLUMNS = [
    "iteration", "frames", "time", "sps", "collect_seconds", "collect_sps", "update_seconds", "advantage_seconds",
    "lr", "episodes", "episode_return", "episode_length",
    "loss_policy", "loss_value", "loss_entropy", "entropy", "kl_k1", "kl_k3",
    "clip_fraction", "value_clip_fraction", "explained_variance", "grad_norm", "epochs",
]  # fmt: skip


EPISODE_COLUMNS = ["iteration", "frames", "return", "length"]

GROUP_METRICS = ["episode_return", "explained_variance", "loss_policy", "loss_value", "entropy", "kl_k3",
                 "clip_fraction"]
"""What ``metrics.csv`` holds of each agent group of an env with several, as ``NAME/GROUP`` columns."""


class RunLogger:
    """Training callback that writes ``config.json``, ``metrics.csv``, ``episodes.csv`` (and TensorBoard events).

    With ``resume_iteration`` it continues an existing run folder: rows after that
    iteration (written after the checkpoint being resumed) are dropped, new rows appended.

    Example:
        >>> logger = RunLogger("runs/demo", config)
        >>> train(config, callbacks=[logger])
    """

    def __init__(self, run_dir: str | Path, config: TrainConfig, tensorboard: bool = False,
                 resume_iteration: int | None = None, groups: Sequence[str] = (), loggers: Sequence[Any] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume_iteration is None:
            write_atomically(self.run_dir / "config.json", json.dumps(to_dict(config), indent=2) + "\n")
        # several agent groups (Pipeline.groups): each group's metrics and episode returns in columns of their own
        info = list(config.env.info_keys)  # the env's info values (env.info_keys), per episode and their mean
        metric_columns = [*METRIC_COLUMNS, *(f"{name}/{g}" for g in groups for name in GROUP_METRICS), *info]
        episode_columns = [*EPISODE_COLUMNS, *(f"return/{g}" for g in groups), *info]
        # is_success where the env reports it unasked, an evaluation's numbers, a callback's: columns from the first
        # iteration that has them
        self._metrics = _CsvTable(self.run_dir / "metrics.csv", metric_columns, resume_iteration)
        self._episodes = _CsvTable(self.run_dir / "episodes.csv", episode_columns, resume_iteration)
        self.loggers = list(loggers)
        """TorchRL loggers (:mod:`ppo_td.persist.loggers`) that get the config as hyper-parameters and every
        iteration's metrics; closed with this one."""
        if tensorboard and not any(type(lg).__name__ == "TensorboardLogger" for lg in self.loggers):
            from torchrl.record.loggers.tensorboard import TensorboardLogger

            try:
                self.loggers.append(TensorboardLogger(exp_name="tensorboard", log_dir=str(self.run_dir)))
            except ImportError as err:
                raise ImportError("--tensorboard needs tensorboard: pip install -e '.[tensorboard]'") from err
        self._no_video: set[int] = set()
        try:
            log_config(self.loggers, to_dict(config))
        except BaseException:
            self.close()  # the CSVs, and each logger's run (a W&B run left open would not be written)
            raise

    def __call__(self, metrics: dict[str, Any], pipeline: Pipeline) -> None:
        self._metrics.write([metrics])
        self._episodes.write(metrics.get("ended_episodes", []))
        log_metrics(self.loggers, metrics)

    def log_video(self, frames: list[Any], step: int, fps: float) -> None:
        """A video's frames (``H x W x 3`` uint8 arrays) to each logger that takes videos (TensorBoard and W&B with
        moviepy; MLflow with torchcodec); one that cannot is said once and skipped (the MP4 file is written
        anyway)."""
        import numpy as np
        import torch

        video = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).unsqueeze(0)  # [1, T, C, H, W]
        for logger in self.loggers:
            if id(logger) in self._no_video:
                continue
            try:
                if type(logger).__name__ == "TensorboardLogger" and not _has_moviepy_editor():
                    raise ImportError("TensorBoard's add_video needs moviepy < 2 (moviepy.editor)")
                logger.log_video("video", video, step=step, fps=int(fps))
            except Exception as err:  # noqa: BLE001 - a logger's video must never cost the run
                self._no_video.add(id(logger))
                print(f"warning: {type(logger).__name__} takes no videos this run ({type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}); the MP4 files are in the run folder",
                      file=sys.stderr)

    def log_final(self, evaluations: Sequence[Any], frames: int) -> None:
        """The final evaluation to each logger (:func:`~ppo_td.persist.loggers.log_final`)."""
        log_final(self.loggers, evaluations, frames)

    def close(self) -> None:
        self._metrics.close()
        self._episodes.close()
        close_loggers(self.loggers)


def _has_moviepy_editor() -> bool:
    """Whether ``moviepy.editor`` imports (moviepy < 2), which TensorBoard's videos need (with moviepy 2 it prints a
    line at each video and writes none)."""
    import importlib.util

    try:
        return importlib.util.find_spec("moviepy.editor") is not None
    except ImportError:
        return False


class _CsvTable:
    """An append-only CSV file keyed by iteration, flushed after every write.

    With ``keep_through`` (a resume) the rows up to that iteration are kept and the rest (written after the
    checkpoint being resumed, or cut off by a crash) dropped: the file is rewritten through a temporary file
    and a rename, so a crash at that moment leaves the old history or the new one, never none.

    A number a row has under a name that is no column yet (an evaluation's ``eval_return``, a value a callback
    logs, an info value the env reports unasked) joins the table when it first comes: the file is rewritten the
    same way with the new column, ``nan`` in the rows before.
    """

    def __init__(self, path: Path, columns: list[str], keep_through: int | None) -> None:
        self.path, self.columns = path, list(columns)
        if keep_through is not None and path.exists():
            with path.open(newline="") as f:
                reader = csv.DictReader(f)
                present = list(reader.fieldnames or ())
                self.columns += [c for c in present if c not in self.columns]  # joined before
                # whole by the file's own columns: one ppo_td added since (nan in the rows before) loses no row
                kept = [row for row in reader if _complete(row, ["iteration", *present], keep_through)]
            self._rewrite(kept)
            return
        self._file = path.open("w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self.columns, restval="nan", extrasaction="ignore")
        self._writer.writeheader()
        self._file.flush()

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        """The file as ``rows`` under the current columns (through a temporary file and a rename), then opened
        for appending."""
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=self.columns, restval="nan", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        write_atomically(self.path, text.getvalue())
        self._file = self.path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self.columns, restval="nan", extrasaction="ignore")

    def write(self, rows: list[dict[str, Any]]) -> None:
        known = set(self.columns)
        new = list(dict.fromkeys(k for row in rows for k, v in row.items() if k not in known and number(v) is not None))
        if new:
            self._file.close()
            with self.path.open(newline="") as f:
                before = list(csv.DictReader(f))
            self.columns += new
            self._rewrite(before)
        self._writer.writerows([{k: _cell(v) for k, v in row.items()} for row in rows])
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _cell(value: Any) -> Any:
    """A value as a CSV cell: ints and floats as they are, a numpy or torch scalar as its number (not
    ``tensor(0.25)``), anything else as it is."""
    if isinstance(value, (int, float, str)) or value is None:
        return value
    as_number = number(value)
    return value if as_number is None else as_number


def _complete(row: dict[str, Any], columns: list[str], keep_through: int) -> bool:
    """A whole row (a crash can cut the last one short) of an iteration up to ``keep_through``."""
    if None in row or any(row.get(c) is None for c in columns):
        return False
    try:
        return int(row["iteration"]) <= keep_through
    except ValueError:
        return False


def read_metrics(run_dir: str | Path) -> list[dict[str, str]]:
    """Every iteration's row of a run folder's ``metrics.csv``."""
    with (Path(run_dir) / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


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
