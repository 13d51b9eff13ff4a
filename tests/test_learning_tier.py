"""The learning tier (``pytest -m learning``, outside CI: about half an hour on one core): CartPole, Pendulum and
Acrobot on their presets at the returns benchmark's budgets, seeds 1-3, each run's mean of its last 100 training
episodes checked against the band the result store recorded for the same env, preset and budget
(``benchmarks/results/returns/runs.jsonl``, ``python -m benchmarks returns classic``).

The band's floor: the lowest recorded seed, less the larger of three standard deviations over the recorded seeds
and 5% of the span from a random policy to the best published PPO score (so a run that still solves passes, a
run that learns less does not). Each run is a ``benchmarks.common.worker`` process, as the benchmark's.
"""

import statistics

import pytest

from benchmarks.returns import run as returns_run
from benchmarks.returns import suites
from benchmarks.returns.report import best_score, random_score
from benchmarks.returns.suites import STORE, SUITES

pytestmark = [pytest.mark.learning, pytest.mark.slow]

TIER = [t for t in SUITES["classic"] if t.env_id in ("CartPole-v1", "Pendulum-v1", "Acrobot-v1")]


def band_floor(task: suites.Task) -> tuple[float, list[float]]:
    """The lowest score a rerun may reach for ``task``, and the recorded ppo_td scores it comes from."""
    recorded = [r["last100"] for r in suites.read_store(STORE)  # runs of the preset as it is now
                if r["library"] == "ppo_td" and r["key"] == suites.key_of(task, "ppo_td", r["seed"])]
    if len(recorded) < 3:
        pytest.fail(f"the store holds {len(recorded)} ppo_td runs of {task.env_id} on preset {task.settings}; run "
                    f"python -m benchmarks returns classic --envs {task.env_id} first")
    best, low = best_score(task.env_id), random_score(task, STORE)
    span = best[0] - low if best is not None and low is not None else abs(statistics.fmean(recorded))
    return min(recorded) - max(3 * statistics.pstdev(recorded), 0.05 * span), recorded


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("task", TIER, ids=[t.env_id for t in TIER])
def test_a_run_lands_in_its_recorded_band(task, seed):
    floor, recorded = band_floor(task)
    run = returns_run.run_one("learning", task, "ppo_td", seed, timeout=3600)
    assert run["last100"] >= floor, (f"{task.env_id} seed {seed}: last 100 episodes {run['last100']:.1f}, below the "
                                     f"recorded band's floor {floor:.1f} (recorded: {sorted(recorded)})")
