"""Named presets: complete :class:`TrainConfig` objects to start from.

``cartpole`` is the default of ``ppo-td train``: tuned on this project's machines to
solve CartPole-v1 in few frames. ``cleanrl`` reproduces CleanRL ``ppo.py``'s
defaults exactly (the parity preset). ``pendulum`` is tuned here; the MuJoCo presets
(``halfcheetah``, ``hopper``, ``walker2d``, ``ant``; v5 tasks, MuJoCo is the optional
``mujoco`` extra) use CleanRL ``ppo_continuous_action.py``'s published settings (``ant`` on v4's observation,
without the contact forces). Each preset's comment below says where its settings come from and what they measured;
the returns benchmark's suites (docs/learning.md) run on them.
"""

from __future__ import annotations

import dataclasses
import difflib

from ppo_td.config import EnvConfig, LossConfig, ModelConfig, OptimConfig, TrainConfig

# CleanRL ppo.py (v1.0): every default of its Args, in our names. See docs/cleanrl-names.md. The returns benchmark's
# toytext suite runs Taxi, FrozenLake 8x8 and Blackjack on it (no published PPO settings exist for those).
CLEANRL = TrainConfig(
    env=EnvConfig(env_id="CartPole-v1", num_envs=4),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=0.2,
                    entropy_coeff=0.01, critic_coeff=0.25, loss_critic_type="l2",
                    normalize_advantage=True),
    optim=OptimConfig(lr=2.5e-4, adam_eps=1e-5, anneal_lr=True, update_epochs=4,
                      num_minibatches=4, max_grad_norm=0.5, target_kl=None),
    total_frames=500_000,
    frames_per_batch=4 * 128,
    seed=1,
)

# Tuned for CartPole-v1 on this project's 2-core machines (docs/cleanrl-names.md): 32 envs x
# 16 steps on Gymnasium's numpy-vectorized CartPole, 10 epochs of 2 minibatches, lr 3e-3
# annealed over 50k frames, RL-Zoo's CartPole horizon (gamma 0.98, lambda 0.8), no
# entropy bonus, no value clipping. Measured: seeds 1-3 reached a 20-episode mean of 475
# at 26-31k frames.
CARTPOLE = TrainConfig(
    env=EnvConfig(env_id="CartPole-v1", num_envs=32),
    loss=LossConfig(gamma=0.98, gae_lambda=0.8, clip_epsilon=0.2, clip_value=None,
                    entropy_coeff=0.0, critic_coeff=0.25, loss_critic_type="l2"),
    optim=OptimConfig(lr=3e-3, anneal_lr=True, update_epochs=10, num_minibatches=2,
                      max_grad_norm=0.5),
    total_frames=50_000,
    frames_per_batch=32 * 16,
    seed=1,
)

# CleanRL ppo_continuous_action.py, the published PPO MuJoCo settings (Huang et al. 2022,
# "MuJoCo" details): 1 env x 2048 steps, 10 epochs x 32 minibatches, lr 3e-4 annealed,
# no entropy bonus, observation normalization and return scaling, each clipped to +-10.
_MUJOCO = TrainConfig(
    env=EnvConfig(env_id="HalfCheetah-v5", num_envs=1, normalize_observations=True, obs_clip=10.0,
                  normalize_rewards=True, reward_clip=10.0, clip_actions=True),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=0.2, entropy_coeff=0.0,
                    critic_coeff=0.25, loss_critic_type="l2", normalize_advantage=True),
    optim=OptimConfig(lr=3e-4, adam_eps=1e-5, anneal_lr=True, update_epochs=10, num_minibatches=32,
                      max_grad_norm=0.5),
    total_frames=1_000_000,
    frames_per_batch=2048,
    seed=1,
)


def _mujoco(env_id: str, kwargs: tuple[str, ...] = ()) -> TrainConfig:
    return dataclasses.replace(_MUJOCO, env=dataclasses.replace(_MUJOCO.env, env_id=env_id, kwargs=kwargs))


# Ant-v5 with v4's observation (27 numbers): v5 adds the external contact forces (``cfrc_ext``, 78 more) by default,
# v4 left them out (``use_contact_forces=False``), and the published Ant numbers come from that observation
# (CleanRL's v4; RL Zoo's v3, whose contact forces read as zeros with mujoco-py above 2.0, as Gymnasium's ant_v5.py
# notes). On v5's 105 numbers these settings learned little (last 100 episodes 495.6 +- 74.4, 3 seeds, 1M frames;
# SB3 the same: 424.7 +- 46.4); on v4's, 2,467.7 +- 604.0 (the same seeds; docs/learning.md, 2026-11-29).
ANT = _mujoco("Ant-v5", kwargs=("include_cfrc_ext_in_observation=False",))


