"""Evaluation runs in rounds of a bounded number of env copies, so memory does not grow with the episodes asked
for; the count asked for is capped, and refused above the cap in one line."""

import itertools

import pytest
import torch

from conftest import small_config
from ppo_td.cli import main
from ppo_td.config import MAX_EVAL_EPISODES, TrainConfig
from ppo_td.training import build_pipeline, evaluate
from ppo_td.training import evaluation as evaluation_module


def test_more_episodes_than_copies_run_in_rounds_and_the_first_round_is_the_evaluation_of_old(monkeypatch):
    config = small_config()
    pipeline = build_pipeline(config)
    pipeline.collector.shutdown()
    copies = []
    real = evaluation_module.make_eval_env
    monkeypatch.setattr(evaluation_module, "make_eval_env", lambda *a, **k: copies.append(a[1]) or real(*a, **k))
    n = evaluation_module.EVAL_COPIES
    whole = evaluate(pipeline.actor, config.env, n + 9, seed=5)
    one_round = evaluate(pipeline.actor, config.env, n, seed=5)
    assert copies == [n, n]  # never more copies than a round's, whatever the count
    assert whole.episodes == n + 9 and len(whole.returns) == n + 9  # CartPole's episodes all end (500 steps)
    assert whole.returns[:n] == one_round.returns  # the first round is the evaluation of that many copies
    sampled = evaluate(pipeline.actor, config.env, n + 9, seed=5, sampled=True)
    assert sampled.episodes == n + 9
    rng = torch.get_rng_state()
    assert evaluate(pipeline.actor, config.env, n + 9, seed=5, sampled=True).returns == sampled.returns
    assert torch.equal(torch.get_rng_state(), rng)


def test_an_episode_count_above_the_cap_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"eval_episodes=100001 is invalid: it must be in \[0, 100,000\]"):
        small_config(eval_episodes=MAX_EVAL_EPISODES + 1)
    assert TrainConfig(eval_episodes=MAX_EVAL_EPISODES).eval_episodes == MAX_EVAL_EPISODES
    assert main(["train", "--eval-episodes", "2147483648", "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "eval_episodes=2147483648" in err
    assert not (tmp_path / "run").exists()
    assert main(["eval", str(tmp_path), "--episodes", "2147483648"]) == 2
    assert "--episodes must be in [1, 100,000]" in capsys.readouterr().err


def test_runs_of_different_seeds_evaluate_from_unrelated_start_states_and_training_uses_that_seed():
    from ppo_td.training import evaluation_seed, train

    n = evaluation_module.EVAL_COPIES  # the eval env seeds copy i with the evaluation seed + i
    starts = sorted(evaluation_seed(seed) for seed in range(2000))
    assert all(b - a >= n for a, b in itertools.pairwise(starts))  # seed + 10_000 overlapped: 1's copies were 2's
    assert 0 <= starts[0] and starts[-1] + n < 2**32 and evaluation_seed(7) == evaluation_seed(7)
    config = small_config(eval_episodes=3)
    result = train(config)
    again = evaluate(result.actor, config.env, 3, seed=evaluation_seed(config.seed))
    assert result.evaluation.returns == again.returns and result.evaluation.returns != evaluate(
        result.actor, config.env, 3, seed=config.seed + 10_000).returns
