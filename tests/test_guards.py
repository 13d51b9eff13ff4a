"""Guards: non-finite env output, env exceptions and non-finite losses stop training with a clear message."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import small_config
from ppo_td.config import EnvConfig
from ppo_td.envs import EnvStepError, NonFiniteEnvError, make_env
from ppo_td.persist import Checkpointer, load_checkpoint
from ppo_td.training import NonFiniteError, train


class Faulty(gym.Env):
    """Observation NaN (or an exception) at a given step count; a fresh episode every 100 steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, bad_step=37, mode="nan"):
        self.bad_step, self.mode, self.t = bad_step, mode, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.zeros(3, np.float32)
        if self.t == self.bad_step:
            if self.mode == "raise":
                raise ZeroDivisionError("division by zero in the physics")
            obs[1] = np.nan
        return obs, 1.0, False, self.t % 100 == 0, {}


for name, mode in (("ppo_td_test/NaNAt37-v0", "nan"), ("ppo_td_test/RaiseAt37-v0", "raise")):
    if name not in gym.registry:
        gym.register(name, entry_point=Faulty, kwargs={"mode": mode})


def test_nan_observation_names_env_key_and_step():
    config = small_config(env=EnvConfig("ppo_td_test/NaNAt37-v0", num_envs=1), frames_per_batch=64,
                          total_frames=128)
    with pytest.raises(NonFiniteEnvError, match=r"'ppo_td_test/NaNAt37-v0'.*non-finite 'observation' at step 37"):
        train(config)


def test_guard_can_be_switched_off():
    env = make_env(EnvConfig("ppo_td_test/NaNAt37-v0", num_envs=1, check_finite=False), seed=0)
    td = env.rollout(40, break_when_any_done=False)
    assert torch.isnan(td["next", "observation"][0, 36]).any()


def test_exception_in_env_step_names_env_and_step():
    config = small_config(env=EnvConfig("ppo_td_test/RaiseAt37-v0", num_envs=2), frames_per_batch=64,
                          total_frames=128)
    with pytest.raises(EnvStepError, match=r"'ppo_td_test/RaiseAt37-v0' raised ZeroDivisionError at step 37"):
        train(config)


def test_non_finite_loss_stops_with_iteration_named_and_checkpoint_kept(tmp_path, monkeypatch):
    config = small_config(total_frames=64 * 6, eval_episodes=0)
    checkpointer = Checkpointer(tmp_path, every=1, keep=10)
    from ppo_td.training import objective

    real = objective.FastLoss._core  # the loss terms of ppo_td's loss, whichever outputs the update asks for
    calls = {"n": 0}

    def poisoned(self, *args):
        calls["n"] += 1
        out = real(self, *args)
        if calls["n"] > 3 * config.optim.update_epochs * config.optim.num_minibatches:  # from iteration 4 on
            out["loss_objective"] = out["loss_objective"] * float("nan")
        return out

    monkeypatch.setattr(objective.FastLoss, "_core", poisoned)
    with pytest.raises(NonFiniteError, match=r"iteration 4 \(256 frames\): non-finite loss in epoch 1"):
        train(config, callbacks=[checkpointer])
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["iteration"] == 3
    assert all(torch.isfinite(v).all() for v in state["actor"].values())


def test_non_finite_loss_from_torchrls_loss_forward_is_named_too(monkeypatch):
    """Without the fast loss (loss.fast_forward=False) the update reads ClipPPOLoss.forward's outputs: a NaN term
    there stops training the same way, naming the term."""
    config = small_config(total_frames=64 * 2, eval_episodes=0)
    config = dataclasses.replace(config, loss=dataclasses.replace(config.loss, fast_forward=False))
    from ppo_td.training import objective

    real = objective.PPOObjective.forward

    def poisoned(self, td):
        out = real(self, td)
        out.set("loss_critic", out["loss_critic"] * float("nan"))
        return out

    monkeypatch.setattr(objective.PPOObjective, "forward", poisoned)
    with pytest.raises(NonFiniteError, match=r"non-finite loss in epoch 1: .*'loss_critic': nan"):
        train(config)


def test_non_finite_parameters_stop_training_naming_the_parameter_and_keep_the_checkpoint(tmp_path):
    """A learning rate that overflows the parameters (as --optim.lr 1e39 does) stops at the first step that made
    them non-finite, naming the parameter and the fix; the checkpoint of the iteration before stays finite."""
    from ppo_td.persist import save_checkpoint

    config = small_config(total_frames=64 * 6, eval_episodes=0)
    checkpointer = Checkpointer(tmp_path, every=1, keep=10)

    def blow_up_after_2(metrics, pipeline):
        checkpointer(metrics, pipeline)
        if metrics["iteration"] == 2:
            for group in pipeline.optimizer.param_groups:
                group["lr"] = 1e39
            pipeline.scheduler.base_lrs = [1e39 for _ in pipeline.scheduler.base_lrs]

    with pytest.raises(NonFiniteError, match=r"iteration 3 .*non-finite parameter (actor|critic)\.\S+ after an "
                                             r"optimizer step.*lower optim.lr"):
        train(config, callbacks=[blow_up_after_2])
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["iteration"] == 2
    assert all(torch.isfinite(v).all() for part in ("actor", "critic") for v in state[part].values())
    from ppo_td.training import build_pipeline

    pipeline = build_pipeline(config)  # a checkpoint of non-finite weights is refused at the writer too
    with torch.no_grad():
        next(pipeline.critic.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="refusing to write checkpoint .*critic.*not finite"):
        save_checkpoint(tmp_path / "checkpoint.pt", pipeline, frames=0, iteration=0)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["iteration"] == 2  # the previous file is untouched
    pipeline.collector.shutdown()