# Pendulum-v1, tuned here: 8 envs x 256 steps, 10 epochs x 16 minibatches, lr 1e-3,
# RL-Zoo's short horizon (gamma 0.9), both normalizations, no value clipping.
# Measured: seeds 1-3 reached last-20-episode means of -164, -186, -206 at 100k frames.
PENDULUM = TrainConfig(
    env=EnvConfig(env_id="Pendulum-v1", num_envs=8, normalize_observations=True, normalize_rewards=True),
    loss=LossConfig(gamma=0.9, gae_lambda=0.95, clip_epsilon=0.2, clip_value=None, entropy_coeff=0.0,
                    critic_coeff=0.25, loss_critic_type="l2"),
    optim=OptimConfig(lr=1e-3, anneal_lr=True, update_epochs=10, num_minibatches=16, max_grad_norm=0.5),
    total_frames=100_352,
    frames_per_batch=8 * 256,
    seed=1,
)

# ppo_td/Trading-v0 (the masked example env in examples/trading.py, imported through Gymnasium's
# module:EnvId form; run from the repository folder): 8 envs x 128 steps, 4 epochs x 4
# minibatches, lr 3e-4, entropy 0.01, gamma 0.9, 50k frames. At this budget masking is
# what makes it learn: see benchmarks/speed/masking.py (docs/normalization-and-masking.md).
TRADING = TrainConfig(
    env=EnvConfig(env_id="examples.trading:ppo_td/Trading-v0", num_envs=8),
    loss=LossConfig(gamma=0.9, gae_lambda=0.95, entropy_coeff=0.01),
    optim=OptimConfig(lr=3e-4, update_epochs=4, num_minibatches=4),
    total_frames=50_176,
    frames_per_batch=8 * 128,
    seed=1,
)

# The published generic PPO defaults (Stable-Baselines3's PPO, which CleanRL's MuJoCo settings share): 2048 steps
# per update, minibatches of 64, 10 epochs, lr 3e-4 (constant), gamma 0.99, lambda 0.95, clip 0.2, no entropy
# bonus, value coefficient 0.5 on the squared error, gradients clipped at 0.5, Adam eps 1e-5, one env copy.
# What `ppo-td train --env.env-id X` gets for an env no preset is made for (not CartPole's tuned values).
GENERIC = TrainConfig(
    env=EnvConfig(env_id="CartPole-v1", num_envs=1),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=None, entropy_coeff=0.0,
                    critic_coeff=0.5, loss_critic_type="l2", normalize_advantage=True),
    optim=OptimConfig(lr=3e-4, adam_eps=1e-5, anneal_lr=False, update_epochs=10, num_minibatches=32,
                      max_grad_norm=0.5),
    total_frames=1_000_000,
    frames_per_batch=2048,
    seed=1,
)

# Atari (CleanRL's ppo_atari.py and Huang et al. 2022's Atari details; RL Zoo's atari entry shares all but the
# value clipping): 8 envs x 128 steps, 4 epochs of 4 minibatches, lr 2.5e-4 annealed, clip 0.1 (policy, and
# value as CleanRL does), entropy 0.01, value
# coefficient 0.5 on half the squared error (0.25 here, TorchRL's l2 has no 1/2), gradients clipped at 0.5; the
# Nature CNN shared by actor and critic, heads right on its 512 features; the standard preprocessing
# (ppo_td.envs.atari) on an ALE v5 env without frame skip or sticky actions (as CleanRL's NoFrameskip-v4); 10M
# frames = 40M emulator frames.
ATARI = TrainConfig(
    env=EnvConfig(env_id="ALE/Pong-v5", num_envs=8, atari=True,
                  kwargs=("frameskip=1", "repeat_action_probability=0.0")),
    model=ModelConfig(hidden_sizes=(), activation="relu", shared_trunk=True, encoder="nature"),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.1, clip_value=0.1, entropy_coeff=0.01,
                    critic_coeff=0.25),
    optim=OptimConfig(lr=2.5e-4, anneal_lr=True, update_epochs=4, num_minibatches=4, max_grad_norm=0.5),
    total_frames=10_000_000,
    frames_per_batch=8 * 128,
    seed=1,
)

# Any env whose observations are images, without a preset of its own (CarRacing, a user's pixel env): CleanRL's
# Atari layout and PPO settings (above: 8 envs x 128 steps, 4 epochs of 4 minibatches, the Nature CNN on a shared
# trunk), none of the Atari preprocessing. SB3's generic defaults (1 env x 2048 steps, 10 epochs of 32 minibatches)
# put 640 CNN minibatches in each update: CarRacing-v3 trained at 60 frames/s with them, 131 with these (2026-11-27,
# 2 CPU cores, one run each: ppo-td train --env.env-id CarRacing-v3 [--preset generic] --total-frames 2048/3072).
PIXELS = TrainConfig(
    env=EnvConfig(env_id="CarRacing-v3", num_envs=8),
    model=dataclasses.replace(ATARI.model, encoder="auto"),  # the Nature CNN from 36x36, the small one below
    loss=ATARI.loss,
    optim=ATARI.optim,
    total_frames=1_000_000,
    frames_per_batch=8 * 128,
    seed=1,
)

