"""The user's script as a module other processes can import: a factory, wrapper or transform defined in the script
that trains (``__main__``) is recorded by the script's file, so ``ppo-td eval``, ``--resume``, ``load_policy`` in
another process and worker processes import it again (as ``multiprocessing`` re-imports a script in its workers).

Importing a script runs its top-level code, so ppo_td records a script only when that code does not train: the
call that trains sits under ``if __name__ == "__main__":`` (the guard ``multiprocessing`` asks of scripts), read
from the script's source at the line the call came from. A notebook, an interactive session or an unguarded script
cannot be imported again: what it defines is recorded as ``__main__:name``, which works in this process only, and
a run that must be reopened elsewhere (a run folder, worker processes) refuses it naming the fix
(:func:`elsewhere_problem`).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib.util
import inspect
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType

MAIN = "__main__"

_importing: list[Path] = []
"""Scripts being imported by :func:`import_script` right now (innermost last)."""

_elsewhere: list[dict[str, ModuleType]] = []
"""Inside :func:`as_another_process`: the scripts it imported afresh (module name -> module)."""


def main_module() -> ModuleType | None:
    """The module ``__main__`` (the script, notebook or console that runs)."""
    return sys.modules.get(MAIN)


def main_file() -> Path | None:
    """The file of the script that runs as ``__main__`` (resolved), None for a notebook, a console or ``python -c``."""
    main = main_module()
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    return Path(path).resolve()


def main_spec_name() -> str | None:
    """The module name ``__main__`` was run as with ``python -m pkg.mod`` (None for a script run by its path)."""
    spec = getattr(main_module(), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if name and name != MAIN else None


def module_for(module: str) -> ModuleType | None:
    """``__main__`` where ``module`` names it (its file, or the name it was run as with ``python -m``); else None."""
    if module == MAIN:
        return main_module()
    if _elsewhere:  # as another process sees it: the script imported from its file, not the running one
        return None
    if module.endswith(".py") and main_file() is not None and Path(module).resolve() == main_file():
        return main_module()
    if main_spec_name() == module:
        return main_module()
    return None


def import_script(path: str | Path) -> ModuleType:
    """The script at ``path`` imported as a module (once per process; its folder first on ``sys.path``, as Python
    runs it): its top-level code runs, its ``if __name__ == "__main__":`` block does not. ``__main__`` itself when the
    script is the one running.

    Raises:
        ImportError: the file is missing, or its top-level code failed (the message names the script).
    """
    running = module_for(str(path))
    if running is not None:
        return running
    path = Path(path).resolve()
    name = script_module_name(path)
    if _elsewhere and name not in _elsewhere[-1]:  # afresh, as another process would, and quietly
        with _as_imported_elsewhere(path, name):
            _elsewhere[-1][name] = _import_file(path, name)
        return _elsewhere[-1][name]
    if _elsewhere:
        return _elsewhere[-1][name]
    if name in sys.modules:
        return sys.modules[name]
    return _import_file(path, name)


@contextlib.contextmanager
def _as_imported_elsewhere(path: Path, name: str) -> Iterator[None]:
    """The block imports the script ``path`` as ``ppo-td eval`` would: with its file as the only command-line word
    (a top-level ``parse_args()`` sees none of this process's), its output dropped; afterwards this process is as it
    was: its own import of the script (if any), and Gymnasium's registry (ids the script registers again point at
    the running script's classes, not the fresh copy's)."""
    import gymnasium as gym

    before, argv = sys.modules.get(name), sys.argv
    registered = dict(gym.registry)
    sys.argv = [str(path)]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.argv = argv
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before
        for env_id in [i for i in gym.registry if registered.get(i) is not gym.registry[i]]:
            if env_id in registered:  # (gym.register's own dict: the ids as they were)
                gym.registry[env_id] = registered[env_id]
            else:
                del gym.registry[env_id]


def _import_file(path: Path, name: str) -> ModuleType:
    if not path.is_file():
        raise ImportError(f"the script {path} is not there (a run records the script its env factory, wrappers or "
                          "transforms were defined in): put it back, or train again with them in a module")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # its own imports of the modules beside it, as when it ran
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _importing.append(path)
    try:
        spec.loader.exec_module(module)
    except BaseException as err:
        del sys.modules[name]
        if isinstance(err, (Exception, SystemExit)):  # SystemExit: its top-level parse_args() refusing the words
            raise ImportError(f"importing the script {path} failed ({type(err).__name__}: {err}); a script is "
                              'imported without its `if __name__ == "__main__":` block and without its command-line '
                              "arguments: keep what needs them in that block") from err
        raise
    finally:
        _importing.pop()
    return module


@contextlib.contextmanager
def as_another_process() -> Iterator[None]:
    """Within the block, a recorded script is imported from its file, afresh and quietly (its output dropped), as
    another process (``ppo-td eval``, a worker) would import it, and not taken for the running ``__main__``: what is
    built from a run's record here is what another process builds. The fresh modules are dropped afterwards."""
    _elsewhere.append({})
    try:
        yield
    finally:
        _elsewhere.pop()


