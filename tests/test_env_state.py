"""Env state as plain data (ppo_td.envs.state): read from one env, loaded into a fresh one, the two step alike."""

import io

import numpy as np
import pytest
import torch

from ppo_td.config import EnvConfig
from ppo_td.envs import build_env
from ppo_td.envs.state import (
    StateMismatch,
    UnreadableState,
    decode,
    encode,
    load_state,
    read_state,
    why_not_restorable,
)


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


@pytest.mark.parametrize("env_id", ["Ant-v5", "Humanoid-v5", "Hopper-v5", "Pendulum-v1", "MountainCar-v0"])
def test_a_loaded_state_steps_like_the_original(env_id):
    """Ant's and Humanoid's rewards read body positions computed during the previous step: MuJoCo's integration
    state alone is not enough, the recorded kinematics make them exact."""
    if env_id.endswith("-v5"):
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


def _saved_and_loaded(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_encode_round_trips_numpy_values_and_generators_with_their_types():
    value = {"a": np.arange(4.0), "n": np.int64(7), "f": np.float32(0.1), "flag": np.bool_(True),
             "big": np.arange(3, dtype=">f8"), "pcg": np.random.default_rng(3),
             "mt": np.random.Generator(np.random.MT19937(5)), "nested": [(1, "x"), {"t": torch.ones(2)}]}
    back = decode(_saved_and_loaded(encode(value)))
    assert np.array_equal(back["a"], value["a"]) and back["n"] == 7 and type(back["n"]) is np.int64
    assert type(back["f"]) is np.float32 and back["f"] == np.float32(0.1) and (~back["flag"]) is np.False_
    assert np.array_equal(back["big"], [0.0, 1.0, 2.0])
    assert back["pcg"].random() == np.random.default_rng(3).random()
    assert back["mt"].random() == np.random.Generator(np.random.MT19937(5)).random()
    assert back["nested"][0] == (1, "x") and torch.equal(back["nested"][1]["t"], torch.ones(2))


@pytest.mark.parametrize(("value", "message"), [
    ({"f": lambda: 0}, r"state\['f'\] holds a function"),
    ({"p": __import__("collections").namedtuple("Pair", "a b")(1, 2)}, "holds a Pair.*not their subclasses"),
    ({"s": np.array(["a", "b"])}, "numpy <U1 value"),
    ({"d": np.datetime64("2026-11-23")}, "numpy datetime64"),
])
def test_encode_names_what_it_cannot_store(value, message):
    with pytest.raises(UnreadableState, match=message):
        encode(value)


def test_decode_refuses_a_forged_generator():
    with pytest.raises(ValueError, match="not a numpy bit generator"):
        decode({"__np_generator__": {"bit_generator": "seed"}})


def test_an_env_whose_state_changes_dtype_is_not_claimed_restorable():
    """Acrobot's state array is float32 after reset and float64 after a step: it cannot be restored in place."""
    vec = build_env(EnvConfig("Acrobot-v1", num_envs=1), seed=0).vector
    assert "AcrobotEnv exposes no state" in why_not_restorable(vec)


def test_a_state_from_other_wrappers_or_another_time_limit_is_refused_before_anything_is_loaded():
    a = build_env(EnvConfig("Pendulum-v1", num_envs=2), seed=0).vector
    a.reset(seed=0)
    state = read_state(a)
    shorter = build_env(EnvConfig("Pendulum-v1", num_envs=2, max_episode_steps=50), seed=0).vector
    shorter.reset(seed=1)
    with pytest.raises(StateMismatch, match="time limit changed since the checkpoint: 200 steps then, 50 now"):
        load_state(shorter, state)
    unclipped = build_env(EnvConfig("Pendulum-v1", num_envs=2, clip_actions=False), seed=0).vector
    unclipped.reset(seed=1)
    with pytest.raises(StateMismatch, match="wrappers changed since the checkpoint"):
        load_state(unclipped, state)
