"""One benchmark run in its own process: ppo_td, Stable-Baselines3 or skrl, one config, one seed.

Run by the suites (``python -m benchmarks``) as ``python -m benchmarks.common.worker JSON`` (by hand: ``python -m
benchmarks worker JSON``, before 2026-12-06 ``python -m benchmarks.worker JSON``); prints one JSON result line. A
separate process per run keeps peak memory and state apart and keeps import time out of the timed region.

Spec keys: ``library`` ("ppo_td" | "sb3" | "skrl"; with a recurrent preset "sb3" is sb3-contrib's RecurrentPPO, in
a turn-based game its MaskablePPO),
``preset`` (a ppo_td preset: the config both libraries use) or ``config`` (a whole config,
``ppo_td.config.to_dict``), ``sb3_zoo`` (use RL-Zoo's tuned CartPole settings instead),
``seed``, ``total_frames`` (optional override), ``eval_episodes`` (0: none), ``step_loop`` and
``fast_forward`` (optional overrides of ``collector.step_loop`` and ``loss.fast_forward``), ``compile`` (eager where
not given), ``device`` (the networks'; SB3's ``device=``), ``workers`` (ppo_td: that many worker processes; SB3:
``SubprocVecEnv``),
``vectorization`` (ppo_td's ``env.vectorization``),
``num_envs``
(env copies; each keeps the preset's steps per copy, or with ``keep_steps: false`` the batch keeps its size),
``critic_scope`` (multi-agent presets: 'agent' for IPPO, 'team' for MAPPO).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import logging
import resource
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ppo_td.config import TrainConfig, from_dict
from ppo_td.presets import get_preset

# RL-Zoo hyperparams/ppo.yml, CartPole-v1 (1e5 steps, linear lr and clip schedules)
ZOO_CARTPOLE = dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                    learning_rate=1e-3, clip_range=0.2, total_frames=100_000)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ppo_td(config: TrainConfig) -> dict[str, Any]:
    from ppo_td.training import train

    episodes: list[tuple[int, float, float]] = []
    seconds = {"collect": 0.0, "update": 0.0, "advantage": 0.0, "frames": 0, "time": 0.0}

    def record(metrics: dict[str, Any], pipeline: Any) -> None:
        """Every iteration's episodes and times, as they come (TrainResult keeps only the recent ones)."""
        episodes.extend((e["frames"], metrics["time"], e["return"]) for e in metrics["ended_episodes"])
        seconds["collect"] += metrics["collect_seconds"]
        seconds["update"] += metrics["update_seconds"]
        seconds["advantage"] += metrics["advantage_seconds"]  # (a part of the update's)
        seconds["frames"], seconds["time"] = metrics["frames"], metrics["time"]

    result = train(config, callbacks=[record])
    return {
        "episodes": episodes,
        "eval_returns": result.eval_returns,
        # episodes still running at eval_max_steps: the reward each had reached (the returns are the ended ones')
        "eval_cut": result.evaluation.cut if result.evaluation is not None else [],
        "eval_groups": result.evaluation.groups if result.evaluation is not None else {},  # several agent groups
        "frames": seconds["frames"],
        "train_seconds": seconds["time"],
        "collect_seconds": seconds["collect"],
        "update_seconds": seconds["update"],
        "advantage_seconds": seconds["advantage"],
    }


def _sb3_env_id(config: TrainConfig) -> Any:
    """What SB3's make_vec_env takes: the Gymnasium id, or for ppo_td's ``module:function`` form the factory; with
    ``env.kwargs`` (the ant preset's v4 observation), ``env.wrappers`` (MiniGrid's FlatObsWrapper) or
    ``env.max_episode_steps``, a maker of the env as ppo_td's user sees it (:func:`ppo_td.envs.gym_env`: the id,
    its kwargs, the wrappers and the time limit)."""
    from ppo_td.envs import env_factory, gym_env

    if config.env.wrappers or config.env.kwargs or config.env.max_episode_steps is not None:
        return functools.partial(gym_env, config.env)
    return env_factory(config.env.env_id) or config.env.env_id