def script_module_name(path: Path) -> str:
    """The module name a script is imported under: the same in every process for the same file (objects of it
    pickled by reference find it), never ``__main__`` (its guard stays shut)."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"ppo_td_script_{stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def importing_script() -> Path | None:
    """The script :func:`import_script` is importing now, if any: a script that trains when imported is caught
    by the training entry points with this."""
    return _importing[-1] if _importing else None


def refuse_training_on_import(what: str) -> None:
    """Raise where ``what`` (``ppo_td.train``) is called while a recorded script is being imported again: its
    training is not under ``if __name__ == "__main__":``.

    Raises:
        RuntimeError: naming the script and the fix.
    """
    script = importing_script()
    if script is not None:
        raise RuntimeError(f"{what} was called while ppo_td imported {script} to rebuild what a run recorded from "
                           "it (an env factory, wrapper or transform): the script trains when imported. Put its "
                           'training under `if __name__ == "__main__":`, or move what it defines into a module')


def record_of_main(name: str) -> str:
    """How to record ``name``, defined in ``__main__``: ``<script file>:name`` where the script can be imported
    again without training (:func:`training_guarded`), ``pkg.mod:name`` for ``python -m pkg.mod`` so run, else
    ``__main__:name`` (this process only: :func:`elsewhere_problem` refuses it where a run is reopened elsewhere)."""
    if main_file() is None or not training_guarded():
        return f"{MAIN}:{name}"
    return f"{main_spec_name()}:{name}" if main_spec_name() else f"{main_file()}:{name}"


def training_guarded() -> bool:
    """Whether the running script calls ppo_td from inside its ``if __name__ == "__main__":`` block, so importing
    it elsewhere does not train again: the line of its top-level code on the call stack now is read from its
    source. False when the script's top-level code is not on the stack (a thread, a console after ``python -i``)."""
    path = main_file()
    frame = _main_frame()
    if path is None or frame is None:
        return False
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    line = frame.f_lineno
    return any(isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= node.end_lineno
               for node in tree.body)


def unguarded_line() -> int | None:
    """The line of the running script's top-level code that called ppo_td (None when it is not on the stack)."""
    frame = _main_frame()
    return frame.f_lineno if frame is not None else None


def _main_frame() -> FrameType | None:
    """The frame running ``__main__``'s top-level code, found on the call stack (inspect's public frames)."""
    main = main_module()
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "<module>" and frame.f_globals is getattr(main, "__dict__", None):
                return frame
            frame = frame.f_back
        return None
    finally:
        del frame


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    texts = [s for s in sides if isinstance(s, ast.Constant) and s.value == MAIN]
    return len(names) == 1 and len(texts) == 1


def in_main_only(path: str) -> bool:
    """Whether the import path ``module:name`` names ``__main__`` by that name, which no other process has."""
    return path.split()[0].rpartition(":")[0] == MAIN


def elsewhere_problem(paths: dict[str, str], where: str) -> str | None:
    """Why a run whose records are ``paths`` (setting -> ``module:name``) cannot be rebuilt in another process, or
    None: a record of ``__main__`` by that name (a notebook's, a console's, or a script whose training runs on
    import). ``where`` says what needs another process ("ppo-td eval ... rebuild it in another process")."""
    mains = {setting: path.split()[0] for setting, path in paths.items() if in_main_only(path)}
    if not mains:
        return None
    named = ", ".join(f"{setting} {path.rpartition(':')[2]}" for setting, path in mains.items())
    file, line = main_file(), unguarded_line()
    if file is None:
        how = ("is defined in a notebook or an interactive session, which no other process can import: move it into "
               "a module (a .py file beside the notebook) and import it from there")
    else:
        at = f" (line {line})" if line is not None else ""
        how = (f"is defined in the script {file.name}, which another process would import to rebuild it; importing "
               f"it would run its training again, since ppo_td is called outside `if __name__ == \"__main__\":`{at}. "
               'Put the script\'s training under `if __name__ == "__main__":` (as multiprocessing asks), or move '
               "it into a module and import it from there")
    return f"{named} {how} ({where})"
