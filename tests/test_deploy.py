"""Using a trained policy: ``load_policy`` against ppo_td's own evaluation, exports against ``Policy``, videos."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type

import ppo_td
from conftest import run_exported_file
from ppo_td import EnvConfig, get_preset
from ppo_td.deploy import load_policy
from ppo_td.models import GaussianHead
from ppo_td.models.recurrent import add_memory
from ppo_td.persist import load_actor
from ppo_td.training.evaluation import make_eval_env

torch.set_num_threads(1)


class DictGrid(gym.Env):
    """A Dict observation (an HWC uint8 image, a Discrete, a Tuple of float64 Box and MultiBinary) with its action
    mask in ``info``: every conversion ``Policy`` makes."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "grid": gym.spaces.Box(0, 255, (5, 5, 1), np.uint8),
            "pos": gym.spaces.Discrete(4),
            "extra": gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,), np.float64), gym.spaces.MultiBinary(2))),
        })
        self.action_space = gym.spaces.Discrete(3)

    def _info(self):
        mask = np.ones(3, dtype=np.int8)
        mask[self.np_random.integers(3)] = 0
        return {"action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))  # the observations follow reset's seed
        self.t = 0
        return self.observation_space.sample(), self._info()

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action == 1), False, self.t >= 15, self._info()


def dict_grid(**kwargs):
    return DictGrid()


