"""SIGINT and SIGTERM (Ctrl-C, a process manager's stop, a notebook's interrupt): training stops at the end of an
iteration with a checkpoint, from the command line and from Python alike; anything else (an evaluation, a video, an
export) stops at once, saying what it stopped, with the usual exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised where the program was when it came."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(err: BaseException) -> str:
    """The signal an interrupt came from (a plain ``KeyboardInterrupt`` is SIGINT's)."""
    return signal.Signals(getattr(err, "signum", signal.SIGINT)).name


def exit_code(err: BaseException) -> int:
    """The shell's code for a process ended by the signal of ``err``: 128 + its number (130 for SIGINT)."""
    return 128 + getattr(err, "signum", signal.SIGINT)


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` at once, so ``finally`` blocks close envs
    and files, and the caller says what stopped. Also where the process started with SIGINT ignored (a job a
    shell put in the background): ``kill -INT`` is then a request too. Outside the main thread, nothing changes
    (signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def end_promptly(code: int, within: float | None = None) -> None:
    """A command that a signal ended, on its way out of the process: the interpreter's own exit still waits for
    threads others started (torch's C++ compilation of a loss, seconds under load) and runs their atexit hooks. From
    here a further SIGINT or SIGTERM ends the process at once with ``code`` (not a traceback from a thread's join, nor
    a death by the signal); with ``within``, it ends with ``code`` that many seconds from now at the latest (a stop
    asked for "now"). Stdout and stderr are flushed first: every line said stays said. Main thread only, as
    signal handlers are; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return

    def leave(*_: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # (a closed pipe: nothing left to say there)
                stream.flush()
        os._exit(code)

    for sig in SIGNALS:
        signal.signal(sig, leave)
    if within is not None:
        timer = threading.Timer(within, leave)
        timer.daemon = True  # (the interpreter's exit does not wait for it; it waits for the threads it cuts short)
        timer.start()


@contextlib.contextmanager
def stop_after_iteration(request_stop: Callable[[], None], checkpoint: bool = True,
                         quiet: bool | Callable[[], bool] = False, same_within: float = 0.0) -> Iterator[list[int]]:
    """Training's guard: the first SIGINT/SIGTERM calls ``request_stop`` (the run then stops after the current
    iteration; the list yielded gets the signal's number); a second one (SIGINT or SIGTERM: a process manager's
    second ask) raises :class:`Interrupted` at once, for an iteration that would not end soon. ``checkpoint``:
    whether the stop writes one (a run folder), as the line printed says; ``quiet``: no line (a rank other than 0; a
    callable: asked when the signal comes, true for a run already failing, which a launcher is stopping).
    ``same_within``: a second signal within that many seconds of the first is the first again (a launcher passing on
    the Ctrl-C its ranks had already). Outside the main thread nothing changes (signals reach the main thread only);
    the handlers found are put back after the block."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    first: list[float] = []

    def handler(signum: int, frame: Any) -> None:
        if received and time.monotonic() - first[0] <= same_within:
            return
        if received:
            raise Interrupted(signum)
        received.append(signum)
        first.append(time.monotonic())
        request_stop()
        if quiet() if callable(quiet) else quiet:
            return
        saved = ", with a checkpoint" if checkpoint else ""
        print(f"\n{signal.Signals(signum).name}: stopping at the end of this iteration{saved} (Ctrl-C or SIGTERM "
              f"again stops now{', without one' if checkpoint else ''})", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
