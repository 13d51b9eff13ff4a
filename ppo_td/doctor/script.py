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
        raise FileNotFoundError(f"no script {path} (ppo-td doctor SCRIPT.py [ARGS ...]; see ppo-td doctor --help)")
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
# (``!pip install``, ``files = !ls``)
_MAGIC = re.compile(r"^\s*(%|!|\w+\s*=\s*!)")
_WRITEFILE = re.compile(r"^%%writefile(?:\s+-a)?\s+(\S+)")
_TRANSPARENT = ("%%time", "%%timeit", "%%capture")  # cell magics whose cell still runs (once)


def notebook_cells(path: Path) -> list[tuple[str, str]]:
    """The code cells of a Jupyter notebook as ``(name, source)``, in order, named ``nb.ipynb, cell N`` (the
    N-th code cell: ``In [N]`` when the notebook runs from the top) and made plain Python: IPython's line magics
    and shell escapes become blank lines (the line numbers stay), ``%%time``/``%%timeit``/``%%capture`` cells run
    once as plain code, a ``%%writefile`` cell writes its file, other cell magics (``%%bash``...) are skipped."""
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
        name = f"{path}, cell {len(found) + 1}"
        lines = source.splitlines()
        first = lines[0].strip() if lines else ""
        if first.startswith("%%"):
            if (match := _WRITEFILE.match(first)) is not None:
                source = f"__doctor_writefile__({match.group(1)!r}, {chr(10).join(lines[1:]) + chr(10)!r}, " \
                         f"{'-a' in first.split()})"
            elif not first.startswith(_TRANSPARENT):
                source = ""  # (another language, or output only: nothing of the training runs there)
            else:
                source = "\n" + "\n".join(lines[1:])
        found.append((name, "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())))
    return found


def _writefile(name: str, text: str, append: bool) -> None:
    with open(name, "a" if append else "w", encoding="utf-8") as f:
        f.write(text)


def _run_cells(cells: list[tuple[str, str]]) -> None:
    """Run the cells in one namespace, as a notebook's kernel would, but without display: ``display()`` shows
    nothing and matplotlib draws nowhere."""
    scope = {"__name__": "__main__", "__builtins__": __builtins__, "display": lambda *args, **kwargs: None,
             "__doctor_writefile__": _writefile}
    for name, source in cells:
        CELLS[name] = source.splitlines(keepends=True)
    backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        for name, source in cells:
            exec(compile(source, name, "exec"), scope)  # noqa: S102 - the user's own notebook, as Jupyter runs it
    finally:
        if backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = backend
