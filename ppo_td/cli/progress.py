"""Training progress that reads well anywhere: a live bar on a terminal, plain lines everywhere else."""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from ppo_td.envs.info import UNASKED


class Progress:
    """Training callback: a tqdm bar when ``bar`` (and stderr is a terminal), else one summary line every
    ``every`` iterations (and at the last), without carriage returns, so a log file or CI output stays readable.

    A line reads ``iteration 10/97  frames 5,120/49,664  return 23.4  sps 9,870  elapsed 0.5 s``; the
    return is the mean of the episodes that ended in the last iteration that ended any (``-`` before the first).
    """

    def __init__(self, total_frames: int, iterations: int, initial: int = 0, bar: bool = True,
                 every: int | None = None, stream: TextIO | None = None, label: str = "return",
                 info_keys: tuple[str, ...] = ()) -> None:
        self.total_frames, self.iterations = total_frames, iterations
        self.info_keys = info_keys
        """``env.info_keys``: each one's mean over the last iteration's episodes that reported it, after the return
        (and ``is_success`` once an env reported it unasked)."""
        self.last_info: dict[str, float] = {}
        self.label = label
        """What the return is called: ``return``, or ``reward per agent`` for a multi-agent run."""
        self.stream = stream if stream is not None else sys.stdout
        self.every = every if every is not None else max(1, math.ceil(iterations / 20))
        if self.every < 1:
            raise ValueError(f"progress every={self.every} must be >= 1 iteration")
        self.last_return = float("nan")
        self.last_groups: dict[str, float] = {}
        """Several agent groups: each group's reward per agent, from the same iteration as ``last_return``."""
        self._bar = None
        if bar and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_frames, initial=initial, unit="frames", dynamic_ncols=True)

    def __call__(self, metrics: dict[str, Any], pipeline: Any = None) -> None:
        if not math.isnan(metrics["episode_return"]):
            self.last_return = metrics["episode_return"]
            self.last_groups = {k.partition("/")[2]: v for k, v in metrics.items() if k.startswith("episode_return/")}
        self.last_info.update({k: metrics[k] for k in (*self.info_keys, *UNASKED)
                               if not math.isnan(metrics.get(k, math.nan))})
        ret = ("-" if math.isnan(self.last_return) else
               f"{self.last_return:.3g}" if self.label != "return" else f"{self.last_return:.1f}")
        if self.last_groups:
            ret += " (" + ", ".join(f"{g} {v:.3g}" for g, v in self.last_groups.items()) + ")"
        shown = (*self.info_keys, *(k for k in UNASKED if k in self.last_info and k not in self.info_keys))
        ret += "".join(f"  {k} {self.last_info[k]:.3g}" if k in self.last_info else f"  {k} -" for k in shown)
        if self._bar is not None:
            self._bar.update(metrics["frames"] - self._bar.n)
            self._bar.set_postfix(ret=ret, sps=f"{metrics['sps']:.0f}", refresh=False)
            return
        it = metrics["iteration"]
        if it % self.every == 0 or it == self.iterations:
            print(f"iteration {it}/{self.iterations}  frames {metrics['frames']:,}/{self.total_frames:,}  "
                  f"{self.label} {ret}  sps {metrics['sps']:,.0f}  elapsed {metrics['time']:.1f} s",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
