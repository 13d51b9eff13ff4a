"""Every Gymnasium observation space: its description, its default encoder, and the messages for bad ones."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from ppo_td import EnvConfig, ModelConfig
from ppo_td.envs import build_env
from ppo_td.envs.description import ObservationSpace
from ppo_td.models import make_actor_critic
from ppo_td.models.encoders import DictEncoder, Flatten, NatureCNN, OneHot, SmallCNN, make_encoder

torch.set_num_threads(1)


class MixedObs(gym.Env):
    """A Dict observation with every kind of entry: image (HWC uint8), Discrete, MultiDiscrete, a Tuple of
    MultiBinary and float64 Box, an integer Box."""

    observation_space = gym.spaces.Dict({
        "grid": gym.spaces.Box(0, 255, (6, 6, 2), np.uint8),
        "pos": gym.spaces.Discrete(5),
        "goal": gym.spaces.MultiDiscrete([3, 4]),
        "extra": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Box(-1, 1, (2,), np.float64))),
        "count": gym.spaces.Box(0, 100, (1,), np.int64),
    })
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


class IntBox(gym.Env):
    observation_space = gym.spaces.Box(0, 9, (3,), dtype=np.int64)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, dtype=np.int64), {}

    def step(self, action):
        return np.ones(3, dtype=np.int64), 1.0, False, False, {}


gym.register("ppo_td_test/MixedObs-v0", entry_point=MixedObs, max_episode_steps=20)
gym.register("ppo_td_test/IntBox-v0", entry_point=IntBox, max_episode_steps=10)


def entries(space: ObservationSpace) -> dict:
    return dict(space.entries)


def test_a_dict_observation_is_described_entry_by_entry():
    built = build_env(EnvConfig("ppo_td_test/MixedObs-v0", num_envs=2), seed=0)
    space = built.description.observation_space
    assert space.kind == "dict" and [k for k, _ in space.entries] == ["count", "extra", "goal", "grid", "pos"]
    got = entries(space)
    assert got["grid"] == ObservationSpace("image", (6, 6, 2), "uint8")
    assert got["pos"] == ObservationSpace("discrete", (), "int64", (5,))
    assert got["goal"] == ObservationSpace("multi_discrete", (2,), "int64", (3, 4))  # one-hot, not cast
    assert got["count"] == ObservationSpace("vector", (1,), "int64")  # an integer Box is cast, not one-hot
    tup = entries(got["extra"])
    assert tup["0"] == ObservationSpace("vector", (2,), "int8") and tup["1"].is_flat_float  # float64 -> float32
    td = built.env.rollout(3)
    assert td["next", "observation", "extra", "1"].dtype == torch.float32
    assert "observation_space" in built.description.signature()  # checkpoints record it
    built.close()


def test_a_float_vector_keeps_the_plain_networks_and_signature():
    built = build_env(EnvConfig("CartPole-v1", num_envs=2))
    assert built.description.observation is None and built.description.observation_space.is_flat_float
    assert "observation_space" not in built.description.signature()  # old checkpoints still load
    actor, critic = make_actor_critic(built.description, ModelConfig())
    assert actor.module[0].module.trunk is None and critic.module.trunk is None
    built.close()


def test_integer_box_observations_are_cast():
    built = build_env(EnvConfig("ppo_td_test/IntBox-v0", num_envs=2))
    assert built.description.observation_space == ObservationSpace("vector", (3,), "int64")
    actor, critic = make_actor_critic(built.description, ModelConfig())
    td = built.env.reset()
    assert actor(td)["action"].shape == (2,) and critic(td)["state_value"].shape == (2, 1)
    built.close()


def test_one_hot_matches_torch_one_hot():
    x = torch.tensor([[0, 3], [2, 1], [1, 0]])
    enc = OneHot(ObservationSpace("multi_discrete", (2,), "int64", (3, 4)))
    expected = torch.cat([nn.functional.one_hot(x[:, 0], 3), nn.functional.one_hot(x[:, 1], 4)], -1).float()
    assert enc.out_features == 7 and torch.equal(enc(x), expected)
    single = OneHot(ObservationSpace("discrete", (), "int64", (5,)))
    idx = torch.tensor([[4, 0, 2]])  # [env, time]
    assert torch.equal(single(idx), nn.functional.one_hot(idx, 5).float())


def test_a_cnn_reads_any_batch_shape_the_same_and_scales_uint8():
    torch.manual_seed(0)
    space = ObservationSpace("image", (4, 40, 40), "uint8")  # stacked frames: CHW
    enc = NatureCNN(space)
    x = torch.randint(0, 256, (3, 5, 4, 40, 40), dtype=torch.uint8)  # [env, time, C, H, W]
    out = enc(x)
    assert out.shape == (3, 5, 512)
    assert torch.allclose(out[1, 2], enc(x[1, 2].unsqueeze(0))[0], atol=1e-6)
    # uint8 is scaled by 1/255: the same network on float32 images in [0, 1] gives the same features
    as_float = NatureCNN(ObservationSpace("image", (4, 40, 40), "float32"))
    as_float.load_state_dict(enc.state_dict())
    assert torch.allclose(as_float(x.float() / 255), out, atol=1e-5)


def test_channels_last_images_are_moved_to_channels_first():
    torch.manual_seed(0)
    chw = SmallCNN(ObservationSpace("image", (3, 7, 7), "uint8"))
    hwc = SmallCNN(ObservationSpace("image", (7, 7, 3), "uint8"))  # MiniGrid's layout
    hwc.load_state_dict(chw.state_dict())
    x = torch.randint(0, 256, (2, 3, 7, 7), dtype=torch.uint8)
    assert torch.allclose(hwc(x.permute(0, 2, 3, 1)), chw(x), atol=1e-6)


def test_the_default_encoders_by_kind():
    image = ObservationSpace("image", (84, 84, 3), "uint8")
    grid = ObservationSpace("image", (7, 7, 3), "uint8")
    assert isinstance(make_encoder(image), NatureCNN) and isinstance(make_encoder(grid), SmallCNN)
    assert isinstance(make_encoder(grid, "flat"), Flatten) and make_encoder(grid, "flat").out_features == 147
    assert make_encoder(ObservationSpace("vector", (4,))) is None  # read as it is
    both = make_encoder(ObservationSpace("dict", entries=(("a", ObservationSpace("vector", (4,))), ("b", grid))))
    assert isinstance(both, DictEncoder) and both.out_features == 4 + 256


def test_bad_encoder_choices_name_the_minimum_size_or_the_space():
    with pytest.raises(ValueError, match=r"at least 36x36; this observation is 7x7.*model.encoder='small'"):
        make_encoder(ObservationSpace("image", (7, 7, 3), "uint8"), "nature")
    with pytest.raises(ValueError, match=r"at least 3x3; this observation is 2x2"):
        make_encoder(ObservationSpace("image", (2, 2, 1), "uint8"), "small")
    with pytest.raises(ValueError, match=r"'nature' needs an image observation; this one is vector"):
        make_encoder(ObservationSpace("vector", (4,)), "nature")
    with pytest.raises(ValueError, match="model.encoder"):
        ModelConfig(encoder="resnet")


def wrong_shape_encoder(space):
    module = nn.Flatten()
    module.out_features = 3
    return module


def test_a_custom_encoder_is_checked_and_used_by_both_networks():
    built = build_env(EnvConfig("ppo_td_test/MixedObs-v0", num_envs=2), seed=0)
    with pytest.raises(ValueError, match=r"fails on a batch of zero observations of Dict\(count="):
        make_actor_critic(built.description, ModelConfig(), encoder=wrong_shape_encoder)
    calls = []

    def only_grid(space):
        calls.append(str(space))
        grid = SmallCNN(entries(space)["grid"], features=8)

        class Grid(nn.Module):
            out_features = 8

            def __init__(self):
                super().__init__()
                self.cnn = grid

            def forward(self, td):
                return self.cnn(td.get("grid"))
        return Grid()

    actor, critic = make_actor_critic(built.description, ModelConfig(), encoder=only_grid)
    assert len(calls) == 2  # one encoder each: not shared unless shared_trunk
    td = built.env.reset()
    assert actor(td)["action"].shape == (2,) and critic(td)["state_value"].shape == (2, 1)
    shared_actor, shared_critic = make_actor_critic(
        built.description, dataclasses.replace(ModelConfig(), shared_trunk=True), encoder=only_grid)
    assert shared_actor.module[0].module.trunk is shared_critic.module.trunk
    built.close()


def test_encoder_from_an_import_path(tmp_path, monkeypatch):
    (tmp_path / "my_encoders.py").write_text(
        "from ppo_td.models.encoders import Flatten\n"
        "def flat(space):\n    return Flatten(space)\n")
    monkeypatch.chdir(tmp_path)
    built = build_env(EnvConfig("ppo_td_test/IntBox-v0", num_envs=2))
    actor, _ = make_actor_critic(built.description, ModelConfig(encoder="my_encoders:flat"))
    assert isinstance(actor.module[0].module.trunk, Flatten)
    built.close()


def test_atari_episodic_life_and_fire_reset():
    """A lost life ends the learner's episode but not the game; Breakout gets FIRE pressed at reset."""
    from ppo_td.envs.atari import EpisodicLife, atari_wrappers, needs_fire

    gym.register_envs(pytest.importorskip("ale_py"))
    env = atari_wrappers(gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0))
    assert env.observation_space.shape == (4, 84, 84) and needs_fire(env)
    life = env
    while not isinstance(life, EpisodicLife):
        life = life.env
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
        if terminated or truncated:
            break
    assert terminated and life.env.unwrapped.ale.lives() == 4  # one life lost: the learner's episode ends
    env.reset()
    assert life.env.unwrapped.ale.lives() == 4  # ... and the game goes on
    env.step(0)
    env.reset()  # any other reset (a time limit outside, a caller's reset) starts a new game
    assert life.env.unwrapped.ale.lives() == 5
    with pytest.raises(ValueError, match="skips frames itself.*frameskip=1"):
        atari_wrappers(gym.make("ALE/Breakout-v5"))