# Recurrent PPO on CartPole without velocities (ppo_td.envs.partial, RL Zoo's CartPoleNoVel-v1): RL Zoo's tuned
# ppo_lstm settings (rl_zoo3 2.9 hyperparams/ppo_lstm.yml): 8 envs x 32 steps, 20 epochs, lr 1e-3 annealed, gamma
# 0.98, lambda 0.8, no entropy bonus, observations normalized; an LSTM of 64 for each network (enable_critic_lstm)
# then one ReLU layer of 64. RL Zoo anneals the clip range too (lin_0.2); it stays 0.2 here. Tuned here: sequences
# of 16 steps in 2 minibatches (RL Zoo: one minibatch of the whole batch). Measured (seeds 1-6, 100k frames,
# deterministic evaluation over 10 episodes): whole rollouts in one minibatch 2 of 3 seeds >= 475; 16-step
# sequences in one minibatch 5 of 6; 8-step 5 of 6; 16-step in 2 minibatches 4 of 4 (seeds 1-4).
CARTPOLE_NOVEL = TrainConfig(
    env=EnvConfig(env_id="ppo_td.envs.partial:cartpole_no_velocity", num_envs=8, normalize_observations=True),
    model=ModelConfig(hidden_sizes=(64,), activation="relu", recurrent="lstm", recurrent_size=64),
    loss=LossConfig(gamma=0.98, gae_lambda=0.8, clip_epsilon=0.2, clip_value=None, entropy_coeff=0.0,
                    critic_coeff=0.25),
    optim=OptimConfig(lr=1e-3, anneal_lr=True, update_epochs=20, num_minibatches=2, max_grad_norm=0.5,
                      sequence_length=16),
    total_frames=100_096,
    frames_per_batch=8 * 32,
    seed=1,
)

# Recurrent PPO on Pendulum without its angular velocity (RL Zoo's PendulumNoVel-v1): RL Zoo's tuned ppo_lstm gamma
# 0.9, lambda 0.95, lr 1e-3, 10 epochs, both normalizations, LSTM 64 per network then ReLU 64 (same source; it adds
# gSDE exploration, which ppo_td does not have). Tuned here: the `pendulum` preset's batch (8 envs x 256 steps, 16
# minibatches, lr annealed) in sequences of 8 steps. Measured (seeds 1-3, 100k frames, deterministic evaluation over
# 10 episodes): -189, -188, -191; RL Zoo's layout (4 envs x 1024, sequences of 128, 32 minibatches): -212, -332,
# -235; sequences of 32: -218, -255, -208; one shared core with 8-step sequences: -207, -249, -222.
PENDULUM_NOVEL = TrainConfig(
    env=EnvConfig(env_id="ppo_td.envs.partial:pendulum_no_velocity", num_envs=8, normalize_observations=True,
                  normalize_rewards=True),
    model=ModelConfig(hidden_sizes=(64,), activation="relu", recurrent="lstm", recurrent_size=64),
    loss=LossConfig(gamma=0.9, gae_lambda=0.95, clip_epsilon=0.2, clip_value=None, entropy_coeff=0.0,
                    critic_coeff=0.25),
    optim=OptimConfig(lr=1e-3, anneal_lr=True, update_epochs=10, num_minibatches=16, max_grad_norm=0.5,
                      sequence_length=8),
    total_frames=100_352,
    frames_per_batch=8 * 256,
    seed=1,
)

