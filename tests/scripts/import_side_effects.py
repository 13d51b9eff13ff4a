"""Print every change that importing ppo_td and all its submodules makes to torch, torchrl, tensordict,
numpy and Gymnasium: module attributes replaced, added or resized, Gymnasium registrations, global settings.

Run in a fresh process: ``python import_side_effects.py MODULE ...`` imports the listed third-party modules
first (so their own lazy imports are not counted), snapshots, imports ppo_td, snapshots again.
"""

import importlib
import json
import pkgutil
import sys

THIRD_PARTY = ("torch", "torchrl", "tensordict", "gymnasium", "numpy")


def snapshot() -> dict:
    state = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in THIRD_PARTY:
            continue
        attrs = {}
        for key, value in list(vars(module).items()):
            size = len(value) if isinstance(value, (dict, list, set, tuple)) else None
            attrs[key] = (id(value), size)
        state[name] = attrs
    return state


def settings() -> dict:
    import gymnasium as gym
    import torch

    return {"registry": sorted(gym.registry), "dtype": str(torch.get_default_dtype()),
            "threads": torch.get_num_threads(), "grad": torch.is_grad_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled()}


for name in sys.argv[1:]:
    importlib.import_module(name)
before, before_settings = snapshot(), settings()
import ppo_td  # noqa: E402

for info in pkgutil.walk_packages(ppo_td.__path__, "ppo_td."):
    if not info.name.endswith(".__main__"):  # the ppo-td command itself
        importlib.import_module(info.name)
after, after_settings = snapshot(), settings()
changes = []
for module, attrs in before.items():
    now = after[module]
    for key, value in attrs.items():
        if now.get(key) != value:
            changes.append(f"{module}.{key} changed")
    for key in now.keys() - attrs.keys():
        if not isinstance(vars(sys.modules[module])[key], type(sys)):  # a submodule imported later is no change
            changes.append(f"{module}.{key} added")
registered = sorted(set(after_settings.pop("registry")) - set(before_settings.pop("registry")))
if registered:
    changes.append(f"Gymnasium env ids registered: {registered}")
for key, value in before_settings.items():
    if after_settings[key] != value:
        changes.append(f"{key}: {value} -> {after_settings[key]}")
print(json.dumps({"changes": changes, "modules": sorted(m for m in sys.modules if m.split(".")[0] in THIRD_PARTY)}))
