"""Where things happen in the user's code: the user's source line on the stack, and the names the user's code
gives its modules and optimizers."""

from __future__ import annotations

import importlib.util
import inspect
import linecache
import os
import re
import sysconfig
import traceback
from collections.abc import Iterator

from torch import nn

VALUE_WORDS = {"critic", "critics", "value", "values", "vf", "baseline", "q", "qf", "v"}
POLICY_WORDS = {"actor", "actors", "policy", "policies", "pi", "mu"}
FROZEN_WORDS = {"old", "target", "stale", "frozen", "prev", "previous", "behaviour", "behavior"}


def _package_dirs(*names: str) -> tuple[str, ...]:
    """The folders of the installed packages ``names`` (found without importing them)."""
    dirs = []
    for name in names:
        spec = importlib.util.find_spec(name)
        dirs += [os.path.join(d, "") for d in (spec.submodule_search_locations or [])] if spec else []
    return tuple(dirs)


LIBRARIES = _package_dirs("torch", "tensordict", "torchrl")
TORCH = _package_dirs("torch")
DOCTOR = os.path.dirname(os.path.abspath(__file__))
# ppo_td's own autograd kernels: they read a tensor's memory (.detach(), .numpy()) and give the gradient back
# themselves, so what they do there is no cut (found by path: the doctor does not import ppo_td.models)
OWN_KERNELS = (os.path.join(os.path.dirname(DOCTOR), "models", "activations.py"),)
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_CLI = os.path.join(os.path.dirname(DOCTOR), "cli", "")  # ppo-td's command that runs the user's script


def internal(filename: str) -> bool:
    """A frame of torch, TensorDict, TorchRL, Python's standard library or the doctor: not the user's line."""
    if filename.startswith("<"):
        return filename.startswith("<frozen")
    return (filename.startswith((*LIBRARIES, _CLI, DOCTOR + os.sep))
            or (filename.startswith(_STDLIB) and "site-packages" not in filename))


CELLS: dict[str, list[str]] = {}  # a notebook cell's filename (``nb.ipynb, cell 7``) -> its lines (doctor.notebook)
_AT = r"(?::|, line )"  # between a file and its line number: ``file:12``, or ``nb.ipynb, cell 7, line 3``


def format_line(filename: str, lineno: int, line: str | None) -> str:
    """``file:12 (text)``; in a notebook's cell, ``nb.ipynb, cell 7, line 3 (text)``."""
    return f"{filename}{', line ' if filename in CELLS else ':'}{lineno}" + (f" ({line.strip()})" if line else "")


def getline(filename: str, lineno: int) -> str:
    """Line ``lineno`` of a file or of a notebook's cell ("" when there is none)."""
    cell = CELLS.get(filename)
    if cell is not None:
        return cell[lineno - 1] if 0 < lineno <= len(cell) else ""
    return linecache.getline(filename, lineno)


def neighbours(filename: str) -> list[str]:
    """``filename``, or every cell of the notebook whose cell it is (in order): where the code around it stands."""
    notebook = filename.rpartition(", cell ")[0]
    return [f for f in CELLS if f.rpartition(", cell ")[0] == notebook] if filename in CELLS else [filename]


def getlines(filename: str) -> list[str]:
    """The lines of a file or of a notebook's cell."""
    return CELLS.get(filename) or linecache.getlines(filename)


def caller() -> str:
    """The innermost line of the user's code on the stack."""
    return call_chain(1)


def error_line(err: BaseException) -> str:
    """The user's line an exception was raised from (or the innermost user line on the stack)."""
    if isinstance(err, SyntaxError) and err.filename:
        return format_line(err.filename, err.lineno or 0, err.text or getline(err.filename, err.lineno or 0))
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not internal(f.filename)]
    if not frames:
        return caller()
    return format_line(frames[-1].filename, frames[-1].lineno,
                       frames[-1].line or getline(frames[-1].filename, frames[-1].lineno or 0))


def user_frame(skip: tuple[str, ...] = ()) -> object | None:
    """The innermost frame outside the doctor, torch and the folders ``skip``."""
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_filename.startswith((DOCTOR, *TORCH, *skip)):
        frame = frame.f_back
    return frame


_DISPATCH = (os.path.join(TORCH[0], "overrides.py"), os.path.join(TORCH[0], "_tensor.py")) if TORCH else ()
_FUNCTIONAL = os.path.join(TORCH[0], "nn", "functional.py") if TORCH else ""


def calling_frame() -> object | None:
    """The frame that made the torch call being handled: the first below the doctor and torch's dispatch (and
    ``torch.nn.functional``'s own Python function, for its functions)."""
    frame = inspect.currentframe()
    while frame is not None and (frame.f_code.co_filename.startswith(DOCTOR)
                                 or frame.f_code.co_filename in _DISPATCH):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename == _FUNCTIONAL:
        frame = frame.f_back
    return frame


