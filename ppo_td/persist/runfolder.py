"""A run folder's identity and protection: one writer at a time, no silent reuse, files replaced atomically."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppo_td.config import TrainConfig, to_dict

# what ppo-td train writes in a run folder (and --overwrite removes); anything else in the folder is left alone
RUN_FILES = ("config.json", "metrics.csv", "episodes.csv", "checkpoint.pt", "best.pt", "summary.json",
             "learning_curve.png", "run.json")
RUN_DIRS = ("checkpoints", "tensorboard")


class RunFolderError(ValueError):
    """A run folder cannot be used as asked; the message says why and what to do."""


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` via a temporary file and a rename: a crash leaves the old or the new file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (else set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the ``.*.tmp`` files a killed writer left in ``folder`` (their writer's pid is in the name and
    no longer runs); returns what was removed. Files of a live writer stay."""
    removed = []
    for tmp in folder.glob(".*.tmp"):
        pid = next((int(part) for part in tmp.name.split(".") if part.isdigit()), None)
        if pid is not None and pid != os.getpid() and process_alive(pid):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


class RunFolder:
    """The folder of one training run: ``run.json`` names the run (``run_id``), ``run.lock`` names its writer."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def holds_a_run(self) -> bool:
        return any((self.path / name).exists() for name in RUN_FILES + RUN_DIRS)

    def create(self, overwrite: bool = False) -> str:
        """Start a new run here; returns its run id. Refuses a folder that holds a run unless ``overwrite``."""
        if self.holds_a_run():
            if not overwrite:
                raise RunFolderError(f"run folder {self.path} already holds a run: continue it with "
                                     f"`ppo-td train --resume {shlex.quote(str(self.path))}`, choose another "
                                     "--run-dir, or pass --overwrite to replace it")
            for name in RUN_FILES:
                (self.path / name).unlink(missing_ok=True)
            for name in RUN_DIRS:
                shutil.rmtree(self.path / name, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)
        run_id = uuid.uuid4().hex
        write_atomically(self.path / "run.json", json.dumps({"run_id": run_id, "created": time.time()}) + "\n")
        return run_id

    def abandon(self) -> None:
        """Undo :meth:`create` for a run that never started (its pipeline could not be built): remove ``run.json``,
        so the same command can run again once fixed (a folder :meth:`locked` made goes when it is left empty)."""
        (self.path / "run.json").unlink(missing_ok=True)

    @property
    def run_id(self) -> str | None:
        """The run's id (None for a folder written before run ids existed)."""
        try:
            return json.loads((self.path / "run.json").read_text())["run_id"]
        except (OSError, ValueError, KeyError):
            return None

    def recorded(self) -> dict[str, Any]:
        """What ``run.json`` holds ({} where it cannot be read)."""
        try:
            return json.loads((self.path / "run.json").read_text())
        except (OSError, ValueError):
            return {}

    def record(self, resumed: dict[str, Any] | None = None, **fields: Any) -> None:
        """Set ``fields`` in ``run.json``, and add ``resumed`` to its list of resumes (one atomic write)."""
        try:
            info = json.loads((self.path / "run.json").read_text())
        except (OSError, ValueError):
            info = {}
        info.update(fields)
        if resumed is not None:
            info.setdefault("resumes", []).append(resumed)
        write_atomically(self.path / "run.json", json.dumps(info, indent=1) + "\n")

    def check_checkpoint(self, state: dict[str, Any], path: Path) -> None:
        """Refuse a checkpoint written by another run (copied into this folder)."""
        mine, theirs = self.run_id, state.get("run_id")
        if mine is not None and theirs is not None and mine != theirs:
            raise RunFolderError(f"checkpoint {path} belongs to run {theirs}, not to this folder's run {mine} "
                                 f"({self.path / 'run.json'}): resume it from its own run folder")

    def write_config(self, config: TrainConfig) -> None:
        write_atomically(self.path / "config.json", json.dumps(to_dict(config), indent=2) + "\n")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``run.lock`` (with this process's pid) while the block runs; refuse a folder another live
        process holds. A lock left by a process that died is taken over."""
        made = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        lock = self.path / "run.lock"
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
                break
            except FileExistsError:
                owner = _pid_in(lock)
                if owner is not None and process_alive(owner):
                    raise RunFolderError(f"run folder {self.path} is in use by process {owner} (its {lock.name}); "
                                         "two runs on one folder would interleave their files. Wait for it to end "
                                         "or choose another --run-dir") from None
                lock.unlink(missing_ok=True)  # its writer is gone
        else:
            raise RunFolderError(f"cannot take {lock}: another process keeps creating it")
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
            if made and not any(self.path.iterdir()):  # made here and nothing written (an abandoned run)
                self.path.rmdir()


def _pid_in(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip())
    except (OSError, ValueError):
        return None


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (this process counts; one of another user's too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
