"""Observation normalization and return-based reward scaling, against numpy and hand-written references."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDictBase
from torchrl.envs import Transform
from torchrl.envs.utils import check_env_specs

from conftest import small_config
from ppo_td.config import EnvConfig
from ppo_td.envs import ReturnScaling, RunningObsNorm, find_transform, make_env, observation_stats
from ppo_td.persist import Checkpointer, load_actor, load_checkpoint, resume_pipeline
from ppo_td.training import make_eval_env, run_episodes, train


class Recorder(Transform):
    """Records the raw observations entering the normalizer: every step, and the new first obs of each reset."""

    def __init__(self):
        super().__init__(in_keys=["observation"], out_keys=["observation"])
        self.seen = []

    def _step(self, tensordict, next_tensordict):
        self.seen.append(next_tensordict["observation"].clone())
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        obs = tensordict_reset["observation"].clone()
        self.seen.append(obs if mask is None else obs[mask.reshape(-1)])
        return tensordict_reset

    def _call(self, next_tensordict):
        return next_tensordict


def test_running_statistics_equal_numpy_on_the_concatenated_stream():
    env = make_env(EnvConfig("CartPole-v1", num_envs=3, normalize_observations=True), seed=0)
    index = next(i for i, t in enumerate(env.transform) if isinstance(t, RunningObsNorm))
    recorder = Recorder()
    env.insert_transform(index, recorder)
    env.rollout(150, break_when_any_done=False)  # CartPole episodes end at different steps: partial resets
    data = torch.cat([s.reshape(-1, 4) for s in recorder.seen]).double().numpy()
    norm = find_transform(env, RunningObsNorm)
    assert int(norm.count) == len(data)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-10, atol=1e-12)
    # and the normalized output uses them: (x - mean) / sqrt(var + 1e-8), clipped to +-10
    last = env.rollout(1, break_when_any_done=False)
    raw = recorder.seen[-1].double()
    expected = ((raw - norm.mean) / torch.sqrt(norm.var + 1e-8)).clamp(-10, 10).float()
    torch.testing.assert_close(last["next", "observation"][:, 0], expected)


class RewardSequence(gym.Env):
    """Rewards 1, 2, 3 (episode ends), then 4, 5, ...; every copy the same, unless `end_at` differs."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end_at=3):
        self.end_at, self.t = end_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), float(self.t), self.t == self.end_at, False, {}


for _end in (3, 4):
    if f"ppo_td_test/RewardSeq{_end}-v0" not in gym.registry:
        gym.register(f"ppo_td_test/RewardSeq{_end}-v0", entry_point=RewardSequence, kwargs={"end_at": _end})


def reference_scaling(rewards, dones, gamma, clip=10.0, eps=1e-8):
    """SB3 VecNormalize's reward path written out: rewards [T, n_envs], dones [T, n_envs]."""
    mean, var, count = 0.0, 1.0, 1e-4
    ret = np.zeros(rewards.shape[1])
    out = []
    for r, d in zip(rewards, dones, strict=True):
        ret = ret * gamma + r
        b_mean, b_var, n = ret.mean(), ret.var(), len(ret)
        delta, tot = b_mean - mean, count + n
        m2 = var * count + b_var * n + delta**2 * count * n / tot
        mean, var, count = mean + delta * n / tot, m2 / tot, tot
        out.append(np.clip(r / np.sqrt(var + eps), -clip, clip))
        ret[d] = 0.0
    return np.array(out)


def _scaled_rollout(env_id, n_envs, steps, gamma, clip=10.0):
    env = make_env(EnvConfig(env_id, num_envs=n_envs, normalize_rewards=True, reward_clip=clip), seed=0, gamma=gamma)
    td = env.rollout(steps, break_when_any_done=False)
    return env, td


def test_return_scaling_hand_values_with_episode_end_in_the_middle():
    env, td = _scaled_rollout("ppo_td_test/RewardSeq3-v0", 1, 5, gamma=0.5, clip=1e6)
    got = td["next", "reward"].reshape(-1).double().numpy()
    # raw rewards 1, 2, 3 | 4, 5 (t keeps counting after the reset); returns 1, 2.5, 4.25 | 4, 7
    rewards = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])
    dones = np.array([[False], [False], [True], [False], [False]])
    np.testing.assert_allclose(got, reference_scaling(rewards, dones, 0.5, clip=1e6)[:, 0], rtol=1e-6)
    # first step by hand: one return of 1 joins mean 0 / var 1 / count 1e-4 -> var = 1.9997e-4
    assert got[0] == pytest.approx(1 / np.sqrt(1.9997000299970003e-4 + 1e-8), rel=1e-6)
    scaler = find_transform(env, ReturnScaling)
    assert float(scaler.count) == pytest.approx(5 + 1e-4)
    assert td["next", "episode_reward"][0, 2].item() == 6.0, "RewardSum must keep summing raw rewards"


def test_return_scaling_resets_per_env_and_clips():
    # two copies whose episodes end at different steps (3 and 4): batched update, per-copy reset
    env = make_env(EnvConfig("ppo_td_test/RewardSeq3-v0", num_envs=2, normalize_rewards=True), seed=0, gamma=0.9)
    env.base_env._env.envs[1].unwrapped.end_at = 4
    td = env.rollout(6, break_when_any_done=False)
    got = td["next", "reward"][..., 0].T.double().numpy()  # [T, n_envs]
    rewards = np.array([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 6]], dtype=float)
    dones = np.array([[0, 0], [0, 0], [1, 0], [0, 1], [0, 0], [0, 0]], dtype=bool)
    expected = reference_scaling(rewards, dones, 0.9)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert np.abs(got).max() == 10.0, "the first steps are clipped at 10"


