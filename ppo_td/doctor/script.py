"""Run a user's training script or notebook, unmodified, under the audit (``ppo-td doctor script.py``,
``ppo-td doctor notebook.ipynb``)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ppo_td.doctor.explain import DoctorError
from ppo_td.doctor.lines import CELLS
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
    """Run ``path`` as ``__main__`` (with ``sys.argv = [path, *argv]``) under :func:`~ppo_td.doctor.audit`; a
    notebook (``.ipynb``) runs its code cells in order (see :func:`notebook_cells`).

    Modules are discovered as the script calls them, optimizers as they step. The run stops at the optimizer
    step after ``steps`` steps, at the script's first error, at its end, or after ``timeout`` seconds.
    Returns the audit and how the run ended.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no script or notebook {path} (ppo-td doctor SCRIPT.py|NOTEBOOK.ipynb [ARGS ...]; see "
                                "ppo-td doctor --help)")
    run: Callable[[], object] = lambda: runpy.run_path(str(path), run_name="__main__")  # noqa: E731
    if path.suffix == ".ipynb":
        cells = notebook_cells(path)
        run = lambda: _run_cells(cells)  # noqa: E731
    saved_argv, saved_path, saved_cwd = sys.argv, list(sys.path), os.getcwd()
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.resolve().parent))
    ended = "the script ended" if path.suffix != ".ipynb" else "the notebook ended"
    a: Audit | None = None
    try:
        if path.suffix == ".ipynb":
            os.chdir(path.resolve().parent)  # (as Jupyter runs a notebook: in its folder)
        with _time_limit(timeout), audit(stop_after=steps) as a:
            run()
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
        os.chdir(saved_cwd)
        for name in [n for n in CELLS if n.startswith(f"{path}, cell ")]:
            del CELLS[name]
    if a is None:  # stopped before the audit began
        raise RuntimeError(f"ppo-td doctor could not start auditing {path}: {ended}")
    if a.stopped:
        ended = a.stopped
    return a, ended


# IPython syntax a plain Python run cannot take: magics (``%matplotlib inline``, ``%%time``) and shell escapes
# (``!pip install``, ``files = !ls``); IPython's own transformer rewrites them into calls of ``get_ipython()``
_IPYTHON_SYNTAX = re.compile(r"^\s*(%|!|\w+\s*=\s*!)", re.MULTILINE)
_RUN_BODY = {"time", "timeit", "capture", "prun"}  # cell magics whose cell still runs (once)


def notebook_cells(path: Path) -> list[tuple[str, str, str]]:
    """The code cells of a Jupyter notebook as ``(name, source, python)``, in order, named ``nb.ipynb, cell N``
    (the N-th code cell: ``In [N]`` when the notebook runs from the top). ``python`` is the cell as plain Python:
    IPython's transformer (``IPython.core.inputtransformer2``) turns magics and shell escapes into calls of
    ``get_ipython()``, which :func:`_run_cells` answers; a line keeps its number."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not a Jupyter notebook (nbformat 4 JSON with 'cells'): {err}; save it from "
                         "Jupyter, or run a .py script") from err
    found = []
    for cell in (c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        found.append((f"{path}, cell {len(found) + 1}", source, _plain(source, path, len(found) + 1)))
    return found


def _plain(source: str, path: Path, n: int) -> str:
    if not _IPYTHON_SYNTAX.search(source):
        return source
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError as err:
        raise ImportError(f"{path}, cell {n} uses IPython's magics or shell escapes: pip install ipython to run "
                          "it under the doctor (Jupyter installs it)") from err
    return TransformerManager().transform_cell(source)


class _Shell:
    """What ``get_ipython()`` answers in a notebook run under the doctor: magics and shell escapes do nothing
    (no display, no shell), except a cell magic that runs its cell (``%%time``, ``%%capture``...), which runs it
    once as plain code, and ``%%writefile``, which writes its file."""

    def __init__(self, scope: dict, name: str) -> None:
        self.scope, self.name = scope, name

    def run_line_magic(self, magic: str, line: str, *args, **kwargs) -> None:
        return None

    def system(self, command: str) -> None:
        return None

    def getoutput(self, command: str, *args, **kwargs) -> list:
        return []

    def run_cell_magic(self, magic: str, line: str, cell: str) -> None:
        if magic in _RUN_BODY:
            exec(compile("\n" + cell, self.name, "exec"), self.scope)  # noqa: S102 - the user's cell, its lines kept
        elif magic == "writefile":
            words = line.split()
            with open(words[-1], "a" if "-a" in words[:-1] or "--append" in words[:-1] else "w",
                      encoding="utf-8") as f:
                f.write(cell)


def _run_cells(cells: list[tuple[str, str, str]]) -> None:
    """Run the cells in one namespace, as a notebook's kernel would, but without display: ``display()`` shows
    nothing and matplotlib draws nowhere."""
    scope: dict = {"__name__": "__main__", "__builtins__": __builtins__, "display": lambda *args, **kwargs: None}
    for name, source, _ in cells:
        CELLS[name] = source.splitlines(keepends=True)
    backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        for name, _, python in cells:
            shell = _Shell(scope, name)
            scope["get_ipython"] = lambda shell=shell: shell
            exec(compile(python, name, "exec"), scope)  # noqa: S102 - the user's own notebook, as Jupyter runs it
    finally:
        if backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = backend