# Robot learning in a batched simulator, rsl_rl's shape as Isaac Lab ships it for ANYmal-C (isaac-sim/IsaacLab
# 0a9ddd3, isaaclab_tasks/manager_based/locomotion/velocity/config/anymal_c/agents/rsl_rl_ppo_cfg.py,
# AnymalCRoughPPORunnerCfg): 4,096 envs x 24 steps (num_steps_per_env), 5 epochs of 4 minibatches, lr 1e-3 adapted
# to a KL of 0.01 (schedule="adaptive", rsl_rl's bounds 1e-5 and 1e-2, each minibatch), clip 0.2 for the ratio and
# the value, value coefficient 1.0 on the squared error (rsl_rl's, like TorchRL's l2, has no 1/2), entropy 0.005,
# gamma 0.99, lambda 0.95, gradients clipped at 1.0 (the actor's and the critic's apart, as rsl_rl's update clips
# each network), Adam's eps 1e-8 (torch's, which rsl_rl keeps), ELU networks of
# [512, 256, 128] with PyTorch's initialization, a std of 1.0 to start (init_noise_std) learned as itself
# (std_type="scalar": rsl_rl with a log-std learned Brax ant far slower; ppo_td measured alike either way), one
# random order of minibatches an update that every epoch takes again (shuffle="update", rsl_rl's
# mini_batch_generator: with a fresh order each epoch ppo_td's adapted rate settled lower and Brax ant learned
# slower, docs/robot-learning.md), no observation or reward normalization, 1,500 iterations. Not rsl_rl's:
# advantages standardized per minibatch (rsl_rl: over the whole batch), time-outs bootstrapped from the next
# state's value (rsl_rl adds gamma * V(s) to the reward), the KL estimated by k3 from the sampled actions (rsl_rl: the
# two Gaussians' own). The env is Brax's ant (ppo_td.envs.simulators:brax_batch; the `brax` extra), cut at 1,000
# steps as Brax's training episodes; any batched simulator takes its place with --env.env-id (and
# --frames-per-batch 24 x --env.num-envs).
RSL_RL_ROUGH = TrainConfig(
    env=EnvConfig(env_id="ppo_td.envs.simulators:brax_batch", kwargs=("env_name='ant'",), num_envs=4096,
                  max_episode_steps=1000),
    model=ModelConfig(hidden_sizes=(512, 256, 128), activation="elu", orthogonal_init=False, log_std_init=0.0,
                      std_type="scalar"),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=0.2, entropy_coeff=0.005,
                    critic_coeff=1.0, loss_critic_type="l2", normalize_advantage=True),
    optim=OptimConfig(lr=1e-3, adam_eps=1e-8, anneal_lr=False, update_epochs=5, num_minibatches=4, max_grad_norm=1.0,
                      grad_clip_scope="each", desired_kl=0.01, kl_lr_every="minibatch", min_lr=1e-5, max_lr=1e-2,
                      shuffle="update"),
    total_frames=1500 * 24 * 4096,
    frames_per_batch=24 * 4096,
    seed=1,
)

# The same for flat ground (AnymalCFlatPPORunnerCfg): [128, 128, 128] networks, 300 iterations.
RSL_RL_FLAT = dataclasses.replace(RSL_RL_ROUGH, model=dataclasses.replace(RSL_RL_ROUGH.model,
                                                                          hidden_sizes=(128, 128, 128)),
                                  total_frames=300 * 24 * 4096)

# Multi-agent (ppo_td.envs.multiagent). VMAS navigation at BenchMARL 1.5.2's MAPPO defaults (its
# experiment/base_experiment.yaml, algorithm/mappo.yaml, task/vmas/navigation.yaml): 3 agents, 100 steps,
# 10 envs x 600 steps, 45 epochs of 15 minibatches of 400 per batch (on_policy_n_minibatch_iters=45 passes, each
# over ceil(6000 / 400) minibatches: experiment.py's training loop), lr 5e-5, Adam eps 1e-6, gradients clipped at
# 5, clip 0.2, gamma 0.99, lambda 0.9, no entropy bonus, critic coefficient 1 (TorchRL's l2, as BenchMARL), no
# value clipping, [256, 256] tanh MLPs, parameters shared among agents, tanh-normal actions with a state-dependent
# scale (biased softplus, starting at 1), MAPPO's centralised critic (Yu et al. 2022). Not BenchMARL's: advantages
# normalized per minibatch (the MAPPO paper's and the published PPO detail), orthogonal init (policy head gain
# 1: with 3 epochs per batch the one-agent 0.01 learned slower), and the 100-step limit as a truncation that
# bootstraps (BenchMARL marks it as a termination). The epochs are what makes it learn: with 3 epochs (45
# minibatches in all) the training reward per agent was still below 0 after 72k frames, with 45 it was 0.60 after
# 36k (seed 1; BenchMARL 0.63 after 36k). IPPO: --model.critic-scope agent.
VMAS_NAVIGATION = TrainConfig(
    env=EnvConfig(env_id="navigation", suite="vmas", num_envs=10, max_episode_steps=100,
                  kwargs=("n_agents=3", "collisions=True", "agents_with_same_goal=1", "split_goals=False",
                          "observe_all_goals=False", "shared_rew=False", "lidar_range=0.35", "agent_radius=0.1")),
    model=ModelConfig(hidden_sizes=(256, 256), activation="tanh", squash_actions=True, share_params=True,
                      critic_scope="team", policy_head_gain=1.0),
    loss=LossConfig(gamma=0.99, gae_lambda=0.9, clip_epsilon=0.2, clip_value=None, entropy_coeff=0.0,
                    critic_coeff=1.0, loss_critic_type="l2", normalize_advantage=True),
    optim=OptimConfig(lr=5e-5, adam_eps=1e-6, anneal_lr=False, update_epochs=45, num_minibatches=15,
                      max_grad_norm=5.0),
    total_frames=600_000,
    frames_per_batch=6_000,
    seed=1,
)

