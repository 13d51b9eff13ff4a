"""Naming a failed collection worker, and waiting on workers with a timeout: nothing waits forever."""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class WorkerError(RuntimeError):
    """A collection worker died or failed; ``worker`` is its index (None if unknown), ``cause`` why.

    The trainer adds ``frames``, ``iteration`` and ``elapsed``: the last completed iteration, whose
    weights and statistics are intact in the pipeline (a run folder checkpoints them: ``checkpoint``).
    """

    def __init__(self, worker: int | None, cause: str) -> None:
        who = f"collection worker {worker}" if worker is not None else "a collection worker"
        super().__init__(f"{who} failed: {cause}")
        self.worker, self.cause = worker, cause
        self.frames = self.iteration = self.elapsed = None
        self.checkpoint = None  # the run folder's checkpoint of that iteration, once written


WORKER_TIMEOUT = 300.0
"""Seconds a call into the workers may wait for their answer while every worker is alive."""


def watched(collector: Any, what: str, call: Callable[[], T], timeout: float = WORKER_TIMEOUT) -> T:
    """Run ``call`` (a TorchRL call that waits for every worker's answer, without a timeout of its own) in a
    helper thread, and check every second that the workers are alive: a worker that dies meanwhile is raised
    as :class:`WorkerError` within about a second, a call unanswered after ``timeout`` seconds too. Nothing
    waits forever."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = err

    thread = threading.Thread(target=target, name=f"ppo_td: {what}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while True:
        thread.join(1.0)
        if not thread.is_alive():
            break
        check_alive(collector)
        if time.monotonic() > deadline:
            raise WorkerError(None, f"{what}: no answer from the workers within {timeout:.0f} s, although every "
                              "worker process is alive (a worker stuck in its env?)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def check_alive(collector: Any) -> None:
    """Raise :class:`WorkerError` for the first worker process that is no longer alive."""
    for index, proc in enumerate(getattr(collector.collector, "procs", [])):
        if not proc.is_alive():
            raise WorkerError(index, collector.report(index) or _exit_cause(proc.exitcode))


@contextlib.contextmanager
def reported_failures(collector: Any) -> Iterator[None]:
    """Re-raise a worker's death or failure inside the block as :class:`WorkerError`."""
    try:
        yield
    except WorkerError:
        raise
    except Exception as err:
        failure = worker_failure(collector, err)
        if failure is None:
            raise
        raise failure from err


_DEAD = re.compile(r"worker (\d+) \(exit code (-?\d+)\)")


def worker_failure(collector: Any, err: Exception) -> WorkerError | None:
    """Translate a collector's failure into a :class:`WorkerError`, or None if no worker failed."""
    if not hasattr(collector, "report"):  # not a WorkerCollector: nothing to translate
        return None
    match = _DEAD.search(str(err))
    if collector.backend == "process" and match:
        worker, code = int(match.group(1)), int(match.group(2))
        return WorkerError(worker, collector.report(worker) or _exit_cause(code))
    try:
        import ray.exceptions
    except ImportError:
        return None
    if isinstance(err, ray.exceptions.RayError):
        worker = collector.ray_worker(err)
        cause = getattr(err, "cause", None)
        if isinstance(cause, Exception):
            return WorkerError(worker, f"{type(cause).__name__}: {cause}")
        return WorkerError(worker, str(err).strip().splitlines()[-1])
    return None


def _exit_cause(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the kernel's OOM killer or a `kill -9`)" if -code == signal.SIGKILL else ""
        return f"the process was killed by {name}{hint}"
    return f"the process exited with code {code}"