def user_call_frame() -> object | None:
    """The frame of the user's code that made the torch call being handled, or None where torch, a distribution,
    TensorDict or TorchRL made it."""
    frame = calling_frame()
    return frame if frame is not None and not internal(frame.f_code.co_filename) else None


def called_by_user() -> bool:
    """Whether the torch call being handled was made by the user's code itself (see :func:`user_call_frame`)."""
    return user_call_frame() is not None


CHAIN = " -> "  # between the lines of a call chain, the user's outer call first


def call_chain(depth: int = 4) -> str:
    """The user's call that made what is being recorded, then the user's lines inside it, outer first:
    ``my_ppo.py:82 (values = agent.value(obs)) -> my_ppo.py:26 (return self.vf(x))``.

    From the innermost line of the user's code on the stack, the walk goes out through the user's frames that only
    pass the result up: methods of an ``nn.Module`` (``self`` is one), ``return`` lines, lambdas and
    comprehensions. The first frame that is none of these holds the call to change (the line in the loop); a
    script's top level ends the walk too. Third-party packages are skipped after the first line; at most ``depth``
    lines. Walks the frames themselves and reads only the lines it reports (a forward's cost is mostly this)."""
    found: list[str] = []
    frame = inspect.currentframe()
    try:
        frame = frame.f_back if frame is not None else None
        while frame is not None and len(found) < depth:
            filename = frame.f_code.co_filename
            if not internal(filename) and (not found or "-packages" + os.sep not in filename):
                text = getline(filename, frame.f_lineno)
                found.append(format_line(filename, frame.f_lineno, text))
                if not _passes_up(frame, text):
                    break
            frame = frame.f_back
    finally:
        del frame
    return CHAIN.join(reversed(found)) or "<unknown>"


_PASSING = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _passes_up(frame, text: str) -> bool:
    """Whether a user's frame only hands its result to its caller (a module's method, a ``return`` line, a lambda or
    a comprehension), so the caller's line is where the user chose to make it."""
    code = frame.f_code
    if code.co_name == "<module>":
        return False  # a script's top level: what called it is not the user's
    if code.co_name in _PASSING or text.lstrip().startswith("return"):
        return True
    return bool(code.co_argcount) and code.co_varnames[0] == "self" and isinstance(frame.f_locals.get("self"),
                                                                                   nn.Module)


def outer(chain: str) -> str:
    """The user's outer call of a call chain (its first line)."""
    return chain.partition(CHAIN)[0]


def words(name: str) -> set[str]:
    """The words of a name, with common compounds split (``vnet`` -> v, ``qf1`` -> q, ``ValueNet`` -> value)."""
    found = {w for w in re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w}
    return found | {m.group(1) for w in found if (m := re.fullmatch(r"(v|q|pi|mu|value|critic|actor|policy)"
                                                                    r"(?:net|network|fn|func|head|f)", w))}


def _user_frames() -> Iterator[object]:
    """The frames of the user's code on the stack, innermost first."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if not internal(frame.f_code.co_filename):
                yield frame
            frame = frame.f_back
    finally:
        del frame


def user_name(obj: object) -> str | None:
    """The name the user's code gives ``obj``: a variable, or an attribute/child of a variable (``self.actor``)."""
    for frame in _user_frames():
        for scope in (frame.f_locals, frame.f_globals):
            for key, value in scope.items():
                if value is obj and not key.startswith("__"):
                    return key
        for value in list(frame.f_locals.values()):
            children = value.named_children() if isinstance(value, nn.Module) else (
                vars(value).items() if hasattr(value, "__dict__") and not inspect.ismodule(value)
                and not inspect.isclass(value) else ())
            for key, child in children:
                if child is obj:
                    return key
    return None


def user_name_by_parameters(module: nn.Module) -> str | None:
    """The user's variable holding a module with the very parameters of ``module`` (TorchRL's loss keeps the
    critic's parameters as ``critic_network_params``; the user's code calls that critic ``critic``), or None."""
    ids = {id(p) for p in module.parameters()}
    if not ids:
        return None
    for frame in _user_frames():
        for scope in (frame.f_locals, frame.f_globals):
            for key, value in list(scope.items()):
                if (isinstance(value, nn.Module) and value is not module and not key.startswith("__")
                        and {id(p) for p in value.parameters()} == ids):
                    return key
    return None


def location(where: str) -> str:
    """``file:line`` (or ``nb.ipynb, cell 7, line 3``) of the first location in ``where`` ("" if none)."""
    match = re.match(rf"(.+?{_AT}\d+)(?: \(|$|;|,| ->)", where)
    return match.group(1) if match else ""


def line_number(where: str) -> int | None:
    """The line number in a ``file:line (text)`` location."""
    match = re.match(rf".*?{_AT}(\d+)(?: \(|$)", where)
    return int(match.group(1)) if match else None


def filename_of(where: str) -> str:
    """The file (or notebook cell) of a ``file:line (text)`` location."""
    match = re.match(rf"(.+?){_AT}\d+", where)
    return match.group(1) if match else where
