"""A measured workaround for per-call overhead in tensordict 0.14, applied when ppo_td is imported.

``TensorDictModule`` passes every output through ``TensorDict.from_any``, which calls
``importlib.util.find_spec("pandas")`` each time: a ``sys.path`` scan of about 20 us
when pandas is not installed, one or two per actor call. ``apply()`` gives
``tensordict.base`` an ``importlib`` whose ``util.find_spec`` caches its answer (whether
a package is installed does not change while a process runs). Measured here: actor
call 135 -> 100 us (CartPole), 159 -> 100 us (HalfCheetah); critic 57 -> 35 us.
``python -m benchmarks.speedups`` measures whole runs with and without it. Set
``PPO_TD_NO_SPEEDUPS=1`` to leave tensordict untouched.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import types
from typing import Any


class _CachedImportlib(types.ModuleType):
    """``importlib`` as tensordict.base sees it: every attribute forwarded, ``util.find_spec`` cached."""

    def __init__(self) -> None:
        super().__init__("importlib")
        self.util = types.SimpleNamespace(**vars(importlib.util))
        self.util.find_spec = functools.lru_cache(maxsize=None)(importlib.util.find_spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib, name)


def apply() -> bool:
    """Install the cached ``find_spec`` in ``tensordict.base``; False if disabled or not applicable."""
    if os.environ.get("PPO_TD_NO_SPEEDUPS") == "1":
        return False
    import tensordict.base

    if getattr(tensordict.base, "importlib", None) is not importlib:
        return False  # already applied, or a tensordict that no longer imports importlib there
    tensordict.base.importlib = _CachedImportlib()
    return True