# VMAS on a laptop: a VMAS scenario that shows learning on 2 CPU cores within a minute (balance: the team's
# episode reward per agent from about -14 to about 37 in 30 s, 400k frames; docs/multi-agent.md), on some seeds:
# 1 of 3 at these 409,600 frames, 2 of 3 at 5x (the returns benchmark's budget; docs/learning.md). Smaller networks
# (64, 64) and batches (64 envs x 50 steps, 4 epochs of 4 minibatches) than BenchMARL's navigation settings, the
# published PPO learning rate 3e-4; the rest as vmas-navigation.
VMAS_LIGHT = dataclasses.replace(
    VMAS_NAVIGATION,
    env=EnvConfig(env_id="balance", suite="vmas", num_envs=64, max_episode_steps=100),
    model=dataclasses.replace(VMAS_NAVIGATION.model, hidden_sizes=(64, 64)),
    optim=dataclasses.replace(VMAS_NAVIGATION.optim, lr=3e-4, update_epochs=4, num_minibatches=4),
    total_frames=409_600,
    frames_per_batch=64 * 50,
)

# VMAS simple_tag at BenchMARL 1.5.2's settings: its task/vmas/simple_tag.yaml (3 adversaries, which share their
# reward, chase 1 agent among 2 landmarks, 100 steps, no reward shaping) and vmas-navigation's MAPPO settings
# (BenchMARL's defaults). Two agent groups, adversary and agent, each with its own policy and critic, each trained
# on its own reward (BenchMARL's group_map): a competitive two-group task. docs/multi-agent.md has the comparison.
VMAS_TAG = dataclasses.replace(
    VMAS_NAVIGATION,
    env=EnvConfig(env_id="simple_tag", suite="vmas", num_envs=10, max_episode_steps=100,
                  kwargs=("num_good_agents=1", "num_adversaries=3", "num_landmarks=2", "shape_agent_rew=False",
                          "shape_adversary_rew=False", "agents_share_rew=False", "adversaries_share_rew=True",
                          "observe_same_team=True", "observe_pos=True", "observe_vel=True", "bound=1.0",
                          "respawn_at_catch=False")),
)

# MPE simple spread (PettingZoo's mpe2 1.1, 3 agents, 25 steps, discrete actions) with the MAPPO paper's MPE
# settings where ppo_td has them (Yu et al. 2022, appendix, tables of MPE hyperparameters): lr 7e-4, 10 epochs of
# one minibatch, clip 0.2, entropy 0.01, gamma 0.99, lambda 0.95, 64-unit layers, shared parameters, a
# centralised critic, value normalization (the paper's sec. 4.1). Not the paper's: no recurrent layer, 8 envs x 100
# steps. Measured (seed 1, 400k frames): training reward per agent -24.6 -> -18.8, deterministic evaluation -16.1.
MPE_SPREAD = TrainConfig(
    env=EnvConfig(env_id="mpe2.simple_spread_v3", suite="pettingzoo", num_envs=8,
                  kwargs=("N=3", "max_cycles=25")),
    model=ModelConfig(hidden_sizes=(64, 64), activation="tanh", share_params=True, critic_scope="team"),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=0.2, entropy_coeff=0.01,
                    critic_coeff=0.5, loss_critic_type="l2", normalize_advantage=True, normalize_values=True),
    optim=OptimConfig(lr=7e-4, adam_eps=1e-5, anneal_lr=True, update_epochs=10, num_minibatches=1,
                      max_grad_norm=10.0),
    total_frames=400_000,
    frames_per_batch=8 * 100,
    seed=1,
)

# MPE on a laptop: simple speaker-listener (mpe2 1.1; a speaker that sees which landmark is the target and speaks,
# a listener that hears it and moves there: two agents that differ, two groups, one shared reward), 25 steps, with
# mpe-spread's settings. Its reward per agent rises within the first minute on 2 CPU cores (from about -24 to
# about -16, docs/multi-agent.md); simple spread at these settings shows no rise within 2 minutes (measured).
MPE_LIGHT = dataclasses.replace(
    MPE_SPREAD,
    env=EnvConfig(env_id="mpe2.simple_speaker_listener_v4", suite="pettingzoo", num_envs=8, kwargs=("max_cycles=25",)),
    total_frames=120_000,
)

