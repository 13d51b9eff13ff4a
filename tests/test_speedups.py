"""The tensordict workaround in ppo_td.speedups: applied on import, transparent, and can be turned off."""

import importlib
import os
import subprocess
import sys

import tensordict.base
import torch
from tensordict import TensorDict

import ppo_td  # noqa: F401  (applies the workaround)


def test_tensordict_sees_a_cached_find_spec_and_the_real_importlib_otherwise():
    shim = tensordict.base.importlib
    assert shim is not importlib and hasattr(shim.util.find_spec, "cache_info")
    assert shim.import_module is importlib.import_module  # everything else forwarded
    x = torch.zeros(3)
    info = shim.util.find_spec.cache_info()
    before = info.hits + info.misses
    for _ in range(5):
        assert TensorDict.from_any(x) is x  # a tensor passes through unchanged, as without the workaround
    info = shim.util.find_spec.cache_info()
    assert info.hits + info.misses >= before + 5 and info.misses <= 2  # answered from the cache
    assert shim.util.find_spec("a_package_that_is_not_installed_xyz") is None
    assert shim.util.find_spec("torch") is not None


def test_ppo_td_no_speedups_leaves_tensordict_untouched():
    code = "import importlib, ppo_td, tensordict.base; print(tensordict.base.importlib is importlib)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PPO_TD_NO_SPEEDUPS="1"))
    assert out.stdout.strip() == "True"
