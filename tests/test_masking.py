"""Action masking: zero illegal actions, gradients, per-dimension masks, and clear errors for bad masks."""

import dataclasses
import statistics

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDictBase
from torchrl.envs import Transform
from torchrl.envs.utils import check_env_specs
from torchrl.modules import MaskedCategorical

from conftest import small_config
from ppo_td.config import EnvConfig, ModelConfig, OptimConfig
from ppo_td.envs import make_env
from ppo_td.models import MaskedMultiCategorical, make_actor_critic
from ppo_td.presets import get_preset
from ppo_td.training import build_pipeline, train


class IllegalActionCounter(Transform):
    """Counts every action taken that the state's mask forbids (per dimension for MultiDiscrete)."""

    def __init__(self, nvec):
        super().__init__()
        self.nvec, self.illegal, self.taken = list(nvec), 0, 0

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict["action"]
        action = action.unsqueeze(-1) if action.dim() == tensordict.batch_dims else action
        for dim, part in enumerate(tensordict["action_mask"].split(self.nvec, -1)):
            self.illegal += int((~part.gather(-1, action[..., dim: dim + 1])).sum())
        self.taken += tensordict.numel()
        return next_tensordict


def test_specs_of_all_three_trading_variants():
    for env_id, mode in (("ppo_td/Trading-v0", "auto"), ("ppo_td/TradingInfo-v0", "info"),
                         ("ppo_td/TradingPenalty-v0", "auto")):
        check_env_specs(make_env(EnvConfig(env_id, num_envs=2, action_mask=mode), seed=0))


def test_mask_from_info_equals_mask_from_observation():
    a = make_env(EnvConfig("ppo_td/Trading-v0", num_envs=2), seed=3)
    b = make_env(EnvConfig("ppo_td/TradingInfo-v0", num_envs=2, action_mask="info"), seed=3)
    torch.manual_seed(0)
    ta = a.rollout(60, break_when_any_done=False)
    torch.manual_seed(0)
    tb = b.rollout(60, break_when_any_done=False)
    # random actions obey the mask (ActionMask updated the spec), and both paths see identical data
    assert torch.equal(ta["action"], tb["action"]) and torch.equal(ta["action_mask"], tb["action_mask"])
    assert ta["action_mask"].gather(-1, ta["action"].unsqueeze(-1)).all()
    torch.testing.assert_close(ta["next", "observation"], tb["next", "observation"])


def test_training_on_the_masked_env_takes_no_illegal_action():
    config = small_config(env=EnvConfig("ppo_td/Trading-v0", num_envs=4), model=ModelConfig(hidden_sizes=(16, 16)),
                          frames_per_batch=256, total_frames=256 * 8, eval_episodes=2)
    env = make_env(config.env, seed=config.seed, gamma=config.loss.gamma)
    counter = IllegalActionCounter([3])
    env.append_transform(counter)
    in_training = []
    train(config, env=env, callbacks=[lambda metrics, p: in_training.append(counter.taken)])
    # a TorchRL env passed in is evaluated on itself: the evaluation's actions are counted (and legal) too
    assert in_training[-1] == 256 * 8 and counter.taken > in_training[-1] and counter.illegal == 0


def test_masked_logits_get_zero_gradient_and_everything_stays_finite():
    torch.manual_seed(0)
    logits = torch.randn(64, 6, requires_grad=True)
    mask = torch.rand(64, 6) < 0.2
    mask[torch.arange(64), torch.randint(0, 6, (64,))] = True  # at least one legal action per row
    dist = MaskedCategorical(logits=logits, mask=mask)
    action = dist.sample()
    assert mask.gather(-1, action.unsqueeze(-1)).all(), "masked actions have zero probability"
    (dist.log_prob(action).sum() + dist.entropy().sum()).backward()
    assert torch.isfinite(logits.grad).all()
    assert torch.count_nonzero(logits.grad[~mask]) == 0
    probs = dist.probs
    assert torch.count_nonzero(probs[~mask]) == 0
    single = mask.sum(-1) == 1
    assert torch.equal(dist.entropy()[single], torch.zeros(int(single.sum()))), "entropy counts legal actions only"