def sb3_vec_env(config: TrainConfig, n_envs: int, seed: int) -> Any:
    """SB3's vector env of ``config``'s env (:func:`_sb3_env_id`), integer observations given as floats
    (:func:`_float_observations`), without a render mode, as ppo_td's: what its training, evaluation and latency runs
    step. A turn-based game (ppo_td's :class:`~ppo_td.envs.games.TurnBased`: the learner's seat against
    ``env.opponent``) as sb3-contrib's MaskablePPO takes it (:class:`BoardForMaskablePPO`)."""
    from stable_baselines3.common.env_util import make_vec_env

    if turn_based(config):
        from ppo_td.envs import gym_env

        return make_vec_env(functools.partial(gym_env, config.env), n_envs=n_envs, seed=seed,
                            wrapper_class=BoardForMaskablePPO)
    env_id = _sb3_env_id(config)
    if isinstance(env_id, str):  # make_vec_env gives an id render_mode='rgb_array': LunarLander then makes a Box2D
        # body of every engine puff, which its world steps (a fifth of SB3's frames/s late in a run); gym.make gives
        # none, as ppo_td's and skrl's envs have, and takes an env whose constructor has no render_mode
        env_id = functools.partial(gym.make, env_id)
    return make_vec_env(env_id, n_envs=n_envs, seed=seed, wrapper_class=_float_observations)


@functools.cache
def _turn_based(env: Any) -> bool:
    from ppo_td.envs import gym_env
    from ppo_td.envs.games import TurnBased

    if env.multiagent:
        return False
    game = gym_env(env)
    game.close()
    return isinstance(game, TurnBased)


def turn_based(config: TrainConfig) -> bool:
    """Whether ``config``'s env is a turn-based game (one env built to see)."""
    return _turn_based(config.env)


