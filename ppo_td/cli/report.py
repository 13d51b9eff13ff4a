"""What ``ppo-td train`` and ``ppo-td eval`` print of an evaluation: its returns, and its episodes cut at the
step cap said as cut, never counted as returns."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from ppo_td.config import EnvConfig

if TYPE_CHECKING:
    from ppo_td.training import Evaluation


def cap_note(env_config: EnvConfig, max_steps: int, flag: str) -> str | None:
    """One line saying where evaluation episodes are cut, for an env without a time limit of its own (None for
    one with a limit: its episodes end by themselves)."""
    from ppo_td.envs import ends_episodes
    from ppo_td.training import step_cap  # torch and TorchRL: imported when an evaluation is due

    cap, own = step_cap(env_config, max_steps)
    if own or ends_episodes(env_config):  # a factory's env with a TimeLimit ppo_td cannot read: it ends them
        return None
    return (f"note: {env_config.env_id} has no time limit: evaluation episodes are cut at {cap:,} steps ({flag} N "
            "to change it; --env.max-episode-steps N gives the env a limit)")


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
