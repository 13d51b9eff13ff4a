"""The architecture's promises: layers import downward only, importing ppo_td changes nothing outside it,
and ppo_td reaches TorchRL and tensordict through their public APIs only."""

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = Path(__file__).parent / "scripts" / "import_side_effects.py"


def test_import_linter_contracts_are_kept():
    """pyproject.toml's contracts: the layers of docs/architecture.md, no import cycle among the modules of any
    package (a function-local import counts), the loss never imports the collector, the autograd audit needs
    nothing else of ppo_td; in benchmarks/, no import cycle in any package, and the dispatcher above the kinds of
    benchmark, each kind on its own, what they share below them."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout and "6 kept" in proc.stdout, proc.stdout
    assert "No two modules import each other, in any package (nor in a longer cycle) KEPT" in proc.stdout


def _side_effects(*preloaded: str) -> dict:
    proc = subprocess.run([sys.executable, "-W", "ignore", str(SCRIPT), *preloaded], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_importing_ppo_td_changes_nothing_outside_it():
    """Import every third-party module ppo_td uses, then ppo_td and all its submodules: no attribute of
    torch, torchrl, tensordict, numpy or Gymnasium is replaced or added, no env id is registered, and
    torch's global settings stay. (This check reports the tensordict patch and the env registration
    that ppo_td 0.1 made on import.)"""
    modules = _side_effects()["modules"]  # what importing ppo_td pulls in
    assert "torchrl.collectors" in modules and "tensordict.nn" in modules
    assert _side_effects(*modules)["changes"] == []


@pytest.mark.slow
def test_example_envs_register_only_when_imported():
    code = ("import gymnasium as gym, ppo_td, ppo_td.envs, ppo_td.cli; before = 'ppo_td/Trading-v0' in gym.registry; "
            "import examples.trading; print(before, 'ppo_td/Trading-v0' in gym.registry)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)
    assert proc.stdout.split() == ["False", "True"], proc.stderr[-2000:]
    assert "ppo_td/Trading-v0" in gym.registry  # conftest imported the example for the other tests


# Patterns of private access: ppo_td's own attributes on other libraries' objects, private names imported from
# TorchRL or tensordict, attribute paths into their private modules, underscore attributes read off objects
# ppo_td does not own (an underscore after a dot on anything but self or ppo_td's own variables).
PRIVATE = [
    re.compile(r"_ppo_td_"),
    re.compile(r"from (torchrl|tensordict|gymnasium)[\w.]* import [^#\n]*\b_[a-z]"),
    re.compile(r"(torchrl|tensordict)(\.\w+)*\._[a-z]"),
    # (os._exit: the standard library's documented exit without cleanup handlers, not a private name)
    re.compile(r"\b(?!self\b|a\b|cls\b|os\._exit\b)[a-z]\w*\._[a-z]\w*"),
    re.compile(r"^\s*(torch|torchrl|tensordict|gymnasium|gym|np|numpy)(\.\w+)+\s*=[^=]"),  # patching a module
]
# TorchRL's Transform docstring tells subclasses to override these (torchrl/envs/transforms/_base.py)
TRANSFORM_HOOKS = re.compile(r"def _(step|reset|call|apply_transform|inv_call|inv_apply_transform)\(")


def test_no_private_access_to_other_libraries():
    found = []
    for path in sorted((ROOT / "ppo_td").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if TRANSFORM_HOOKS.search(code):
                continue
            if any(p.search(code) for p in PRIVATE):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_private_access_check_finds_what_ppo_td_0_1_did():
    """The check above fails on the kinds of access ppo_td 0.1 had (so it is not vacuous)."""
    samples = ["vec = base._env", "collector._ppo_td_report_dir = report_dir",
               "from torchrl.objectives.utils import _clip_value_loss, distance_loss",
               "tensordict.base.importlib = cached", "if module._kwargs:",
               "    torch.autograd.backward = audited_backward"]
    for line in samples:
        assert any(p.search(line) for p in PRIVATE), line
    assert not any(p.search("self._steps.append(op)") for p in PRIVATE)
    assert not any(p.search("os._exit(code)") for p in PRIVATE) and any(p.search("os._wrap_close") for p in PRIVATE)