class BoardForMaskablePPO(gym.Wrapper):
    """A turn-based game as sb3-contrib's MaskablePPO takes it (the PettingZoo tutorial's way): the observation is
    the board alone, flattened to floats (what ppo_td's network reads of ``{observation, action_mask}``), and the
    legal moves come from ``action_masks()``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        board = env.observation_space["observation"]
        self.observation_space = gym.spaces.Box(board.low.reshape(-1).astype(np.float32),
                                                board.high.reshape(-1).astype(np.float32), dtype=np.float32)
        self._mask = np.ones(env.action_space.n, dtype=bool)

    def _board(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        self._mask = np.asarray(observation["action_mask"], dtype=bool)
        return np.asarray(observation["observation"], dtype=np.float32).reshape(-1)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        observation, info = self.env.reset(**kwargs)
        return self._board(observation), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return self._board(observation), reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        return self._mask


def _float_observations(env: gym.Env) -> gym.Env:
    """``env`` with an integer Box observation (MiniGrid's FlatObsWrapper: uint8) given as float32, the same values.

    SB3 2.9's ``RolloutBuffer`` stores observations in the observation space's dtype, and ``VecNormalize`` keeps an
    integer space for anything but images, so the normalized observations SB3 acts on were stored as uint8 (-1.56
    as 255, -3.2 as 253, 0.4 as 0) and trained on: on MiniGrid it stalled at 0 on every seed. Measured 2026-11-29
    (seed 1, RL Zoo's MiniGrid entry): 0.0 in evaluation with the uint8 space, 0.967 without observation
    normalization."""
    space = env.observation_space
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.integer):
        return gym.wrappers.DtypeObservation(env, np.float32)
    return env


def _sb3_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The same PPO as ``config`` in SB3's names. SB3's value loss is mse without 1/2, as TorchRL's."""
    from torch import nn

    lr, clip = config.optim.lr, config.loss.clip_epsilon
    return dict(
        n_steps=config.steps_per_env, batch_size=config.minibatch_size, n_epochs=config.optim.update_epochs,
        gamma=config.loss.gamma, gae_lambda=config.loss.gae_lambda, clip_range=clip,
        clip_range_vf=config.loss.clip_value, normalize_advantage=config.loss.normalize_advantage,
        ent_coef=config.loss.entropy_coeff, vf_coef=config.loss.critic_coeff, max_grad_norm=config.optim.max_grad_norm,
        target_kl=config.optim.target_kl, use_sde=config.model.exploration == "gsde",
        sde_sample_freq=config.model.sde_sample_every or -1,
        learning_rate=(lambda progress: progress * lr) if config.optim.anneal_lr else lr,
        policy_kwargs=dict(net_arch=dict(pi=list(config.model.hidden_sizes), vf=list(config.model.hidden_sizes)),
                           activation_fn=nn.Tanh if config.model.activation == "tanh" else nn.ReLU,
                           log_std_init=config.model.log_std_init, ortho_init=config.model.orthogonal_init),
    )


def _recurrent_kwargs(config: TrainConfig) -> dict[str, Any]:
    """sb3-contrib's RecurrentPPO at ``config``'s settings: an LSTM of the same size per network (one shared with
    ``model.shared_recurrent``), the same layers after it; RL Zoo's ``ortho_init=False`` (its recurrent presets,
    which ppo_td's recurrent presets follow). sb3-contrib replays each env's rollout cut at episode starts."""
    kwargs = _sb3_kwargs(config)
    model = config.model
    kwargs["policy_kwargs"].update(lstm_hidden_size=model.recurrent_size, ortho_init=False,
                                   shared_lstm=model.shared_recurrent, enable_critic_lstm=not model.shared_recurrent)
    return kwargs


def run_sb3(config: TrainConfig, zoo: bool) -> dict[str, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    if zoo:
        z = dict(ZOO_CARTPOLE)
        n_envs, total = z.pop("n_envs"), z.pop("total_frames")
        lr, clip = z.pop("learning_rate"), z.pop("clip_range")
        kwargs = dict(z, learning_rate=lambda p: p * lr, clip_range=lambda p: p * clip)
    else:
        n_envs, kwargs = config.env.num_envs, _sb3_kwargs(config)
        total = config.num_iterations * config.frames_per_batch
    policy = "MlpPolicy"
    if config.env.atari:  # SB3's AtariWrapper: the same preprocessing (its own wrappers), 4 stacked frames
        import ale_py
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack

        gym.register_envs(ale_py)
        env_kwargs = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in config.env.kwargs)}
        vec = {}
        if config.collector.backend == "process":  # forked: the children keep ale_py's registration of ALE/ ids
            from stable_baselines3.common.vec_env import SubprocVecEnv

            vec = dict(vec_env_cls=SubprocVecEnv, vec_env_kwargs={"start_method": "fork"})
        env = VecFrameStack(make_atari_env(config.env.env_id, n_envs=n_envs, seed=config.seed,
                                           env_kwargs={"render_mode": None, **env_kwargs}, **vec), n_stack=4)
        policy = "CnnPolicy"  # the Nature CNN, shared by actor and critic, heads on its 512 features
    else:
        env = sb3_vec_env(config, n_envs, config.seed)
    if config.env.normalize_observations or config.env.normalize_rewards:
        env = VecNormalize(env, norm_obs=config.env.normalize_observations, norm_reward=config.env.normalize_rewards,
                           clip_obs=config.env.obs_clip, clip_reward=config.env.reward_clip, gamma=config.loss.gamma)

    class Record(BaseCallback):
        def __init__(self):
            super().__init__()
            self.episodes, self.collect, self.start = [], 0.0, 0.0

        def _on_training_start(self):
            self.start = time.perf_counter()

        def _on_rollout_start(self):
            self.rollout_started = time.perf_counter()

        def _on_rollout_end(self):
            self.collect += time.perf_counter() - self.rollout_started

        def _on_step(self):
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.episodes.append((self.num_timesteps, time.perf_counter() - self.start, info["episode"]["r"]))
            return True

    if turn_based(config):  # the legal moves masked: sb3-contrib's MaskablePPO (it has no gSDE)
        from sb3_contrib import MaskablePPO

        if config.model.recurrent != "none":
            raise ValueError("a turn-based game with a recurrent preset: sb3-contrib's MaskablePPO has no LSTM")

        kwargs = {k: v for k, v in kwargs.items() if k not in ("use_sde", "sde_sample_freq")}
        kwargs["policy_kwargs"] = {k: v for k, v in kwargs["policy_kwargs"].items() if k != "log_std_init"}
        model = MaskablePPO("MlpPolicy", env, seed=config.seed, device="cpu", verbose=0, **kwargs)
    elif config.model.recurrent != "none":
        from sb3_contrib import RecurrentPPO

        if config.model.recurrent != "lstm":
            raise ValueError("sb3-contrib's RecurrentPPO has an LSTM only")
        model = RecurrentPPO("MlpLstmPolicy", env, seed=config.seed, device="cpu", verbose=0,
                             **_recurrent_kwargs(config))
    else:
        device = "cpu" if config.device == "auto" else config.device
        model = PPO(policy, env, seed=config.seed, device=device, verbose=0, **kwargs)
    record = Record()
    started = time.perf_counter()
    model.learn(total_timesteps=total, callback=record)
    seconds = time.perf_counter() - started
    if isinstance(env, VecNormalize):
        env.training, env.norm_reward = False, False
    returns = _sb3_evaluate(model, config, env) if config.eval_episodes else []
    return {"episodes": record.episodes, "eval_returns": returns, "frames": model.num_timesteps,
            "train_seconds": seconds, "collect_seconds": record.collect, "update_seconds": seconds - record.collect}


@dataclasses.dataclass
class EpisodeRecord:
    """What :class:`EpisodeLog` wrappers write: the episodes, the frames stepped, the training start."""

    episodes: list[tuple[int, float, float]] = dataclasses.field(default_factory=list)
    frames: int = 0
    start: float = dataclasses.field(default_factory=time.perf_counter)


class EpisodeLog(gym.Wrapper):
    """Each ended episode of the env copies it wraps, as ``(frames, seconds, return)`` in ``log`` (shared by the
    copies): the frames every copy has stepped so far, the seconds since ``log.start`` (set when training starts).
    What the SB3 side's callback records, for a library (skrl) that keeps no episode list of its own."""

    def __init__(self, env: gym.Env, log: EpisodeRecord) -> None:
        super().__init__(env)
        self.log, self.total = log, 0.0

    def reset(self, **kwargs: Any) -> Any:
        self.total = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.log.frames += 1
        self.total += float(reward)
        if terminated or truncated:
            self.log.episodes.append((self.log.frames, time.perf_counter() - self.log.start, self.total))
            self.total = 0.0
        return obs, reward, terminated, truncated, info


def skrl_vector_env(config: TrainConfig, log: EpisodeRecord) -> gym.vector.SyncVectorEnv:
    """The env copies skrl steps: the env as ppo_td's user sees it (:func:`ppo_td.envs.gym_env`: the id, its kwargs,
    wrappers and time limit), each copy's episodes written to ``log`` (:class:`EpisodeLog`)."""
    from ppo_td.envs import gym_env

    return gym.vector.SyncVectorEnv([lambda: EpisodeLog(gym_env(config.env), log)] * config.env.num_envs)


def run_skrl(config: TrainConfig) -> dict[str, Any]:
    """skrl 2.x's PPO (``skrl.agents.torch.ppo``) at ``config``'s settings, with networks of the same shape.

    The same rollout, epochs, minibatches, coefficients, annealed learning rate, gradient clipping, value clipping
    and observation normalization (skrl's ``RunningStandardScaler``, clipped at ``env.obs_clip``); truncations
    bootstrap as in ppo_td. skrl has no return-based reward scaling (its ``value_preprocessor`` standardizes
    values instead), so ``env.normalize_rewards`` has no counterpart here: skrl does that much less work.
    The update is timed around ``PPO.update`` (GAE included, as in ppo_td's update time); the rest is collection.
    """
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, GaussianMixin, Model
    from skrl.resources.preprocessors.torch import RunningStandardScaler
    from skrl.trainers.torch import SequentialTrainer
    from skrl.utils import set_seed
    from torch import nn

    set_seed(config.seed)
    act = nn.Tanh if config.model.activation == "tanh" else nn.ReLU

    def mlp(inputs: int, outputs: int) -> nn.Sequential:
        sizes = [inputs, *config.model.hidden_sizes]
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:], strict=False):
            layers += [nn.Linear(a, b), act()]
        return nn.Sequential(*layers, nn.Linear(sizes[-1], outputs))

    class Policy(GaussianMixin, Model):
        def __init__(self, observation_space, action_space):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
            GaussianMixin.__init__(self, clip_log_std=False, reduction="sum")
            self.net = mlp(self.num_observations, self.num_actions)
            self.log_std = nn.Parameter(torch.full((self.num_actions,), float(config.model.log_std_init)))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    class Discrete(CategoricalMixin, Model):
        def __init__(self, observation_space, action_space):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
            CategoricalMixin.__init__(self, unnormalized_log_prob=True)
            self.net = mlp(self.num_observations, int(action_space.n))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {}

    class Value(DeterministicMixin, Model):
        def __init__(self, observation_space, action_space):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device="cpu")
            DeterministicMixin.__init__(self)
            self.net = mlp(self.num_observations, 1)

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {}

    class TimedPPO(PPO):
        update_seconds = 0.0

        def update(self, *, timestep: int, timesteps: int) -> None:
            started = time.perf_counter()
            super().update(timestep=timestep, timesteps=timesteps)
            TimedPPO.update_seconds += time.perf_counter() - started

    n = config.env.num_envs
    if config.model.exploration == "gsde":
        raise ValueError("skrl's PPO has no gSDE: this config's policy has no counterpart there")
    log = EpisodeRecord()
    env = wrap_env(skrl_vector_env(config, log), wrapper="gymnasium")
    policy_class = Policy if isinstance(env.action_space, gym.spaces.Box) else Discrete
    models = {"policy": policy_class(env.observation_space, env.action_space),
              "value": Value(env.observation_space, env.action_space)}
    iterations = config.num_iterations
    lr = config.optim.lr
    cfg = PPO_CFG(
        rollouts=config.steps_per_env, learning_epochs=config.optim.update_epochs,
        mini_batches=config.optim.num_minibatches, discount_factor=config.loss.gamma,
        gae_lambda=config.loss.gae_lambda, learning_rate=lr,
        learning_rate_scheduler=torch.optim.lr_scheduler.LambdaLR if config.optim.anneal_lr else None,
        learning_rate_scheduler_kwargs={"lr_lambda": lambda k: 1.0 - min(k, iterations - 1) / iterations}
        if config.optim.anneal_lr else {},
        observation_preprocessor=RunningStandardScaler if config.env.normalize_observations else None,
        observation_preprocessor_kwargs={"size": env.observation_space, "clip_threshold": config.env.obs_clip,
                                         "device": "cpu"} if config.env.normalize_observations else {},
        grad_norm_clip=config.optim.max_grad_norm, ratio_clip=config.loss.clip_epsilon,
        value_clip=config.loss.clip_value or 0.0, entropy_loss_scale=config.loss.entropy_coeff,
        value_loss_scale=config.loss.critic_coeff, kl_threshold=0.0, time_limit_bootstrap=True)
    cfg.experiment.write_interval = 0  # nothing written to disk: no TensorBoard, no checkpoints
    cfg.experiment.checkpoint_interval = 0
    memory = RandomMemory(memory_size=config.steps_per_env, num_envs=n, device="cpu")
    agent = TimedPPO(models=models, memory=memory, observation_space=env.observation_space,
                     action_space=env.action_space, device="cpu", cfg=cfg)
    total = iterations * config.frames_per_batch
    trainer = SequentialTrainer(env=env, agents=agent, cfg={"timesteps": total // n, "headless": True,
                                                            "disable_progressbar": True,
                                                            "close_environment_at_exit": False})
    started = log.start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    env.close()
    return {"episodes": log.episodes, "eval_returns": [], "frames": total, "train_seconds": seconds,
            "collect_seconds": seconds - TimedPPO.update_seconds, "update_seconds": TimedPPO.update_seconds}


