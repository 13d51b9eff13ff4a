"""What a run (``ppo-td train``, ``ppo_td.train``) and ``ppo-td eval`` print of an evaluation: its returns, and its
episodes cut at the step cap said as cut, never counted as returns."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppo_td.config import EnvConfig
    from ppo_td.training import Evaluation


def evaluation_start(env_config: EnvConfig, episodes: int, hows: Sequence[str], max_steps: int) -> str:
    """The line said as an evaluation starts (it may take a while): how many episodes, and where they are cut when
    ppo_td reads no time limit of the env (the env may still end them itself: a factory's own truncation)."""
    from ppo_td.envs import ends_episodes
    from ppo_td.training import step_cap  # torch and TorchRL: imported when an evaluation is due

    cap, own = step_cap(env_config, max_steps)
    kinds = " and ".join(f"{episodes:,} {how}" for how in hows)
    line = f"evaluating: {kinds} episodes"
    if not own and not ends_episodes(env_config):
        line += f", each cut at {cap:,} steps if still running"
    return line


def cut_note(evaluations: Sequence[Evaluation], hows: Sequence[str], flag: str) -> str | None:
    """One line where an evaluation cut episodes at its step cap (an env without a time limit ppo_td can read, or a
    policy that never finishes): how many, where, and how to change it; None where every episode ended (an env
    that ends its episodes by itself, however it does, gets no note)."""
    cut = [(ev, how) for ev, how in zip(evaluations, hows, strict=False) if ev.cut]
    if not cut:
        return None
    counts = " and ".join(f"{len(ev.cut)} of {ev.episodes} {how}" for ev, how in cut)
    return (f"note: {counts} evaluation episodes were still running at {cut[0][0].max_steps:,} steps and were cut "
            f"there, without a return (change where with {flag}; give the env a time limit with "
            "env.max_episode_steps, --env.max-episode-steps)")


def format_evaluation(ev: Evaluation, how: str = "deterministic", per_agent: bool = False) -> str:
    """``deterministic evaluation: mean +- std over N episodes`` (or ``sampled evaluation: ...``), with the
    episodes cut at the step cap said apart; ``per_agent`` (a multi-agent run, whose episode return is the reward
    per agent): ``... reward per agent: ...`` with three significant digits (such rewards are often near 1)."""
    head = f"{how} evaluation" + (", reward per agent" if per_agent else "")
    if not ev.returns:
        return (f"{head}: no episode ended: all {len(ev.cut)} were cut at {ev.max_steps:,} steps (reward over "
                f"those steps {_spread(ev.cut, per_agent)}; not an episode return)")
    line = f"{head}: {_spread(ev.returns, per_agent)} over {len(ev.returns)} episodes"
    if ev.groups:  # several agent groups: each one's own, as each is trained on its own
        line += " (" + ", ".join(f"{g} {_spread(v, per_agent)}" for g, v in ev.groups.items()) + ")"
    if ev.cut:
        line += f"; {len(ev.cut)} more cut at {ev.max_steps:,} steps, still running (no return)"
    return line


def _spread(values: list[float], per_agent: bool) -> str:
    """``mean +- std``, with as many decimals as the spread needs (two significant digits of the std, or of the
    mean when all are equal; at least one): Blackjack's -0.05 and -0.14 stay apart."""
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    if per_agent:
        return f"{mean:.3g} +- {std:.3g}"
    scale = std or abs(mean)
    decimals = 1 if scale == 0 or scale >= 1 else min(6, 1 - math.floor(math.log10(scale)))
    return f"{mean:.{decimals}f} +- {std:.{decimals}f}"
