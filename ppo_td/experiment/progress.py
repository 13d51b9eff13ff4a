"""Training progress that reads well anywhere: a live bar on a terminal, plain lines everywhere else."""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from ppo_td.envs.info import UNASKED

QUIET_SECONDS = 60.0
"""The longest a run without a bar stays silent: a line is printed at least this often (a long MuJoCo run's 20 lines
would otherwise come minutes apart)."""


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's ZMQ shell), read without importing IPython."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def live_display() -> bool:
    """Whether a live bar can show: stderr is a terminal, or a notebook shows it (stderr is still the kernel's
    stream: a run whose output goes to a file, as a tuner's trials do, gets lines)."""
    return sys.stderr.isatty() or (in_notebook() and type(sys.stderr).__name__ == "OutStream")


class Progress:
    """Training callback: with ``bar=True`` a tqdm bar where there is a live display (a terminal, a notebook:
    tqdm.auto's widget where ipywidgets is installed), else (and with ``bar='lines'``) one summary line every
    ``every`` iterations (and at the last, and at least once a minute: :data:`QUIET_SECONDS`), without carriage
    returns, so a log file or CI output stays readable; ``bar=False``: nothing.

    A line reads ``iteration 10/97  frames 5,120/49,664  return 23.4  sps 9,870  elapsed 0.5 s``; the
    return is the mean of the episodes that ended in the last iteration that ended any (``-`` before the first),
    then the last evaluation's mean return where the run evaluates during training (``eval 480.2``).
    """

    def __init__(self, total_frames: int, iterations: int, initial: int = 0, bar: bool | str = True,
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
        self.last_eval = float("nan")
        self.quiet_seconds = QUIET_SECONDS
        self._printed = time.monotonic()
        self._bar = None
        self.silent = bar is False
        """``bar=False``: no progress at all (lines written through :meth:`write` still show)."""
        if bar is True and live_display():
            import warnings

            with warnings.catch_warnings():  # tqdm.auto in a notebook without ipywidgets: its text bar, not a warning
                warnings.simplefilter("ignore")
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total_frames, initial=initial, unit="frames", dynamic_ncols=True)

    @property
    def live(self) -> bool:
        """Whether the bar shows (lines otherwise)."""
        return self._bar is not None

    def write(self, text: str) -> None:
        """A line for the user, above the bar where one shows (printed as it is otherwise)."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stdout)
        else:
            print(text, file=self.stream, flush=True)

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
            learning = metrics.get("selfplay_learning")  # team self-play: the group this iteration trained
            groups = getattr(getattr(pipeline, "selfplay", None), "groups", None)
            if learning is not None and groups:
                ret += f"  learning {groups[int(learning)]}"
        shown = (*self.info_keys, *(k for k in UNASKED if k in self.last_info and k not in self.info_keys))
        ret += "".join(f"  {k} {self.last_info[k]:.3g}" if k in self.last_info else f"  {k} -" for k in shown)
        if not math.isnan(metrics.get("eval_return", math.nan)):
            self.last_eval = metrics["eval_return"]
        if not math.isnan(self.last_eval):
            ret += f"  eval {self.last_eval:.1f}"
        if self._bar is not None:
            self._bar.update(metrics["frames"] - self._bar.n)
            self._bar.set_postfix(ret=ret, sps=f"{metrics['sps']:.0f}", refresh=False)
            return
        if self.silent:
            return
        it, now = metrics["iteration"], time.monotonic()
        if it % self.every == 0 or it == self.iterations or now - self._printed >= self.quiet_seconds:
            self._printed = now
            print(f"iteration {it}/{self.iterations}  frames {metrics['frames']:,}/{self.total_frames:,}  "
                  f"{self.label} {ret}  sps {metrics['sps']:,.0f}  elapsed {metrics['time']:.1f} s",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
