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


def format_line(filename: str, lineno: int, line: str | None) -> str:
    return f"{filename}:{lineno}" + (f" ({line.strip()})" if line else "")


def caller() -> str:
    """The innermost line of the user's code on the stack."""
    return callers(1)


def error_line(err: BaseException) -> str:
    """The user's line an exception was raised from (or the innermost user line on the stack)."""
    if isinstance(err, SyntaxError) and err.filename:
        return format_line(err.filename, err.lineno or 0, err.text)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not internal(f.filename)]
    return format_line(frames[-1].filename, frames[-1].lineno, frames[-1].line) if frames else caller()


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


def callers(depth: int = 2) -> str:
    """The innermost line of the user's code on the stack, and the user's lines that called it (up to ``depth``
    lines in all; third-party packages skipped after the first): ``file:12 (...), called from file:40 (...)``.
    Walks the frames themselves and reads only the lines it reports (a forward's cost is mostly this)."""
    found: list[str] = []
    frame = inspect.currentframe()
    try:
        frame = frame.f_back if frame is not None else None
        while frame is not None and len(found) < depth:
            filename = frame.f_code.co_filename
            if not internal(filename) and (not found or "-packages" + os.sep not in filename):
                found.append(format_line(filename, frame.f_lineno, linecache.getline(filename, frame.f_lineno)))
                if frame.f_code.co_name == "<module>":
                    break  # a script's top level: what called it is not the user's
            frame = frame.f_back
    finally:
        del frame
    return ", called from ".join(found) or "<unknown>"


def words(name: str) -> set[str]:
    """The words of a name, with common compounds split (``vnet`` -> v, ``qf1`` -> q, ``ValueNet`` -> value)."""
    found = {w for w in re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w}
    return found | {m.group(1) for w in found if (m := re.fullmatch(r"(v|q|pi|mu|value|critic|actor|policy)"
                                                                    r"(?:net|network|fn|func|head|f)", w))}


def user_name(obj: object) -> str | None:
    """The name the user's code gives ``obj``: a variable, or an attribute/child of a variable (``self.actor``)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if not internal(frame.f_code.co_filename):
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
            frame = frame.f_back
    finally:
        del frame
    return None


def line_number(where: str) -> int | None:
    """The line number in a ``file:line (text)`` location."""
    match = re.match(r".*?:(\d+)(?: \(|$)", where)
    return int(match.group(1)) if match else None