class TouchedKeys(Transform):
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        next_tensordict.set("raw_reward_copy", next_tensordict.get("reward").clone())
        return next_tensordict


def test_frozen_return_scaling_changes_nothing():
    env, _ = _scaled_rollout("ppo_td_test/RewardSeq3-v0", 2, 4, gamma=0.9)
    scaler = find_transform(env, ReturnScaling).freeze()
    env.insert_transform(next(i for i, t in enumerate(env.transform) if t is scaler), TouchedKeys())
    before = {k: v.clone() for k, v in scaler.state_dict().items() if k != "running_return"}
    td = env.rollout(5, break_when_any_done=False)
    after = {k: v for k, v in scaler.state_dict().items() if k != "running_return"}
    assert all(torch.equal(before[k], after[k]) for k in before)
    scale = torch.sqrt(before["var"] + 1e-8).float()
    expected = (td["next", "raw_reward_copy"] / scale).clamp(-10, 10)
    torch.testing.assert_close(td["next", "reward"], expected)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_specs_pass_with_both_normalizations(num_envs):
    env = make_env(EnvConfig("Pendulum-v1", num_envs=num_envs, normalize_observations=True, normalize_rewards=True),
                   seed=0)
    check_env_specs(env)


def test_return_scaling_touches_only_the_reward():
    env = make_env(EnvConfig("Pendulum-v1", num_envs=2, normalize_rewards=True), seed=0)
    scaler_index = next(i for i, t in enumerate(env.transform) if isinstance(t, ReturnScaling))
    env.insert_transform(scaler_index, TouchedKeys())
    plain = make_env(EnvConfig("Pendulum-v1", num_envs=2), seed=0)
    torch.manual_seed(0)
    actions = torch.rand(2, 30, 1) * 4 - 2
    td, ref = env.reset(), plain.reset()
    for t in range(30):
        td = env.step(td.set("action", actions[:, t]))
        ref = plain.step(ref.set("action", actions[:, t]))
        nxt, rnxt = td["next"], ref["next"]
        torch.testing.assert_close(nxt["observation"], rnxt["observation"])
        torch.testing.assert_close(nxt["episode_reward"], rnxt["episode_reward"])
        torch.testing.assert_close(nxt["raw_reward_copy"], rnxt["reward"])
        assert not torch.equal(nxt["reward"], rnxt["reward"])
        td, ref = td["next"].clone(), ref["next"].clone()


def test_checkpoint_round_trip_and_frozen_evaluation_statistics(tmp_path):
    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2, normalize_observations=True,
                                        normalize_rewards=True), frames_per_batch=64, total_frames=64 * 4,
                          eval_episodes=0)
    stopper = Checkpointer(tmp_path, every=2, keep=1)
    result = train(config, callbacks=[stopper])  # checkpoints at iterations 2 and 4
    at_save = observation_stats(result.pipeline.env)
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["iteration"] == 4
    for key in ("mean", "var", "count"):
        assert torch.equal(getattr(find_transform(result.pipeline.env, RunningObsNorm), key), state["obs_stats"][key])
    _, actor, obs_stats = load_actor(tmp_path / "checkpoint.pt")
    eval_env = make_eval_env(config.env, 3, seed=5, obs_stats=obs_stats)
    norm = find_transform(eval_env, RunningObsNorm)
    run_episodes(actor, eval_env, 10_000)
    after = observation_stats(eval_env)
    for key, value in at_save.items():
        assert torch.equal(value, after[key]), f"evaluation moved {key}"
    assert norm.frozen and find_transform(eval_env, ReturnScaling) is None


def test_resume_restores_reward_scaling_state(tmp_path):
    config = small_config(env=EnvConfig("Pendulum-v1", num_envs=2, normalize_observations=True,
                                        normalize_rewards=True), frames_per_batch=64, total_frames=64 * 4,
                          eval_episodes=0)
    result = train(config, callbacks=[Checkpointer(tmp_path, 3, 1)])
    assert result.history[-1]["iteration"] == 4
    pipeline, frames, iteration, exact, *_ = resume_pipeline(tmp_path / "checkpoint.pt")
    assert iteration == 3 and exact
    saved = load_checkpoint(tmp_path / "checkpoint.pt")["env_state"]
    restored = pipeline.env.state_dict()
    scaler_keys = [k for k in saved if k.endswith(("mean", "var", "count", "running_return"))]
    assert scaler_keys and all(torch.equal(saved[k], restored[k]) for k in scaler_keys)
    pipeline.collector.shutdown()


class ConstantObservation(gym.Env):
    """Features that barely move (as Hopper's do at first): E[x^2] - E[x]^2 rounds below zero in float32."""

    observation_space = gym.spaces.Box(-1e4, 1e4, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def _obs(self):
        return (np.array([3.0819921, 1.7, 0.9]) + 1e-4 * self.np_random.standard_normal(3)).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 1.0, False, False, {}


if "ppo_td_test/ConstantObs-v0" not in gym.registry:
    gym.register("ppo_td_test/ConstantObs-v0", entry_point=ConstantObservation, max_episode_steps=1000)


def test_nearly_constant_feature_normalizes_without_nan():
    """TorchRL's VecNormV2 emitted NaN here (sqrt of E[x^2] - E[x]^2 rounded below zero)."""
    env = make_env(EnvConfig("ppo_td_test/ConstantObs-v0", num_envs=2, normalize_observations=True), seed=0)
    td = env.rollout(200, break_when_any_done=False)
    assert torch.isfinite(td["next", "observation"]).all()
    assert td["next", "observation"].abs().max() <= 10.0