def test_multi_categorical_per_dimension_masks():
    torch.manual_seed(0)
    nvec = [3, 4]
    logits = torch.randn(500, 7, requires_grad=True)
    mask = torch.ones(500, 7, dtype=torch.bool)
    mask[:, 1] = False  # dim 0: action 1 illegal
    mask[:, 3 + 0] = mask[:, 3 + 3] = False  # dim 1: actions 0 and 3 illegal
    dist = MaskedMultiCategorical(logits, nvec, mask)
    sample = dist.sample()
    assert (sample[:, 0] != 1).all() and (~torch.isin(sample[:, 1], torch.tensor([0, 3]))).all()
    dist.log_prob(sample).sum().backward()
    assert torch.count_nonzero(logits.grad[~mask.expand_as(logits)]) == 0


class MultiTarget(gym.Env):
    """Observation: one-hot targets (a in 0..2, b in 0..3); reward 1 per matched dimension; the mask
    forbids one wrong option per dimension. Best return per step is 2."""

    observation_space = gym.spaces.Dict({"observation": gym.spaces.Box(0.0, 1.0, (7,), np.float32),
                                         "action_mask": gym.spaces.MultiBinary(7)})
    action_space = gym.spaces.MultiDiscrete([3, 4])

    def _draw(self):
        self.target = (int(self.np_random.integers(3)), int(self.np_random.integers(4)))
        obs = np.zeros(7, np.float32)
        obs[self.target[0]] = obs[3 + self.target[1]] = 1
        mask = np.ones(7, np.int8)
        mask[(self.target[0] + 1) % 3] = 0
        mask[3 + (self.target[1] + 1) % 4] = 0
        return {"observation": obs, "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw(), {}

    def step(self, action):
        reward = float(action[0] == self.target[0]) + float(action[1] == self.target[1])
        return self._draw(), reward, False, False, {}


if "ppo_td_test/MultiTarget-v0" not in gym.registry:
    gym.register("ppo_td_test/MultiTarget-v0", entry_point=MultiTarget, max_episode_steps=16)


@pytest.mark.slow
def test_multi_discrete_learns_and_respects_per_dimension_masks():
    config = small_config(env=EnvConfig("ppo_td_test/MultiTarget-v0", num_envs=8),
                          model=ModelConfig(hidden_sizes=(32,)), frames_per_batch=256, total_frames=256 * 30,
                          eval_episodes=4, optim=OptimConfig(lr=1e-2, update_epochs=8, num_minibatches=4))
    env = make_env(config.env, seed=config.seed)
    counter = IllegalActionCounter([3, 4])
    env.append_transform(counter)
    in_training = []
    result = train(config, env=env, callbacks=[lambda metrics, p: in_training.append(counter.taken)])
    # the env passed in is also where the evaluation runs: its actions are counted (and legal) too
    assert counter.illegal == 0 and in_training[-1] == 256 * 30 and counter.taken > in_training[-1]
    first, last = result.history[0]["episode_return"], result.history[-1]["episode_return"]
    assert first < 20 and last > 28, (first, last)  # 16 steps: random ~ 16 * (1/2 + 1/3), perfect 32
    assert min(result.eval_returns) >= 30


class BadMask(gym.Env):
    """A masked env whose mask goes wrong at step 5 in the way `kind` says."""

    action_space = gym.spaces.Discrete(3)

    def __init__(self, kind="all_masked"):
        self.kind, self.t = kind, 0
        width = 4 if kind == "wrong_shape" else 3
        mask_space = (gym.spaces.Box(0.0, 1.0, (3,), np.float32) if kind == "float"
                      else gym.spaces.Box(0, 5, (width,), np.int8))
        self.observation_space = gym.spaces.Dict({"observation": gym.spaces.Box(-1, 1, (2,), np.float32),
                                                  "action_mask": mask_space})

    def _obs(self):
        space = self.observation_space["action_mask"]
        mask = np.ones(space.shape, space.dtype)
        if self.t == 5 and self.kind == "all_masked":
            mask[:] = 0
        if self.t == 5 and self.kind == "not_binary":
            mask[0] = 2
        return {"observation": np.zeros(2, np.float32), "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}


for _kind in ("all_masked", "wrong_shape", "float", "not_binary"):
    if f"ppo_td_test/BadMask-{_kind}-v0" not in gym.registry:
        gym.register(f"ppo_td_test/BadMask-{_kind}-v0", entry_point=BadMask, kwargs={"kind": _kind},
                     max_episode_steps=50)


@pytest.mark.parametrize(("kind", "message"), [
    ("all_masked", r"'ppo_td_test/BadMask-all_masked-v0': every action is masked at step 5 \(env copy 0\)"),
    ("wrong_shape", r"action mask has 4 entries at reset, the action space needs 3"),
    ("float", r"action mask dtype torch.float32 at reset; use bool or 0/1 integers"),
    ("not_binary", r"action mask holds values other than 0/1 at step 5"),
])
def test_bad_masks_are_clear_errors(kind, message):
    config = small_config(env=EnvConfig(f"ppo_td_test/BadMask-{kind}-v0", num_envs=2), frames_per_batch=64)
    with pytest.raises((ValueError, TypeError), match=message):
        train(config)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the torch path of MaskCheck runs on CUDA tensors"))])
def test_the_mask_check_refuses_and_casts_alike_on_every_device(device):
    """MaskCheck checks CPU masks in numpy and others in torch: the same bool mask back, the same refusals, a done
    copy's empty mask (a finished board) accepted."""
    from tensordict import TensorDict

    from ppo_td.envs.masking import MaskCheck

    check = MaskCheck("env", [3, 2])
    td = TensorDict({"action_mask": torch.tensor([[1, 0, 0, 0, 1], [0, 0, 0, 1, 1]], dtype=torch.int8, device=device),
                     "done": torch.tensor([[False], [True]], device=device)}, [2])
    check.check(td, "at step 1")  # copy 1's first dimension is empty, but copy 1 is done
    assert td["action_mask"].dtype == torch.bool and td["action_mask"].device.type == device
    assert td["action_mask"].tolist() == [[True, False, False, False, True], [False, False, False, True, True]]
    td["done"] = torch.tensor([[False], [False]], device=device)
    with pytest.raises(ValueError, match=r"every action is masked in action dimension 0 at step 2 \(env copy 1\)"):
        check.check(td, "at step 2")
    td["action_mask"] = torch.tensor([[1, 2, 0, 0, 1], [1, 0, 0, 1, 1]], dtype=torch.int8, device=device)
    with pytest.raises(ValueError, match="action mask holds values other than 0/1 at step 3"):
        check.check(td, "at step 3")


def test_masked_actor_reads_the_mask():
    env = make_env(EnvConfig("ppo_td/Trading-v0", num_envs=4), seed=0)
    actor, _ = make_actor_critic(env, ModelConfig())
    assert "action_mask" in actor.in_keys
    p = build_pipeline(small_config(env=EnvConfig("ppo_td/Trading-v0", num_envs=4), frames_per_batch=64))
    assert isinstance(p.actor.get_dist(p.env.reset()), MaskedCategorical)
    p.collector.shutdown()


@pytest.mark.slow
def test_masked_ppo_beats_the_unmasked_baseline():
    """Same preset, budget and seed: masked Trading-v0 vs TradingPenalty-v0 (invalid action = -1, no-op)."""
    base = get_preset("trading")
    results = {}
    for env_id in ("ppo_td/Trading-v0", "ppo_td/TradingPenalty-v0"):
        config = dataclasses.replace(base, eval_episodes=16, env=dataclasses.replace(base.env, env_id=env_id))
        results[env_id] = statistics.fmean(train(config).eval_returns)
    assert results["ppo_td/Trading-v0"] > results["ppo_td/TradingPenalty-v0"] + 20, results


def test_action_mask_none_ignores_the_mask_entry():
    """env.action_mask='none' on an env whose observations carry a mask: the policy is a plain Categorical
    that neither reads nor needs the (unvalidated) mask, and training runs."""
    config = small_config(env=EnvConfig("ppo_td/Trading-v0", num_envs=4, action_mask="none"), frames_per_batch=64,
                          total_frames=128, eval_episodes=1)
    result = train(config)
    assert not result.pipeline.description.action_mask
    assert result.pipeline.actor.module[1].distribution_class is torch.distributions.Categorical
    assert len(result.history) == 2


def test_auto_finds_a_mask_in_info_and_info_without_one_is_refused():
    """'auto' reads Gymnasium's info['action_mask'] convention as well as a mask observation; 'info' on an env
    that has none is refused by name, not a bare KeyError at the first reset."""
    from ppo_td.envs import build_env

    built = build_env(EnvConfig("ppo_td/TradingInfo-v0", num_envs=2), seed=0)
    assert built.description.action_mask and "action_mask" in built.env.reset().keys()
    assert not build_env(EnvConfig("ppo_td/TradingPenalty-v0", num_envs=2), seed=0).description.action_mask
    with pytest.raises(ValueError, match=r"'CartPole-v1' has no 'action_mask' in the info of its reset"):
        build_env(EnvConfig("CartPole-v1", num_envs=2, vectorization="sync", action_mask="info"))
