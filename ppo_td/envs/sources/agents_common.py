"""What the multi-agent sources share: the suite's module imported with the way to install it, and ``env.kwargs``
checked against what ppo_td sets itself."""

from __future__ import annotations

import importlib.util
from typing import Any

from ppo_td.config import EnvConfig
from ppo_td.envs.imports import env_kwargs_of, import_from_cwd

INSTALL = {"vmas": "pip install vmas", "pettingzoo": "pip install pettingzoo mpe2"}

SET_BY_PPO_TD = {"vmas": ("num_envs", "max_steps", "seed", "device"), "pettingzoo": ()}


def checked_kwargs(config: EnvConfig) -> dict[str, Any]:
    kwargs = env_kwargs_of(config)
    taken = [k for k in SET_BY_PPO_TD[config.suite] if k in kwargs]
    if taken:
        raise ValueError(f"env.kwargs sets {taken}, which ppo_td sets for env.suite={config.suite!r}: use "
                         "env.num_envs, env.max_episode_steps, seed and env.device instead")
    return kwargs


def import_suite(suite: str, module: str) -> Any:
    try:
        return import_from_cwd(module)  # a module next to the user's script too, as Gymnasium's module:EnvId
    except ModuleNotFoundError as err:
        if err.name is not None and module.startswith(err.name.split(".")[0]) and err.name.split(".")[0] in (
                "vmas", "pettingzoo", "mpe2"):
            raise ValueError(f"env.suite={suite!r} needs {err.name.split('.')[0]}: {INSTALL[suite]} "
                             "(or pip install -e '.[multiagent]')") from err
        top = (err.name or "").split(".")[0]
        if top and not module.startswith(top) and importlib.util.find_spec(module.split(".")[0]) is not None:
            # the env's module exists; a library it imports does not (PettingZoo's butterfly envs need pymunk)
            raise ValueError(f"env.env_id={module!r} needs {top}, which is not installed: pip install {top} (the "
                             "multiagent extra installs pymunk, which PettingZoo's butterfly envs need)") from err
        raise ValueError(f"env.env_id={module!r} with env.suite={suite!r}: no module {err.name!r} (give an "
                         "importable module with a parallel_env function, e.g. mpe2.simple_spread_v3)") from err
