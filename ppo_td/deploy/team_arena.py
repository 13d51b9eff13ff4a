"""``ppo-td arena`` on a team game: trained runs' agent groups played against each other's.

A team game (several agent groups acting at once: VMAS or MPE ``simple_tag``'s adversaries and agent) is played
with every assignment of the runs to the groups, each run's own team included, on the same seeded episodes: with
runs A and B and the groups adversary and agent, A's adversaries against A's agent, A's against B's, B's against A's
and B's against B's.

A turn-based game names a winner, which :mod:`ppo_td.deploy.arena` rates with OpenSkill. A team game's rewards often
do not: ``simple_tag``'s adversaries are rewarded for their catches and its agent punished for them and for leaving
the field, so one side's return says nothing of how the other side did against others. So teams are compared
within a group: a group's table gives its mean reward per agent and episode in each assignment, and each run's mean
over every opponent it met, with a 95% interval (a normal one over the episodes). Two runs' numbers in one group
come from the same opponents and the same episodes, so they compare; numbers of different groups do not.

What it shares with the turn-based arena: the command and its ``--episodes``/``--seed``/``--mode``/``--json``, run
folders or checkpoints as players, and Ctrl-C keeping what was played. Not shared: OpenSkill ratings (nothing names
a winner to rate) and anchors (a scripted team would be one per game).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tensordict.nn import TensorDictSequential

from ppo_td import keys
from ppo_td.models.multiagent import team_members
from ppo_td.training.evaluation import evaluate

TEAM_ONLY = ("trained a team game: its arena plays the runs' groups against each other, without anchors or rating "
             "curves (drop --anchors and --plot; docs/games.md)")
"""Why a team game's runs refuse the turn-based arena's anchors and rating curves (said after the run's name)."""


@dataclasses.dataclass(frozen=True)
class Match:
    """One assignment's episodes: ``players[k]`` the run (an index into the arena's runs) playing the ``k``-th group,
    and each group's reward per agent in every episode."""

    players: tuple[int, ...]
    returns: dict[str, list[float]]


@dataclasses.dataclass(frozen=True)
class Standing:
    """A run's results in one group over every match it played that group: the mean reward per agent and
    episode, its 95% interval, the episodes."""

    run: str
    group: str
    mean: float
    low: float
    high: float
    episodes: int


def normal_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of ``values`` and its normal 95% interval (nan for fewer than two)."""
    n = len(values)
    mean = float(np.mean(values)) if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan
    half = 1.959964 * float(np.std(values, ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


class TeamArenaInterrupted(KeyboardInterrupt):
    """Ctrl-C during a team arena: ``result`` holds the matches played before it."""

    def __init__(self, result: TeamArenaResult, signum: int = 2) -> None:
        super().__init__(f"stopped after {len(result.matches)} of {result.planned} matches")
        self.result, self.signum = result, signum


@dataclasses.dataclass
class TeamArenaResult:
    """What a team arena played: its ``runs`` (names), the env's ``groups``, the ``matches`` in the order played,
    ``planned`` matches in all, ``episodes`` each."""

    runs: list[str]
    groups: list[str]
    matches: list[Match]
    planned: int
    episodes: int
    env_id: str = ""
    sampled: bool = True

    def standings(self, group: str) -> list[Standing]:
        """Each run's results in ``group`` over every match it played it, the best mean first."""
        k = self.groups.index(group)
        out = []
        for index, run in enumerate(self.runs):
            values = [v for m in self.matches if m.players[k] == index for v in m.returns[group]]
            out.append(Standing(run, group, *normal_interval(values), len(values)))
        return sorted(out, key=lambda s: -s.mean if not math.isnan(s.mean) else math.inf)

    def table(self) -> str:
        """Every match's mean per group, then each group's standings, as text."""
        mode = "sampled from each policy" if self.sampled else "each policy's mode"
        lines = [f"{self.env_id}: {len(self.matches)} of {self.planned} matches played, {self.episodes} episodes "
                 f"each ({mode}); reward per agent and episode, mean [95% interval]", ""]
        for match in self.matches:
            who = ", ".join(f"{g}: {self.runs[i]}" for g, i in zip(self.groups, match.players, strict=True))
            cells = "   ".join("{}: {:.2f} [{:.2f}, {:.2f}]".format(g, *normal_interval(match.returns[g]))
                               for g in self.groups)
            lines.append(f"{who}\n    {cells}")
        for group in self.groups:
            lines += ["", f"{group}: each run playing it against every run's other groups (comparable within "
                      f"{group} only)", "rank  run                                       mean   [95% interval]  "
                      "episodes"]
            for rank, s in enumerate(self.standings(group), 1):
                lines.append(f"{rank:>4}  {s.run[:38]:38}  {s.mean:7.2f}  [{s.low:.2f}, {s.high:.2f}]  "
                             f"{s.episodes:>8}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready values: runs, groups, matches, standings."""
        return {"env_id": self.env_id, "sampled": self.sampled, "planned": self.planned, "episodes": self.episodes,
                "runs": list(self.runs), "groups": list(self.groups),
                "matches": [{"players": {g: self.runs[i] for g, i in zip(self.groups, m.players, strict=True)},
                             "returns": m.returns} for m in self.matches],
                "standings": {g: [dataclasses.asdict(s) for s in self.standings(g)] for g in self.groups}}


def _load(source: str, which: str) -> tuple[str, Any]:
    """A run's name and what evaluation takes of it (config, actor), refusing what the arena cannot play."""
    from ppo_td.persist import checkpoint_in, load_for_evaluation

    path = checkpoint_in(source, which)
    loaded = load_for_evaluation(path)
    env = loaded.config.env
    if loaded.obs_stats is not None or env.transforms or env.wrappers:
        raise ValueError(f"{source} trained with observation normalization, env.transforms or env.wrappers: the "
                         "team arena gives every group the env's own observations (each run's statistics would "
                         "differ)")
    folder = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    name = folder.name if path.name == "checkpoint.pt" else f"{folder.name}/{path.stem}"
    return name, loaded


def is_team_run(source: str | os.PathLike, which: str = "last") -> bool:
    """Whether ``source`` (a run folder or checkpoint) trained a multi-agent env: the team arena plays it."""
    from ppo_td.persist import checkpoint_config, checkpoint_in, load_checkpoint

    return checkpoint_config(load_checkpoint(checkpoint_in(source, which))).env.multiagent


def team_arena(players: Sequence[str | os.PathLike], *, episodes: int = 20, sampled: bool = True, seed: int = 0,
               which: str = "last", on_match: Callable[[int, int], None] | None = None) -> TeamArenaResult:
    """Every assignment of ``players`` (run folders or checkpoints of one team game) to its agent groups, each
    played for ``episodes`` episodes seeded by ``seed`` (the same episodes for every assignment); see the module.
    ``on_match(done, planned)`` after each match.

    One run alone plays its own team (its evaluation on these episodes).

    Raises:
        ValueError: runs of different envs or groups, a run given twice, an env with one group, observation
            normalization or transforms in a run, ``episodes`` < 1.
        TeamArenaInterrupted: Ctrl-C; its ``result`` holds the matches played.
    """
    from ppo_td.persist import checkpoint_in

    if episodes < 1:
        raise ValueError(f"episodes={episodes}: give the episodes every match plays (>= 1)")
    sources = [str(players)] if isinstance(players, (str, os.PathLike)) else [str(p) for p in players]
    if not sources:
        raise ValueError("the arena needs at least one run folder or checkpoint")
    seen: dict[tuple[int, int], str] = {}
    for source in sources:  # a run folder's checkpoint.pt is a link to its newest checkpoints/iter_N.pt
        stat = checkpoint_in(source, which).stat()
        if (stat.st_dev, stat.st_ino) in seen:
            raise ValueError(f"{seen[stat.st_dev, stat.st_ino]} and {source} are the same checkpoint: give each run "
                             "once (a run given twice would count twice in the others' means)")
        seen[stat.st_dev, stat.st_ino] = source
    loaded = [_load(source, which) for source in sources]
    first = loaded[0][1].config.env
    actor = loaded[0][1].actor
    groups = [k[0] for k in actor.out_keys if isinstance(k, tuple) and k[-1] == keys.ACTION]
    if len(groups) < 2:
        raise ValueError(f"{sources[0]} trained {first.env_id}, whose agents form one group: the team arena plays "
                         "groups against each other (use ppo-td eval for one group)")
    for (_, other), source in zip(loaded[1:], sources[1:], strict=True):
        env = other.config.env
        if (env.env_id, env.suite, sorted(env.kwargs), env.groups, env.max_episode_steps) != (
                first.env_id, first.suite, sorted(first.kwargs), first.groups, first.max_episode_steps):
            raise ValueError(f"{source} trained {env.env_id} {list(env.kwargs)} (episodes of {env.max_episode_steps} "
                             f"steps), the arena's first run {first.env_id} {list(first.kwargs)} (of "
                             f"{first.max_episode_steps}): every run must play the same game")
    names = [name for name, _ in loaded]
    if len(set(names)) < len(names):
        names = sources
    members = [team_members(item.actor, groups, keys.ACTION) for _, item in loaded]
    assignments = list(itertools.product(range(len(loaded)), repeat=len(groups)))
    result = TeamArenaResult(names, groups, [], planned=len(assignments), episodes=episodes,
                             env_id=first.env_id, sampled=sampled)
    try:
        for players_of in assignments:
            team = TensorDictSequential(*(members[run][g] for g, run in zip(groups, players_of, strict=True)))
            played = evaluate(team, first, episodes, seed, sampled=sampled)
            result.matches.append(Match(players_of, {g: list(played.groups.get(g, [])) for g in groups}))
            if on_match is not None:
                on_match(len(result.matches), result.planned)
    except KeyboardInterrupt as err:
        raise TeamArenaInterrupted(result, getattr(err, "signum", 2)) from err
    return result
