"""Run a user's training script, unmodified, under the audit (``ppo-td doctor script.py``)."""

from __future__ import annotations

import contextlib
import runpy
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from ppo_td.doctor.explain import DoctorError
from ppo_td.doctor.watch import Audit, StopAudit, audit


class ScriptTimeout(StopAudit):
    """The script ran longer than the doctor's time limit."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Stop the block after ``seconds`` (main thread, POSIX; elsewhere no limit)."""
    if not seconds or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(signum, frame):
        raise ScriptTimeout(f"stopped after {seconds:g} s (--timeout): the script may wait on something forever")

    try:
        previous = signal.signal(signal.SIGALRM, stop)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)  # and again every second, should the code swallow one
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_script(path: str | Path, argv: Sequence[str] = (), steps: int | None = 20,
               timeout: float | None = 600.0) -> tuple[Audit, str]:
    """Run ``path`` as ``__main__`` (with ``sys.argv = [path, *argv]``) under :func:`~ppo_td.doctor.audit`.

    Modules are discovered as the script calls them, optimizers as they step. The run stops at the optimizer
    step after ``steps`` steps, at the script's first error, at its end, or after ``timeout`` seconds.
    Returns the audit and how the run ended.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no script {path} (ppo-td doctor SCRIPT.py [ARGS ...]; see ppo-td doctor --help)")
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.resolve().parent))
    ended = "the script ended"
    a: Audit | None = None
    try:
        with _time_limit(timeout), audit(stop_after=steps) as a:
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as err:
        if err.code not in (None, 0):
            ended = f"the script exited with {err.code!r}"
    except StopAudit as stop:  # the time limit, after the audit had ended
        ended = str(stop)
    except (Exception, KeyboardInterrupt) as err:  # noqa: BLE001 - the report says what it was
        original = err.__cause__ if isinstance(err, DoctorError) and err.__cause__ else err
        ended = f"the script raised {type(original).__name__}"
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if a is None:  # stopped before the audit began
        raise RuntimeError(f"ppo-td doctor could not start auditing {path}: {ended}")
    if a.stopped:
        ended = a.stopped
    return a, ended