class StateAndImage(gym.Env):
    """TorchRL names a Dict's "state" entry "observation"; ppo_td renames the data alike."""

    observation_space = gym.spaces.Dict({"state": gym.spaces.Box(-1, 1, (3,), np.float32),
                                         "img": gym.spaces.Box(0, 255, (8, 8, 1), np.uint8)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class ShiftedIndex(StateAndImage):
    observation_space = gym.spaces.Discrete(4, start=1)


gym.register("ppo_td_test/StateAndImage-v0", entry_point=StateAndImage, max_episode_steps=10)
gym.register("ppo_td_test/ShiftedIndex-v0", entry_point=ShiftedIndex, max_episode_steps=10)


def test_a_state_entry_and_shifted_indices():
    built = build_env(EnvConfig("ppo_td_test/StateAndImage-v0", num_envs=2), seed=0)
    assert [k for k, _ in built.description.observation_space.entries] == ["img", "observation"]
    assert built.env.rollout(3)["next", "observation", "observation"].shape == (2, 3, 3)
    built.close()
    with pytest.raises(ValueError, match=r"Discrete\(4, start=1\), whose indices start at 1"):
        build_env(EnvConfig("ppo_td_test/ShiftedIndex-v0", num_envs=2))


def test_the_encoder_probe_leaves_running_statistics_alone():
    class Normed(nn.Module):
        out_features = 3

        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm1d(3)

        def forward(self, x):
            return self.norm(x.float())

    made = []
    make_actor_critic(build_env(EnvConfig("ppo_td_test/IntBox-v0", num_envs=2)).description, ModelConfig(),
                      encoder=lambda space: made.append(Normed()) or made[-1])
    assert all(torch.equal(m.norm.running_mean, torch.zeros(3)) and m.training for m in made)


def test_auto_reads_small_arrays_and_other_float_dtypes_without_a_cnn():
    assert isinstance(make_encoder(ObservationSpace("image", (5, 2), "bool")), Flatten)  # a mask, not a picture
    assert isinstance(make_encoder(ObservationSpace("image", (10, 2, 5), "float32")), Flatten)
    assert isinstance(make_encoder(ObservationSpace("vector", (3,), "float16")), Flatten)  # cast for the MLP


def test_symbolic_images_are_read_as_they_are_when_asked():
    """MiniGrid's 7x7x3 holds indices (object, colour, state: 0-10), which 1/255 shrinks under 0.04;
    ``scale_images=False`` (model.scale_images, the minigrid preset) casts them to float without scaling."""
    torch.manual_seed(0)
    grid = ObservationSpace("image", (7, 7, 3), "uint8")
    scaled, raw = make_encoder(grid), make_encoder(grid, scale_images=False)
    as_float = SmallCNN(ObservationSpace("image", (7, 7, 3), "float32"))  # float images are never scaled
    raw.load_state_dict(scaled.state_dict())
    as_float.load_state_dict(scaled.state_dict())
    x = torch.randint(0, 11, (2, 5, 7, 7, 3), dtype=torch.uint8)
    assert torch.allclose(raw(x), as_float(x.float()), atol=1e-6)
    assert torch.allclose(scaled(x), as_float(x.float() / 255), atol=1e-6)
    assert not torch.allclose(raw(x), scaled(x), atol=1e-3)
    # the choice reaches every CNN, inside a Dict too
    pixels = ObservationSpace("image", (40, 40, 3), "uint8")
    both = make_encoder(ObservationSpace("dict", entries=(("a", grid), ("b", pixels))), scale_images=False)
    assert [m.input.scale for m in both.encoders.values()] == [1.0, 1.0]
    assert make_encoder(pixels, "nature").input.scale == 1 / 255
