"""The returns benchmark's suites and store, below its runner (``run.py``) and its report (``report.py``), which both
read them: each suite's envs (:class:`Task`: the id, the ppo_td preset whose settings it trains on, the budget), the
seeds, the published PPO numbers (:data:`ANCHORS`, :data:`BEST`), the config a task trains and a run's key in the
store (:func:`config_of`, :func:`key_of`), and the store's format (:data:`STORE`, :func:`read_store`,
:func:`compact`, :func:`whole_evaluation`). It imports neither the runner nor the report."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "benchmarks" / "results" / "returns"


@dataclasses.dataclass(frozen=True)
class Task:
    """One env of a suite: its id, where its settings come from, its frame budget."""

    env_id: str
    settings: str
    """The ppo_td preset it trains with (each says where its settings come from)."""
    frames: int
    kwargs: tuple[str, ...] = ()
    max_episode_steps: int | None = None
    sb3: bool = True
    """Whether Stable-Baselines3 runs beside it (not for envs it cannot take as they are, e.g. MiniGrid's Dict)."""
    note: str = ""


SUITES: dict[str, list[Task]] = {
    "classic": [
        Task("CartPole-v1", "cartpole-zoo", 100_000, note="RL Zoo anneals the clip range (lin_0.2); constant here"),
        Task("Acrobot-v1", "acrobot", 1_000_000),
        Task("MountainCar-v0", "mountaincar", 1_000_000),
        Task("MountainCarContinuous-v0", "mountaincar-continuous", 20_000, note="gSDE, as RL Zoo's entry"),
        Task("Pendulum-v1", "pendulum", 100_352, note="ppo_td's pendulum preset (RL Zoo's uses gSDE)"),
    ],
    "box2d": [
        Task("LunarLander-v3", "lunarlander", 1_000_000),
        Task("LunarLanderContinuous-v3", "lunarlander-continuous", 1_000_000),
        Task("BipedalWalker-v3", "bipedalwalker", 2_000_000, note="RL Zoo trains 5M steps; run at 2M here"),
    ],
    "mujoco": [
        Task("Hopper-v5", "hopper", 1_000_000),
        Task("Walker2d-v5", "walker2d", 1_000_000),
        Task("HalfCheetah-v5", "halfcheetah", 1_000_000),
        Task("Ant-v5", "ant", 1_000_000, note="v4's observation (the ant preset: no contact forces)"),
        Task("Swimmer-v5", "swimmer", 1_000_000, note="RL Zoo's Swimmer-v4 entry on v5"),
    ],
    "minatar": [  # MinAtar's 10x10 games at 10M frames, PureJaxRL's budget (on one core about 7.5 min a Breakout
        # run, 14 a SpaceInvaders one, 2026-11-29); no PPO table is published for them (MinAtar's paper reports DQN
        # and AC(lambda) curves at 5M frames)
        Task("MinAtar/Breakout-v1", "minatar", 10_000_000, sb3=False),
        Task("MinAtar/SpaceInvaders-v1", "minatar", 10_000_000, sb3=False),
    ],
    "toytext": [  # CleanRL's ppo.py settings (the cleanrl preset), CliffWalking on the settings `ppo-td tune` found
        # for it (the cliffwalking preset, at the 200k frames it was tuned at); no published PPO numbers exist for these
        Task("Taxi-v4", "cleanrl", 500_000, sb3=False),
        Task("FrozenLake8x8-v1", "cleanrl", 500_000, sb3=False, note="slippery, Gymnasium's 200-step limit"),
        Task("CliffWalking-v1", "cliffwalking", 200_000, sb3=False,
             note="tuned on the cleanrl preset (docs/tuning.md); a 500-step limit (none is registered)"),
        Task("Blackjack-v1", "cleanrl", 500_000, sb3=False),
    ],
    "minigrid": [  # RL Zoo's entry: the 7x7x3 image and the mission flattened (FlatObsWrapper), normalized; SB3
        # takes the same wrapped env (benchmarks.common.worker builds it as ppo_td's user sees it)
        Task("minigrid:MiniGrid-Empty-Random-5x5-v0", "minigrid", 100_000),
        Task("minigrid:MiniGrid-DoorKey-5x5-v0", "minigrid", 100_000),
    ],
    "games": [  # PettingZoo classic games against a uniformly random legal player (ppo_td's TurnBased: the
        # learner's seat drawn each game), on SB3's PPO defaults (the generic preset); SB3 is sb3-contrib's
        # MaskablePPO on the same game (the PettingZoo tutorial's library), the board flattened. A return is
        # +1 a win, 0 a draw, -1 a loss. Win rates against a heuristic, self-play, ratings: python -m benchmarks games
        Task("pettingzoo.classic.connect_four_v3:env", "generic", 200_000,
             note="the PettingZoo tutorial's MaskablePPO won 0.86 of games against random at 20k steps"),
        Task("pettingzoo.classic.tictactoe_v3:env", "generic", 500_000),
    ],
    "multiagent": [  # reward per agent; BenchMARL is the peer here (python -m benchmarks multiagent)
        Task("navigation", "vmas-navigation", 600_000, sb3=False),
        Task("balance", "vmas-light", 2_048_000, sb3=False, note="2M frames: at 409,600 one seed of three learned"),
        Task("mpe2.simple_spread_v3", "mpe-spread", 400_000, sb3=False),
    ],
}
"""The suites: each env with its settings and budget. MuJoCo at 1M frames on ppo_td's presets (CleanRL's
``ppo_continuous_action.py`` settings, the PPO paper's); Humanoid and Atari are left out of these suites on two
cores (Atari at 10M frames is about a day a seed here); MinAtar stands in for Atari, at 10M frames."""

DEFAULT_SEEDS = [1, 2, 3, 4, 5]
SEEDS = {"mujoco": [1, 2, 3], "multiagent": [1, 2, 3], "games": [1, 2, 3]}
"""Fewer seeds where a suite's budget demands it, on one core a run: MuJoCo's 1M frames take 9-18 min for ppo_td and
13-26 min for SB3 (the stored runs of 2026-11-28); VMAS navigation's 600k frames 22 min (2026-11-29); tic-tac-toe's
500k frames 5-9 min (python -m benchmarks games, 2026-12-06)."""

ANCHORS: dict[str, list[tuple[str, float, float | None, str]]] = {
    # env: [(source, mean, std or None, what)], copied from the sources named
    "CartPole-v1": [("CleanRL ppo.py", 490.04, 6.12, "500k steps, last 100 train episodes, 3 seeds"),
                    ("RL Zoo", 500.0, 0.0, "100k steps, 1 seed, deterministic eval")],
    "Acrobot-v1": [("CleanRL ppo.py", -86.36, 1.32, "500k steps, last 100 train episodes, 3 seeds"),
                   ("RL Zoo", -73.506, 18.201, "1M steps, 1 seed, deterministic eval")],
    "MountainCar-v0": [("CleanRL ppo.py", -200.0, 0.0, "500k steps, last 100 train episodes, 3 seeds"),
                       ("RL Zoo", -110.423, 19.473, "1M steps, 1 seed, deterministic eval")],
    "MountainCarContinuous-v0": [("RL Zoo", 88.343, 2.572, "20k steps, 1 seed, deterministic eval, gSDE")],
    "Pendulum-v1": [("RL Zoo", -172.225, 104.159, "100k steps, 1 seed, deterministic eval, gSDE"),
                    ("CleanRL (8M)", -1141.98, 135.55, "8M steps, last 100 train episodes")],
    "LunarLander-v3": [("RL Zoo (v2)", 242.119, 31.823, "1M steps, 1 seed, deterministic eval")],
    "LunarLanderContinuous-v3": [("RL Zoo (v2)", 270.863, 32.072, "1M steps, 1 seed, deterministic eval")],
    "BipedalWalker-v3": [("RL Zoo", 287.939, 2.448, "5M steps, 1 seed, deterministic eval"),
                         ("CleanRL (8M)", 172.12, 96.05, "8M steps, last 100 train episodes")],
    "Hopper-v5": [("CleanRL (v4)", 2051.80, 313.94, "1M steps, last 100 train episodes, 3 seeds"),
                  ("RL Zoo (v3)", 2410.435, 10.026, "1M steps, 1 seed, deterministic eval"),
                  ("OpenAI baselines ppo2 (v2)", 2316.16, None, "1M steps, 6 seeds")],
    "Walker2d-v5": [("CleanRL (v4)", 2890.97, 231.40, "1M steps, last 100 train episodes, 3 seeds"),
                    ("RL Zoo (v3)", 3478.798, 821.708, "1M steps, 1 seed, deterministic eval"),
                    ("OpenAI baselines ppo2 (v2)", 3424.95, None, "1M steps, 6 seeds")],
    "HalfCheetah-v5": [("CleanRL (v4)", 2905.85, 1129.37, "1M steps, last 100 train episodes, 3 seeds"),
                       ("RL Zoo (v3)", 5819.099, 663.530, "1M steps, 1 seed, deterministic eval"),
                       ("OpenAI baselines ppo2 (v2)", 1668.58, None, "1M steps, 6 seeds")],
    "Ant-v5": [("RL Zoo (v3)", 1327.158, 451.577, "1M steps, 1 seed, deterministic eval"),
               ("CleanRL (v4, 8M)", 1824.17, 905.78, "8M steps, last 100 train episodes")],
    "Swimmer-v5": [("RL Zoo (v3)", 281.561, 9.671, "1M steps, 1 seed, deterministic eval (before its tuning)"),
                   ("OpenAI baselines ppo2 (v2)", 111.19, None, "1M steps, 6 seeds")],
    "minigrid:MiniGrid-Empty-Random-5x5-v0": [("RL Zoo", 0.968, 0.013, "100k steps, 1 seed, FlatObsWrapper")],
    "minigrid:MiniGrid-DoorKey-5x5-v0": [("RL Zoo", 0.964, 0.006, "100k steps, 1 seed, FlatObsWrapper")],
}
"""Published PPO numbers. CleanRL: ``docs/rl-algorithms/ppo.md`` (classic control at pr-424; MuJoCo v4 at commit
5e49edd5) and ``rpo.md`` (8M columns); RL Zoo: ``benchmark.md`` (one agent per env, its std over evaluation
episodes, not seeds); OpenAI baselines: ``benchmarks_mujoco1M.htm`` (ppo2). Where the version differs from the run's
env, the source says which it used."""

BEST = {"FrozenLake8x8-v1": (0.85, "Gymnasium's solved threshold"), "Taxi-v4": (8.0, "Gymnasium's solved threshold"),
        "CliffWalking-v1": (-13.0, "the shortest path"),
        "pettingzoo.classic.connect_four_v3:env": (1.0, "every game won"),
        "pettingzoo.classic.tictactoe_v3:env": (1.0, "every game won")}
"""A best score where no PPO number is published: Gymnasium's ``reward_threshold`` for the id (FrozenLake8x8-v1
0.85, Taxi-v4 8: what it registers as solved, not an optimum), the shortest path (CliffWalking, 13 steps at -1), or
a game's most (every game won: no published PPO return against a random player)."""


def settings_config(settings: str) -> Any:
    """The config a settings label names: a preset, or a preset with fields changed, ``PRESET+section.field=VALUE+...``
    (an ablation: ``mountaincar-continuous+model.orthogonal_init=True``; each value a Python literal).

    Raises:
        ValueError: an unknown preset, field, or a value the field refuses (the config's own message).
    """
    import ast

    from ppo_td.presets import get_preset

    preset, *changes = settings.split("+")
    config = get_preset(preset)
    fields: dict[str, dict[str, Any]] = {}  # section ("" for the top) -> its changed fields, set together (a field
    for change in changes:                  # checked against another, such as optim.desired_kl and anneal_lr)
        path, sep, text = change.partition("=")
        *sections, name = path.split(".")
        if not sep or len(sections) > 1:
            raise ValueError(f"--settings {settings}: {change!r} is not section.field=VALUE (or field=VALUE)")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        fields.setdefault(sections[0] if sections else "", {})[name] = value
    parts = {section: dataclasses.replace(getattr(config, section), **changed)
             for section, changed in fields.items() if section}
    return dataclasses.replace(config, **fields.get("", {}), **parts)


def config_of(task: Task) -> Any:
    """The ppo_td config ``task`` trains (both libraries): its preset (:func:`settings_config`: maybe with fields
    changed), on its env, at its budget; eager unless the settings set compile (every stored run trained eager, and
    compile='auto' would compile the long ones: ``benchmarks paired --compile`` measures compile)."""
    config = settings_config(task.settings)
    config = dataclasses.replace(config, compile=False) if config.compile == "auto" else config
    env = config.env if config.env.multiagent else dataclasses.replace(config.env, env_id=task.env_id)
    env = dataclasses.replace(env, kwargs=task.kwargs or env.kwargs,
                              max_episode_steps=task.max_episode_steps or env.max_episode_steps)
    return dataclasses.replace(config, env=env, total_frames=task.frames)


def with_settings(task: Task, settings: str) -> Task:
    """``task`` trained on the preset ``settings`` instead of its own (same env, kwargs, limit and budget)."""
    return dataclasses.replace(task, settings=settings, note=f"on the {settings} preset (the suite's: {task.settings})")


def key_of(task: Task, library: str, seed: int) -> str:
    """A run's identity in the store: the library, the env, the preset, the whole config it trains (a digest of
    ``identity_dict``: a preset changed since is run again, a field added to the config since at its default is
    not a change), the seed."""
    return f"{library}|{task.env_id}|{task.settings}|{config_digest(config_of(task))}|{seed}"


def config_digest(config: Any) -> str:
    """What identifies a whole config in a store: a digest of its ``identity_dict`` (a field added since at its
    default is not a change)."""
    from ppo_td.config import identity_dict

    return hashlib.sha1(json.dumps(identity_dict(config), sort_keys=True).encode()).hexdigest()[:12]


EVAL_EPISODES = 10
"""Deterministic evaluation episodes after each run."""


def whole_evaluation(run: dict[str, Any]) -> bool:
    """Whether a stored run says what became of each of its evaluation episodes: every one ended, or the ones cut at
    the step cap are recorded (``eval_cut``, with the reward each reached). A run stored before ``eval_cut`` existed
    with fewer returns than episodes left its cut ones nowhere: it is run again (the report reads the latest run of
    a key)."""
    return "eval_cut" in run or run["library"] != "ppo_td" or len(run["eval_returns"]) >= EVAL_EPISODES


def read_store(store: Path) -> list[dict[str, Any]]:
    """The runs in the store (a line cut short by a crash is left out)."""
    path = store / "runs.jsonl"
    if not path.exists():
        return []
    runs = []
    for line in path.read_text().splitlines():
        try:
            runs.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return runs



CURVE_POINTS = 2_000
"""A run with more training episodes keeps its curve, not each episode: the mean of the last 100 episodes at
2,000 evenly spaced episodes (the last included), what the report plots (a toy-text run ends 100,000+ episodes)."""


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``episodes`` ([frames, seconds, return] each) replaced by ``curve`` ([frames, seconds, mean of
    the last 100 returns] at :data:`CURVE_POINTS` episodes) and ``episodes_total``, where it has more episodes."""
    episodes = record.get("episodes")
    if episodes is None or len(episodes) <= CURVE_POINTS:
        return record
    n = len(episodes)
    sums = [0.0]
    for e in episodes:
        sums.append(sums[-1] + e[2])
    picks = sorted({round(i * (n - 1) / (CURVE_POINTS - 1)) for i in range(CURVE_POINTS)})
    curve = [[episodes[i][0], episodes[i][1], round((sums[i + 1] - sums[max(0, i + 1 - 100)]) / min(100, i + 1), 4)]
             for i in picks]
    out = {k: v for k, v in record.items() if k != "episodes"}
    return {**out, "curve": curve, "episodes_total": n}
