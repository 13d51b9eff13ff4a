"""Env state as plain data (ppo_td.envs.state): read from one env, loaded into a fresh one, the two step alike."""

import io

import numpy as np
import pytest
import torch

from ppo_td.config import EnvConfig
from ppo_td.envs import build_env
from ppo_td.envs.state import UnreadableState, decode, encode, load_state, read_state, why_not_restorable


def _step(vec, action):
    """One step; finished copies are reset from the env's own RNG (these vector envs do not autoreset)."""
    obs, reward, terminated, truncated, _ = vec.step(action)
    done = terminated | truncated
    if done.any():
        obs, _ = vec.reset(options={"reset_mask": done})
    return obs, reward, terminated, truncated


def _step_both(a, b, actions):
    for action in actions:
        for x, y in zip(_step(a, action), _step(b, action), strict=True):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("env_id", ["Ant-v5", "Humanoid-v5", "Hopper-v5", "Pendulum-v1"])
def test_a_loaded_state_steps_like_the_original(env_id):
    """Ant's and Humanoid's rewards read body positions computed during the previous step: MuJoCo's integration
    state alone is not enough, the recorded kinematics make them exact."""
    if env_id != "Pendulum-v1":
        pytest.importorskip("mujoco")
    config = EnvConfig(env_id, num_envs=2)
    a, b = build_env(config, seed=1).vector, build_env(config, seed=2).vector
    a.reset(seed=1), b.reset(seed=2)
    rng = np.random.default_rng(0)
    actions = [rng.uniform(-0.4, 0.4, a.action_space.shape).astype(a.action_space.dtype) for _ in range(120)]
    for action in actions[:60]:
        _step(a, action)
    assert why_not_restorable(a) is None
    buffer = io.BytesIO()
    torch.save(read_state(a), buffer)
    buffer.seek(0)
    load_state(b, torch.load(buffer, weights_only=True))  # plain data: loads without unpickling code
    _step_both(a, b, actions[60:])


def test_encode_round_trips_numpy_and_generators():
    gen = np.random.default_rng(3)
    value = {"a": np.arange(4.0), "n": np.int64(7), "rng": gen, "nested": [(1, "x"), {"t": torch.ones(2)}]}
    back = decode(encode(value))
    assert np.array_equal(back["a"], value["a"]) and back["n"] == 7
    assert back["rng"].random() == np.random.default_rng(3).random()
    assert back["nested"][0] == (1, "x") and torch.equal(back["nested"][1]["t"], torch.ones(2))


def test_encode_names_what_it_cannot_store_and_decode_refuses_a_forged_generator():
    with pytest.raises(UnreadableState, match=r"state\['f'\] holds a function"):
        encode({"f": lambda: 0})
    with pytest.raises(ValueError, match="not a numpy bit generator"):
        decode({"__np_generator__": '{"bit_generator": "seed"}'})