def _sb3_evaluate(model, config: TrainConfig, train_env) -> list[float]:
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    # one env (recurrent: evaluate_policy carries the LSTM state and resets it per episode)
    eval_env = sb3_vec_env(config, 1, config.seed + 10_000)
    if isinstance(train_env, VecNormalize):
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False, clip_obs=config.env.obs_clip)
        eval_env.obs_rms = train_env.obs_rms
    if turn_based(config):
        from sb3_contrib.common.maskable.evaluation import evaluate_policy
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=config.eval_episodes, deterministic=True,
                                 return_episode_rewards=True)
    return [float(r) for r in returns]


def main() -> None:
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    base = from_dict(spec["config"]) if "config" in spec else get_preset(spec["preset"])  # a whole config, or a preset
    config = dataclasses.replace(base, seed=spec["seed"], eval_episodes=spec.get("eval_episodes", 10))
    if spec.get("num_envs"):  # the same steps per env copy, so a batch holds num_envs x steps frames
        steps = config.steps_per_env if spec.get("keep_steps", True) else config.frames_per_batch // spec["num_envs"]
        config = dataclasses.replace(config, env=dataclasses.replace(config.env, num_envs=spec["num_envs"]),
                                     frames_per_batch=spec["num_envs"] * steps)
    if spec.get("total_frames"):
        config = dataclasses.replace(config, total_frames=spec["total_frames"])
    if spec.get("step_loop"):
        config = dataclasses.replace(config, collector=dataclasses.replace(config.collector,
                                                                           step_loop=spec["step_loop"]))
    if spec.get("critic_scope"):  # multi-agent: IPPO ('agent') or MAPPO ('team')
        config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                       critic_scope=spec["critic_scope"]))
    if "compile" in spec:
        config = dataclasses.replace(config, compile=spec["compile"])
    elif config.compile == "auto":  # eager unless asked, as every run stored before compile='auto' trained
        config = dataclasses.replace(config, compile=False)
    if spec.get("cudagraphs"):  # ppo_td: the compiled loss replayed as CUDA graphs (with compile=True, on CUDA)
        config = dataclasses.replace(config, cudagraphs=True)
    if spec.get("device"):  # where the networks run (SB3: its device=)
        config = dataclasses.replace(config, device=spec["device"])
    if spec.get("vectorization"):  # ppo_td: env.vectorization ('async': each copy in a process of its own)
        config = dataclasses.replace(config, env=dataclasses.replace(config.env, vectorization=spec["vectorization"]))
    if spec.get("workers"):  # ppo_td: worker processes; SB3: SubprocVecEnv (one process per env copy)
        config = dataclasses.replace(config, collector=dataclasses.replace(
            config.collector, backend="process", num_workers=spec["workers"]))
    if "fast_forward" in spec:
        config = dataclasses.replace(config, loss=dataclasses.replace(config.loss, fast_forward=spec["fast_forward"]))
    if spec["library"] == "ppo_td":
        out = run_ppo_td(config)
    elif spec["library"] == "skrl":
        out = run_skrl(config)
    else:
        out = run_sb3(config, zoo=spec.get("sb3_zoo", False))
    out.update(spec=spec, peak_rss_mb=_peak_rss_mb(),
               eval_mean=statistics.fmean(out["eval_returns"]) if out["eval_returns"] else None)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
