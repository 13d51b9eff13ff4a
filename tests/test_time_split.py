"""``python -m benchmarks time_split``: the clocks sit on the run's own parts (each part measured, not left at 0, and
none counted twice), the floors are measured beside it, and bad suites are refused."""

import pytest
import torch

from benchmarks.returns import time_split
from benchmarks.returns.suites import SUITES, Task

torch.set_num_threads(1)


def test_every_part_of_a_fast_path_run_is_clocked_once(monkeypatch):
    monkeypatch.setitem(SUITES, "tiny", [Task("CartPole-v1", "cartpole", 2048)])
    row = time_split.one_env(SUITES["tiny"][0], frames=2048)
    parts = row["parts"]
    for name in ("policy", "env step", "resets", "GAE", "forward", "backward + clip", "Adam"):
        assert parts[name] > 0, name  # the clock found the part it wraps
    # the clocks inside each half count no more than the half (the rest of each is what is left, not negative), and
    # the loop's own time is the little the two halves leave of the training time
    assert parts["collection other"] >= 0 and parts["update other"] >= 0
    assert 0 <= parts["loop"] < 0.1 * row["us_per_frame"]
    assert row["frames"] >= 2048 and row["frames"] % row["frames_per_batch"] == 0
    assert row["env_floor"] > 0 and row["update_floor_eager"] > 0
    assert row["update_floor"] <= row["update_floor_eager"]
    assert row["run_over_floors"] == pytest.approx(row["us_per_frame"] / (row["env_floor"] + row["update_floor"]))
    assert row["evaluation_seconds"] > 0 and row["evaluation_episodes"] == 10
    assert time_split.table([row])[2].startswith("| CartPole-v1 | ")


def test_a_game_is_stepped_with_legal_random_moves_for_its_floor():
    """The env floor of a masked game: each copy's action drawn among its legal moves (a game would end on an
    illegal one), every legal move drawn in time, the ended copies reset by reset_mask as ppo_td's collector does."""
    import gymnasium as gym
    import numpy as np

    from benchmarks.common.floors import random_stepper

    class Board:  # 3 copies, 4 moves; each step makes a random move illegal; a copy ends every 5th step
        action_space = gym.spaces.MultiDiscrete([4, 4, 4])

        def __init__(self):
            self.rng, self.t, self.drawn, self.resets = np.random.default_rng(1), 0, set(), 0

        def _observation(self):
            self.mask = self.rng.random((3, 4)) > 0.5
            self.mask[np.arange(3), self.rng.integers(4, size=3)] = True
            return {"observation": np.zeros((3, 2)), "action_mask": self.mask.astype(np.int8)}

        def reset(self, seed=None, options=None):
            self.resets += options is not None and bool(options["reset_mask"].any())
            return self._observation(), {}

        def step(self, action):
            assert self.mask[np.arange(3), action].all(), (self.mask, action)
            self.drawn.update(int(a) for a in action)
            self.t += 1
            ended = np.array([self.t % 5 == 0, False, False])
            return self._observation(), np.zeros(3), ended, np.zeros(3, bool), {}

    board = Board()
    step = random_stepper(board, seed=0)
    for _ in range(100):
        step()
    assert board.drawn == {0, 1, 2, 3} and board.resets == 20


def test_suites_without_the_fast_collector_or_unknown_envs_are_refused(capsys):
    with pytest.raises(SystemExit):
        time_split.main(["multiagent"])
    assert "multi-agent runs have another collector" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        time_split.main(["classic", "--envs", "Hopper-v5"])
    assert "['Hopper-v5']: not in ['classic']" in capsys.readouterr().err