CASES = {  # a normalized continuous preset, masked discrete (mask in the observation / in info), recurrent, Dict
    "pendulum": get_preset("pendulum"),
    "trading": get_preset("trading"),
    "trading-info": dataclasses.replace(get_preset("trading"), env=EnvConfig("ppo_td/TradingInfo-v0", num_envs=8)),
    "cartpole-novel": get_preset("cartpole-novel"),
    "dict": dataclasses.replace(get_preset("generic"), env=EnvConfig("test_deploy:dict_grid", num_envs=4)),
    # an asymmetric actor-critic on a Dict of two normalized vectors: the actor reads "policy" only
    "asymmetric": dataclasses.replace(
        get_preset("pendulum"),
        env=dataclasses.replace(get_preset("pendulum").env, env_id="ppo_td.envs.partial:noisy_sensors"),
        model=dataclasses.replace(get_preset("pendulum").model, actor_keys=("policy",), critic_keys=("critic",))),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A short training run of each case (a few iterations: the weights only need to be trained ones)."""
    out = {}
    for name, config in CASES.items():
        config = dataclasses.replace(config, total_frames=2 * config.frames_per_batch, eval_episodes=1)
        out[name] = tmp_path_factory.mktemp(name)
        ppo_td.train(config, run_dir=str(out[name]))
    return out


def evaluation_actions(run, seed: int, steps: int, sampled: bool = False) -> torch.Tensor:
    """The actions ppo_td's evaluation takes in one episode of the eval env (TorchRL's rollout, the actor module)."""
    config, actor, stats = load_actor(run)
    env = add_memory(make_eval_env(config.env, 1, seed, stats), actor)
    mode = ExplorationType.RANDOM if sampled else ExplorationType.DETERMINISTIC
    torch.manual_seed(seed)
    with torch.no_grad(), set_exploration_type(mode):
        td = env.rollout(steps, actor, break_when_any_done=True)
    env.close()
    return td["action"][0]


def policy_actions(policy, seed: int, steps: int) -> list:
    env = policy.make_env()
    env.reset(seed=seed)  # as TorchRL's set_seed seeds the eval env; its first episode is the next reset's
    obs, info = env.reset()
    out = []
    for _ in range(steps):
        mask = info["action_mask"] if policy.layout.mask_from_info else None
        action = policy(obs, action_mask=mask)
        out.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_policy_acts_as_evaluation_does(runs, name):
    policy = load_policy(runs[name], inference="torch")  # bit for bit; numpy's rounding: the test below
    for seed in (0, 1):
        expected = evaluation_actions(runs[name], seed, 200)
        policy.reset()
        got = policy_actions(policy, seed, 200)
        space = policy.layout.action_space
        if isinstance(space, gym.spaces.Box):  # the env clipped evaluation's actions; the policy clips its own
            expected = expected.clamp(torch.as_tensor(space.low), torch.as_tensor(space.high))
        assert len(got) == len(expected)
        assert all(space.contains(a) for a in got)
        np.testing.assert_array_equal(np.stack([np.asarray(a) for a in got]), expected.numpy())


def test_one_numpy_observation_is_answered_in_numpy_within_rounding(runs, tmp_path):
    """A small MLP policy's mode for one numpy observation runs in numpy (models/inference.py): the torch path's
    actions within float rounding, the same types; parameters changed in place or replaced are followed."""
    cartpole = dataclasses.replace(get_preset("cartpole"), total_frames=1024, eval_episodes=1)
    ppo_td.train(cartpole, run_dir=str(tmp_path / "cartpole"))
    for run in (runs["pendulum"], tmp_path / "cartpole"):  # normalized and clipped Gaussian; categorical
        fast, exact = load_policy(run), load_policy(run, inference="torch")
        assert fast._numpy is not None and exact._numpy is None
        env = exact.make_env()
        obs, _ = env.reset(seed=0)
        for _ in range(60):
            action, expected = fast(obs), exact(obs)
            assert fast._numpy_action(obs) is not None  # the call above was answered in numpy
            assert type(action) is type(expected)
            np.testing.assert_allclose(action, expected, rtol=1e-5, atol=1e-6)
            obs, _, terminated, truncated, _ = env.step(expected)
            if terminated or truncated:
                obs, _ = env.reset()
        layer = fast.policy_net.head.net[0] if isinstance(fast.policy_net.head, GaussianHead) \
            else fast.policy_net.head[0]
        layer.weight.data = layer.weight.data * 3.0  # replaced memory: read again at the next call
        exact.load_state_dict(fast.state_dict())
        np.testing.assert_allclose(fast(obs), exact(obs), rtol=1e-5, atol=1e-6)
        assert fast._numpy_action(obs) is not None
        env.close()
    with pytest.raises(ValueError, match="inference='numpy'.*'auto'.*or 'torch'"):
        load_policy(runs["pendulum"], inference="numpy")
    moved, other = load_policy(runs["pendulum"]), load_policy(runs["pendulum"], inference="torch")
    with torch.no_grad():  # other statistics, loaded through state_dict: both paths normalize with them
        stats = {k: v.clone() for k, v in moved.state_dict().items()}
        stats["obs_norm.mean"] += 0.5
        stats["obs_norm.var"] *= 4.0
    moved.load_state_dict(stats)
    other.load_state_dict(stats)
    obs, _ = moved.make_env().reset(seed=3)
    expected = other(obs)
    np.testing.assert_allclose(moved(obs), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(expected, load_policy(runs["pendulum"], inference="torch")(obs), atol=1e-4)
    nan = np.full(4, np.nan, np.float32)  # non-finite outputs: the torch path answers, as it would have
    fast = load_policy(tmp_path / "cartpole")
    assert fast._numpy_action(nan) is None and fast(nan) == load_policy(tmp_path / "cartpole", inference="torch")(nan)


def test_sampled_actions_follow_torch_seed(runs):
    policy = load_policy(runs["trading"], deterministic=False)
    expected = evaluation_actions(runs["trading"], 3, 100, sampled=True)
    torch.manual_seed(3)
    got = policy_actions(policy, 3, 100)
    np.testing.assert_array_equal(np.array(got), expected.numpy())


def test_one_observation_or_a_batch_numpy_or_torch(runs):
    policy = load_policy(runs["pendulum"])
    obs = np.stack([policy.make_env().reset(seed=s)[0] for s in range(5)])
    batch = policy(obs)
    assert batch.shape == (5, 1) and batch.dtype == np.float32
    for i in range(5):  # a matrix product may round a batch's rows apart from one row's by an ulp
        np.testing.assert_allclose(policy(obs[i]), batch[i], rtol=1e-5, atol=1e-7)
    tensor = policy(torch.as_tensor(obs))
    assert isinstance(tensor, torch.Tensor) and torch.equal(tensor, torch.as_tensor(batch))
    discrete = load_policy(runs["trading"])
    obs, _ = discrete.make_env().reset(seed=0)
    assert isinstance(discrete(obs), int)


def test_recurrent_policy_carries_and_resets_its_state(runs):
    policy = load_policy(runs["cartpole-novel"])
    obs = np.stack([policy.make_env().reset(seed=s)[0] for s in range(3)])
    first = policy(obs)
    policy.reset()
    assert np.array_equal(policy(obs), first)  # from zeros again
    with pytest.raises(ValueError, match="holds the state of 3 episodes and got a batch of 2"):
        policy(obs[:2])
    policy.reset(np.array([True, False, False]))
    policy(obs)  # row 0 restarts, the others go on
    policy.reset()
    assert isinstance(policy(obs[0]), int)  # one observation, one Discrete action


def test_wrong_observations_name_expected_and_received(runs):
    policy = load_policy(runs["pendulum"])
    with pytest.raises(ValueError, match=r"shape \(4,\) and dtype float64; the policy expects \(3,\)"):
        policy(np.zeros(4))
    grid = load_policy(runs["dict"])
    obs, info = grid.make_env().reset(seed=0)
    with pytest.raises(ValueError, match=r"action_mask=info\['action_mask'\]"):
        grid(obs)
    scaled = {**obs, "grid": obs["grid"] / 255.0}
    with pytest.raises(ValueError, match="'observation.grid' has dtype float64; the policy expects uint8"):
        grid(scaled, action_mask=info["action_mask"])
    with pytest.raises(ValueError, match="no entry 'observation.pos'"):
        grid({k: v for k, v in obs.items() if k != "pos"}, action_mask=info["action_mask"])
    with pytest.raises(ValueError, match="trained without action masks"):
        policy(np.zeros(3, np.float32), action_mask=np.ones(1))
    with pytest.raises(ValueError, match=r"action_mask has shape \(4,\); the policy expects \(3,\)"):
        grid(obs, action_mask=np.ones(4))
    with pytest.raises(ValueError, match=r"allows no action in rows \[1\]"):
        grid(_stack([obs, obs]), action_mask=np.array([[1, 0, 0], [0, 0, 0]]))


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


FORMATS = ["torchscript", "export",
           pytest.param("onnx", marks=pytest.mark.skipif(not (_has("onnxscript") and _has("onnxruntime")),
                                                         reason="the export extra (onnx, onnxscript, onnxruntime)"))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_exported_files_act_as_the_policy_without_ppo_td(runs, tmp_path, fmt):
    """Each case's file, loaded in a fresh process with plain torch or onnxruntime (ppo_td, tensordict and TorchRL
    never imported), gives Policy's actions to 1e-5 on random observations of the env's space: 6 steps of a batch
    of 5, the state fed back for the recurrent one."""

    from ppo_td.deploy.export import export_inputs, export_policy

    for name in CASES:
        policy = load_policy(runs[name])
        space = policy.layout.observation_space
        space.seed(7)
        steps = [[_legal(space.sample(), i) for i in range(5)] for _ in range(6)]
        masks = [np.stack([np.eye(3, dtype=np.int8)[i % 3] ^ 1 for i in range(5)]) for _ in steps]
        batches = [_stack(obs) for obs in steps]
        mask = masks if policy.layout.mask_from_info else [None] * 6
        expected = np.stack([policy(batches[t], action_mask=mask[t]) for t in range(6)])
        arrays = [export_inputs(policy, batches[t], mask[t]) for t in range(6)]
        data = {f"in{i}": np.stack([a[i].numpy() for a in arrays]) for i in range(len(arrays[0]))}
        data.update({f"state{j}": np.zeros((5, *shape), np.float32) for j, shape in enumerate(policy.memory.values())})
        path = export_policy(policy, fmt, tmp_path / f"{name}.{fmt}")
        got = run_exported_file(fmt, path, data, tmp_path)
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5, err_msg=name)


def _legal(obs, i: int):
    """A sampled observation whose action mask (if it has one) allows at least action ``i % 3``."""
    if isinstance(obs, dict) and "action_mask" in obs:
        obs["action_mask"][i % 3] = 1
    return obs


def _stack(observations: list):
    first = observations[0]
    if isinstance(first, dict):
        return {k: _stack([o[k] for o in observations]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack([o[i] for o in observations]) for i in range(len(first)))
    return np.stack([np.asarray(o) for o in observations])


def test_export_command_writes_checks_and_names_its_inputs(runs, tmp_path, capsys):
    from ppo_td.cli import main

    out = tmp_path / "masked.pt2"
    assert main(["export", str(runs["trading"]), "--format", "export", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.is_file() and f"wrote {out} (export)" in printed
    assert "inputs: observation float32 (batch, 4); action_mask bool (batch, 3)\noutputs: action\n" in printed
    assert "match the policy's on 64 random inputs" in printed
    assert main(["export", str(runs["cartpole-novel"]), "--format", "torchscript"]) == 0
    assert (runs["cartpole-novel"] / "policy.pt").is_file()  # default: in the run folder
    assert "inputs: observation float32 (batch, 2); actor_h float32 (batch, 1, 64); actor_c" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="2"):
        main(["export", str(runs["trading"]), "--format", "tflite"])
    assert "invalid choice: 'tflite'" in capsys.readouterr().err


@pytest.mark.skipif(not (_has("onnx") and _has("onnxscript")), reason="the export extra")
def test_onnx_export_prints_only_what_a_user_can_act_on(runs, tmp_path, capfd):
    import warnings

    from ppo_td.cli import main

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["export", str(runs["trading"]), "--format", "onnx", "--out", str(tmp_path / "p.onnx")]) == 0
    out, err = capfd.readouterr()
    assert "[torch.onnx]" not in out + err and "torchvision" not in out + err, out + err
    assert not [w for w in caught if issubclass(w.category, (FutureWarning, UserWarning))], caught
    assert out.startswith(f"wrote {tmp_path / 'p.onnx'} (onnx)")


def test_export_refusals_name_the_way_out(runs, tmp_path, monkeypatch):
    import importlib.util

    from tensordict.nn import TensorDictModule
    from torch import nn

    from ppo_td.deploy import Policy
    from ppo_td.deploy.export import ExportError, export_policy

    policy = load_policy(runs["pendulum"])
    custom = Policy(TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"]), policy.config, policy.layout,
                    policy.obs_norm.state_dict())
    np.testing.assert_array_equal(custom(np.zeros((2, 3), np.float32)).shape, (2, 1))  # acts...
    with pytest.raises(ExportError, match="TensorDictModule that ppo_td's factories did not build"):
        export_policy(custom, "torchscript", tmp_path / "x.pt")  # ...but export bakes in ppo_td's networks only
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a))
    with pytest.raises(ExportError, match=r"needs onnxscript: pip install 'ppo_td\[export\]'"):
        export_policy(policy, "onnx", tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists() and not (tmp_path / "x.pt").exists()


needs_video = pytest.mark.skipif(not (_has("moviepy") and _has("pygame")), reason="the video extra (moviepy, pygame)")


@needs_video
def test_videos_of_eval_and_training(runs, tmp_path, capsys, monkeypatch):
    import imageio.v3 as iio

    from ppo_td.cli import main

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # what the commands set without a display: restored after
    monkeypatch.setenv("MUJOCO_GL", "egl")
    assert main(["eval", str(runs["pendulum"]), "--episodes", "2", "--video", str(tmp_path / "v"),
                 "--video-episodes", "2"]) == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("video: ")]
    assert [line.split()[1] for line in lines] == [str(tmp_path / "v" / f"eval-episode-{i}.mp4") for i in range(2)]
    evaluation = load_actor(runs["pendulum"])
    first = ppo_td.training.evaluate(evaluation[1], evaluation[0].env, 1, seed=0, obs_stats=evaluation[2]).returns[0]
    assert lines[0].endswith(f"(return {first:.1f})")  # the first video is evaluation's first episode
    frames = iio.imread(tmp_path / "v" / "eval-episode-0.mp4", plugin="pyav" if _has("av") else None)
    assert frames.shape[0] >= 150 and frames.shape[-1] == 3  # Pendulum: 200 steps, RGB frames
    run = tmp_path / "run"
    assert main(["train", "--preset", "cleanrl", "--run-dir", str(run), "--total-frames", "2048",
                 "--video-every", "2", "--no-progress", "--eval-episodes", "1"]) == 0
    assert sorted(p.name for p in (run / "videos").iterdir()) == [f"iter_00000{i}-episode-0.mp4" for i in (2, 4)]


def test_an_env_without_rgb_array_is_refused_before_anything_is_written(runs, tmp_path, capsys):
    from ppo_td.cli import main

    assert main(["eval", str(runs["trading"]), "--episodes", "1", "--video", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err
    assert "env 'examples.trading:ppo_td/Trading-v0' cannot render 'rgb_array' frames" in err
    assert "its render modes are none" in err
    run = tmp_path / "run"
    assert main(["train", "--preset", "trading", "--run-dir", str(run), "--video-every", "1"]) == 2
    assert "cannot render 'rgb_array'" in capsys.readouterr().err and not run.exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_policy_on_cuda_acts_as_on_cpu(runs):
    for name in ("pendulum", "trading", "cartpole-novel"):
        cpu, gpu = load_policy(runs[name]), load_policy(runs[name], device="cuda")
        obs = np.stack([cpu.make_env().reset(seed=s)[0]["observation"] if name == "trading" else
                        cpu.make_env().reset(seed=s)[0] for s in range(4)])
        mask = {"action_mask": np.ones((4, 3), np.int8)} if name == "trading" else {}
        batch = {"observation": obs, **mask} if mask else obs
        np.testing.assert_allclose(gpu(batch), cpu(batch), rtol=1e-5, atol=1e-5)


def test_a_gpu_that_is_not_here_is_refused(runs):
    if torch.cuda.is_available():
        pytest.skip("CUDA is here")
    with pytest.raises(ValueError, match="cuda"):
        load_policy(runs["pendulum"], device="cuda")


def test_episode_start_in_a_vector_env_restarts_exactly_those_rows(runs):
    """The docs' NEXT_STEP pattern (episode_start = the previous step's done) on Gymnasium's default vector env:
    at a new episode's first observation a row's state is the zero state's successor (what a fresh policy gives
    for that observation alone); elsewhere it carries on."""
    policy, fresh = load_policy(runs["cartpole-novel"]), load_policy(runs["cartpole-novel"])
    envs = gym.vector.SyncVectorEnv([policy.make_env] * 3)  # NEXT_STEP autoreset, Gymnasium's default
    obs, _ = envs.reset(seed=10)
    done, starts, carried = np.ones(3, bool), 0, 0
    for _ in range(300):
        action = policy(obs, episode_start=done)
        for i in range(3):
            fresh.reset()
            fresh(obs[i])
            same = all(torch.allclose(policy.state[k][i], fresh.state[k][0], atol=1e-6) for k in policy.state)
            assert same == bool(done[i]), (i, done)
            starts, carried = starts + done[i], carried + (not done[i])
        obs, _, terminated, truncated, _ = envs.step(action)
        done = terminated | truncated
    assert starts >= 6 and carried > 100  # episodes ended and began in every kind of row


def test_print_of_a_policy_names_its_env_spaces_and_networks(runs):
    text = repr(load_policy(runs["pendulum"]))
    assert text.startswith("Policy(env='Pendulum-v1', observation_space=Box(")
    assert "action_space=Box(-2.0, 2.0, (1,), float32)" in text and "networks=Linear 3-" in text
    assert "deterministic" in text and "device=cpu" in text