def _rl_zoo(env_id: str, num_envs: int, steps: int, minibatch: int, total_frames: int, normalize: bool = False,
            model: dict | None = None, loss: dict | None = None, optim: dict | None = None) -> TrainConfig:
    """RL Zoo's PPO entry for ``env_id`` over SB3's defaults (``GENERIC``): ``num_envs`` copies x ``steps``,
    minibatches of ``minibatch`` frames, ``normalize`` (RL Zoo's ``normalize: true``: observations and returns)."""
    return dataclasses.replace(
        GENERIC, total_frames=total_frames, frames_per_batch=num_envs * steps,
        env=dataclasses.replace(GENERIC.env, env_id=env_id, num_envs=num_envs, normalize_observations=normalize,
                                normalize_rewards=normalize),
        model=dataclasses.replace(GENERIC.model, **(model or {})),
        loss=dataclasses.replace(GENERIC.loss, **(loss or {})),
        optim=dataclasses.replace(GENERIC.optim, num_minibatches=num_envs * steps // minibatch, **(optim or {})))


# RL Zoo's tuned PPO settings (rl-baselines3-zoo hyperparams/ppo.yml at commit 22e3ff2, SB3's defaults for what an
# entry leaves out; the configs `ppo-td train --from-zoo ppo.yml` makes of them, checked in tests/test_zoo.py), the
# settings of `python -m benchmarks returns` (docs/learning.md). What ppo_td has no counterpart for: RL Zoo anneals
# CartPole's clip range (lin_0.2; constant 0.2 here). MountainCarContinuous explores with gSDE (model.exploration,
# as RL Zoo's use_sde); its batch_size 256 over 8-step rollouts, which SB3 takes as the whole rollout (and
# --from-zoo refuses: 256 does not divide 8), is that rollout here (batch_size 8).
# halfcheetah-zoo is RL Zoo's tuned HalfCheetah-v4 entry on v5, beside the halfcheetah preset (CleanRL's settings).
RL_ZOO = {
    "cartpole-zoo": _rl_zoo("CartPole-v1", 8, 32, 256, 100_000, loss=dict(gamma=0.98, gae_lambda=0.8),
                            optim=dict(lr=1e-3, anneal_lr=True, update_epochs=20)),
    "acrobot": _rl_zoo("Acrobot-v1", 16, 256, 64, 1_000_000, True, loss=dict(gae_lambda=0.94),
                       optim=dict(update_epochs=4)),
    "mountaincar": _rl_zoo("MountainCar-v0", 16, 16, 64, 1_000_000, True, loss=dict(gae_lambda=0.98),
                           optim=dict(update_epochs=4)),
    "mountaincar-continuous": _rl_zoo(
        "MountainCarContinuous-v0", 1, 8, 8, 20_000, True, model=dict(log_std_init=-3.29, orthogonal_init=False,
                                                                   exploration="gsde"),
        loss=dict(gamma=0.9999, gae_lambda=0.9, clip_epsilon=0.1, entropy_coeff=0.00429, critic_coeff=0.19),
        optim=dict(lr=7.77e-05, max_grad_norm=5.0)),
    "lunarlander": _rl_zoo("LunarLander-v3", 16, 1024, 64, 1_000_000,
                           loss=dict(gamma=0.999, gae_lambda=0.98, entropy_coeff=0.01), optim=dict(update_epochs=4)),
    "lunarlander-continuous": _rl_zoo("LunarLanderContinuous-v3", 16, 1024, 64, 1_000_000,
                                      loss=dict(gamma=0.999, gae_lambda=0.98, entropy_coeff=0.01),
                                      optim=dict(update_epochs=4)),
    "bipedalwalker": _rl_zoo("BipedalWalker-v3", 32, 2048, 64, 5_000_000, True,
                             loss=dict(gamma=0.999, clip_epsilon=0.18)),
    "swimmer": _rl_zoo("Swimmer-v5", 4, 1024, 256, 1_000_000, True, loss=dict(gamma=0.9999, gae_lambda=0.98),
                       optim=dict(lr=6e-4)),  # RL Zoo's Swimmer-v4 entry
    "halfcheetah-zoo": _rl_zoo(
        "HalfCheetah-v5", 1, 512, 64, 1_000_000, True,
        model=dict(hidden_sizes=(256, 256), activation="relu", log_std_init=-2.0, orthogonal_init=False),
        loss=dict(gamma=0.98, gae_lambda=0.92, clip_epsilon=0.1, entropy_coeff=0.000401762, critic_coeff=0.58096),
        optim=dict(lr=2.0633e-05, update_epochs=20, max_grad_norm=0.8)),  # RL Zoo's HalfCheetah-v4 entry
}

# MiniGrid (the minigrid package; its ids through Gymnasium's module:EnvId form, so nothing is imported before a run
# asks): RL Zoo's MiniGrid entry as it is (hyperparams/ppo.yml at 22e3ff2: FlatObsWrapper, normalize: true, 8 envs x
# 128 steps, minibatches of 64, 10 epochs, lr 2.5e-4, gamma 0.99, lambda 0.95, SB3's 64x64 tanh networks): the 7x7x3
# symbolic image and the mission flattened, observations and returns normalized. Measured 2026-11-28 at 100k frames,
# seeds 1-5 (docs/learning.md): the small CNN on the image alone, read as it is (scale_images=False), left 2 seeds of
# 5 on a plateau in Empty-Random-5x5 and 1 in DoorKey-5x5, at about 4 minutes a run; this observation solved those
# seeds, at about 1.5 minutes a run.
MINIGRID = _rl_zoo("minigrid:MiniGrid-Empty-Random-5x5-v0", 8, 128, 64, 100_000, True, optim=dict(lr=2.5e-4))
MINIGRID = dataclasses.replace(MINIGRID, env=dataclasses.replace(MINIGRID.env,
                                                                  wrappers=("minigrid.wrappers:FlatObsWrapper",)))

# CliffWalking-v1 (Gymnasium's toy text; none is registered, so episodes are cut at 500 steps): what `ppo-td tune`
# found on the cleanrl preset at 200k frames (docs/tuning.md, "Shown to work: CliffWalking": trial 25 of 30, its
# benchmarks/results/tune/cliffwalking/best_config.json, rounded here): ReLU, 4096-frame batches in 32 minibatches,
# 20 epochs, lr 3.78e-4, gamma 0.99923, GAE lambda 0.99858, clip 0.1, no entropy bonus to speak of (2.3e-8). Measured
# there on 5 fresh seeds: a deterministic -13.8 +- 1.0 (the shortest path is -13), where the cleanrl preset's
# policy never reached the goal (-500 on each); the returns benchmark's cleanrl runs failed on 3 seeds of 5.
CLIFFWALKING = dataclasses.replace(
    CLEANRL, env=EnvConfig(env_id="CliffWalking-v1", num_envs=4, max_episode_steps=500),
    model=dataclasses.replace(CLEANRL.model, activation="relu"),
    loss=dataclasses.replace(CLEANRL.loss, gamma=0.99923, gae_lambda=0.99858, clip_epsilon=0.1, entropy_coeff=2.3e-8),
    optim=dataclasses.replace(CLEANRL.optim, lr=3.78e-4, update_epochs=20, num_minibatches=32, max_grad_norm=0.844),
    total_frames=200_000, frames_per_batch=4096)

# MinAtar (Young & Tian 2019; the minatar package's ids MinAtar/<Game>-v1, minimal action sets, 10x10 images of
# bool channels, MinAtar's own sticky actions at 10%, no Atari preprocessing): PureJaxRL's MinAtar PPO settings (the
# config in its examples/brax_minatar.ipynb, at commit 31756b1): the image flattened into 64x64 ReLU networks (no
# CNN), 64 envs x 128 steps, 4 epochs of 8 minibatches, lr 5e-3 annealed, clip 0.2 (value too), entropy 0.01, value
# coefficient 0.5 on half the squared error, gradients clipped at 0.5, 10M frames. Measured 2026-11-29 on Breakout,
# seed 1, 2M frames: a return of 17.8 over the last iteration's episodes (evaluation 17.0) at 23,281 frames/s, where
# the CleanRL-Atari settings on the small CNN this preset had before reached 6.7 (6.4 on seed 2) at 1,263 frames/s.
# One change from PureJaxRL, lr 2.5e-3 instead of 5e-3: at 5e-3 SpaceInvaders seed 2 of 5 collapsed at 2.2M frames
# (the policy's logits saturated on one action; a return of 3.0 to the end). Measured 2026-11-29, both games x 5
# seeds at 10M frames (docs/learning.md, minatar): SpaceInvaders 359.4 +- 27.2 over the last 100 episodes, no seed
# collapsing, against 202.2 +- 103.9 at 5e-3; Breakout 36.0 +- 14.2 against 33.9 +- 7.9 (intervals overlap).
MINATAR = TrainConfig(
    env=EnvConfig(env_id="MinAtar/Breakout-v1", num_envs=64),
    model=ModelConfig(hidden_sizes=(64, 64), activation="relu", encoder="flat"),
    loss=LossConfig(gamma=0.99, gae_lambda=0.95, clip_epsilon=0.2, clip_value=0.2, entropy_coeff=0.01,
                    critic_coeff=0.25, loss_critic_type="l2", normalize_advantage=True),
    optim=OptimConfig(lr=2.5e-3, adam_eps=1e-5, anneal_lr=True, update_epochs=4, num_minibatches=8, max_grad_norm=0.5),
    total_frames=10_000_000,
    frames_per_batch=64 * 128,
    seed=1,
)

PRESETS: dict[str, TrainConfig] = {
    "cartpole": CARTPOLE,
    "cleanrl": CLEANRL,
    "pendulum": PENDULUM,
    "trading": TRADING,
    "generic": GENERIC,
    "atari": ATARI,
    "pixels": PIXELS,
    "cartpole-novel": CARTPOLE_NOVEL,
    "pendulum-novel": PENDULUM_NOVEL,
    "halfcheetah": _mujoco("HalfCheetah-v5"),
    "hopper": _mujoco("Hopper-v5"),
    "walker2d": _mujoco("Walker2d-v5"),
    "ant": ANT,
    "vmas-navigation": VMAS_NAVIGATION,
    "vmas-light": VMAS_LIGHT,
    "vmas-tag": VMAS_TAG,
    "mpe-spread": MPE_SPREAD,
    "mpe-light": MPE_LIGHT,
    **RL_ZOO,
    "minigrid": MINIGRID,
    "minatar": MINATAR,
    "cliffwalking": CLIFFWALKING,
    "rsl-rl-rough": RSL_RL_ROUGH,
    "rsl-rl-flat": RSL_RL_FLAT,
}


MUJOCO_PRESETS = ("halfcheetah", "hopper", "walker2d", "ant")
SIMULATOR_PRESETS = ("rsl-rl-rough", "rsl-rl-flat")
"""Presets on a batched simulator (the ``brax`` extra): thousands of env copies."""
DEFAULT_PRESET = "cartpole"


def preset_for(env_id: str) -> tuple[str, str]:
    """The preset ``ppo-td train --env.env-id ENV_ID`` starts from without ``--preset``, and why: the preset
    made for that env (the default preset first), else ``generic`` (the published generic PPO defaults)."""
    bare = env_id.rpartition(":")[2]
    if bare.startswith("ALE/"):
        return "atari", f"{bare} is an Atari game"
    if bare.startswith("MinAtar/"):
        return "minatar", f"{bare} is a MinAtar game"
    if bare.startswith("MiniGrid-"):
        return "minigrid", f"{bare} is a MiniGrid env: RL Zoo's MiniGrid entry (the image and mission flattened)"
    for name in (DEFAULT_PRESET, *PRESETS):
        if PRESETS[name].env.env_id.rpartition(":")[2] == bare and name not in ("generic", "pixels",
                                                                                 *SIMULATOR_PRESETS):
            return name, f"the preset made for {bare}"
    images = _observed_images(env_id)
    if images is not None:
        why = (f"{bare} observes images: CleanRL's Atari layout (8 envs x 128 steps, 4 epochs x 4 minibatches, a "
               "CNN: the Nature CNN from 36x36, a small one below)")
        if images == "uint8":
            why += "; uint8 pixels scaled by 1/255: if its entries are indices (as MiniGrid's), --model.no-scale-images"
        return "pixels", why
    return "generic", f"no preset is made for {env_id}: the published generic PPO defaults (SB3's)"


def _observed_images(env_id: str) -> str | None:
    """The dtype (``uint8`` or ``bool``) of the images the registered Gymnasium env ``env_id`` observes (a box of 2
    or 3 dims, which the model layer encodes with a CNN): one copy is made and closed to read its space
    (``module:EnvId``: Gymnasium imports the module that registers it first; the command line imports it from the
    current folder before, as the run's build does). None for anything else, or an env that fails."""
    import gymnasium as gym

    if ":" not in env_id and env_id not in gym.registry:
        return None
    try:
        env = gym.make(env_id)
    except Exception:  # noqa: BLE001 - a missing extra, say: the generic defaults then, and the build says why
        return None
    try:
        space = env.observation_space
        images = isinstance(space, gym.spaces.Box) and space.dtype in ("uint8", "bool") and len(space.shape) in (2, 3)
        return str(space.dtype) if images else None
    finally:
        env.close()


def get_preset(name: str) -> TrainConfig:
    """Return the preset called ``name``; unknown names list the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown preset {name!r}; known presets: {sorted(PRESETS)}.{hint}") from None


def fit_recurrent(config: TrainConfig, recurrent: str) -> tuple[TrainConfig, str]:
    """``config`` with a ``recurrent`` model and sequences that fit its batch, and a line saying what was chosen:
    the longest sequence of at most 32 steps that cuts each env's rollout evenly (CleanRL's and sb3-contrib's
    recurrent PPO replay 128-step rollouts; 32 steps keep a minibatch's gradient from whole rollouts of few envs),
    and the most minibatches, up to ``optim.num_minibatches``, that split the sequences evenly."""
    steps = config.steps_per_env
    length = max(d for d in range(1, min(steps, 32) + 1) if steps % d == 0)
    sequences = config.frames_per_batch // length
    minibatches = max(d for d in range(1, min(sequences, config.optim.num_minibatches) + 1) if sequences % d == 0)
    fitted = dataclasses.replace(config, model=dataclasses.replace(config.model, recurrent=recurrent),
                                 optim=dataclasses.replace(config.optim, sequence_length=length,
                                                           num_minibatches=minibatches))
    return fitted, (f"model.recurrent={recurrent}: sequences of optim.sequence_length={length} steps, "
                    f"optim.num_minibatches={minibatches} ({sequences} sequences per batch of "
                    f"{config.frames_per_batch:,} frames; set either to choose)")
