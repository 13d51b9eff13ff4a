"""Same seed, same history; save -> load -> same actions and same evaluation."""

import math

import pytest
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

from conftest import small_config
from ppo_td.envs import make_env
from ppo_td.persist import load_actor, load_checkpoint, restore, save_checkpoint
from ppo_td.training import build_pipeline, evaluate, train

LOSS_KEYS = ("loss_policy", "loss_value", "loss_entropy", "kl_k3", "grad_norm", "episode_return")


def _losses(history):
    return [[m[k] for k in LOSS_KEYS] for m in history]


def _same(a, b):
    return all(x == y or (math.isnan(x) and math.isnan(y)) for ra, rb in zip(a, b, strict=True)
               for x, y in zip(ra, rb, strict=True))


def test_same_seed_gives_same_loss_history():
    config = small_config(total_frames=64 * 4)
    first, second = train(config), train(config)
    assert _same(_losses(first.history), _losses(second.history))
    assert first.eval_returns == second.eval_returns


def test_different_seed_gives_different_history():
    a = train(small_config(total_frames=64 * 3, seed=1))
    b = train(small_config(total_frames=64 * 3, seed=2))
    assert not _same(_losses(a.history), _losses(b.history))


def test_save_load_gives_same_actions_and_evaluation(tmp_path):
    config = small_config(total_frames=64 * 3)
    result = train(config)
    path = save_checkpoint(tmp_path / "checkpoint.pt", result.pipeline, frames=192, iteration=3)
    loaded_config, actor, obs_stats = load_actor(path)
    assert obs_stats is None  # no observation normalization in this config
    assert loaded_config == config
    env = make_env(config.env, seed=5)
    td = env.reset()
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(actor(td.clone())["logits"], result.actor(td.clone())["logits"], rtol=0, atol=0)
        assert torch.equal(actor(td.clone())["action"], result.actor(td.clone())["action"])
    assert evaluate(actor, config.env, 3, seed=7) == evaluate(result.actor, config.env, 3, seed=7)


def test_restore_brings_back_optimizer_schedule_and_counters(tmp_path):
    config = small_config(total_frames=64 * 3)
    result = train(config)
    save_checkpoint(tmp_path / "c.pt", result.pipeline, frames=192, iteration=3)
    state = load_checkpoint(tmp_path / "c.pt")
    assert (state["frames"], state["iteration"]) == (192, 3)
    fresh = build_pipeline(config)
    restore(fresh, state)
    assert fresh.scheduler.last_epoch == result.pipeline.scheduler.last_epoch == 3
    assert fresh.optimizer.param_groups[0]["lr"] == pytest.approx(result.pipeline.optimizer.param_groups[0]["lr"])
    old = result.pipeline.optimizer.state_dict()["state"]
    new = fresh.optimizer.state_dict()["state"]
    assert old.keys() == new.keys()
    for k in old:
        torch.testing.assert_close(old[k]["exp_avg"], new[k]["exp_avg"], rtol=0, atol=0)
    fresh.collector.shutdown()
