"""The two floors a PPO run's time is measured against (issue 65): the env alone, stepped with random actions in the
same Gymnasium vector env the run steps, and the update alone, the same minibatches through the smallest plain-torch
PPO step on the same networks. Used by ``profile_steps`` (one preset) and ``time_split`` (every env of a returns
suite)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def timed(clock: dict[str, float], name: str, call: Callable) -> Callable:
    """``call`` with its seconds added to ``clock[name]`` at every call (a clock around a part of a run)."""
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            clock[name] += time.perf_counter() - start
    return run


def per_call(call: Callable[[], Any], n: int) -> float:
    """Seconds per call of ``call`` over ``n`` calls."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def random_stepper(vec: Any, seed: int = 0) -> Callable[[], None]:
    """One step of every copy of the Gymnasium vector env ``vec`` with a random action each (a legal one where the
    observation carries an ``action_mask``: a turn-based game refuses the others), the ended copies reset as ppo_td's
    collector resets them (``reset_mask``; one copy stepped and reset directly, as the collector's numpy step does,
    the lower floor). ``vec`` is reset first."""
    rng = np.random.default_rng(seed)
    one = single_copy(vec)
    env = one if one is not None else vec  # one copy: stepped directly, as ppo_td's numpy step steps it
    env.action_space.seed(seed)
    observation = [env.reset(seed=seed)[0]]

    def action(current: Any) -> Any:
        if isinstance(current, dict) and "action_mask" in current:
            mask = np.asarray(current["action_mask"], dtype=bool)
            legal = [rng.choice(np.flatnonzero(row)) for row in mask.reshape(-1, mask.shape[-1])]
            return legal[0] if one is not None else np.array(legal)
        return env.action_space.sample()

    def step() -> None:
        current, _, terminated, truncated, _ = env.step(action(observation[0]))
        ended = np.asarray(terminated | truncated)
        if ended.any():
            current = env.reset()[0] if one is not None else env.reset(options={"reset_mask": ended})[0]
        observation[0] = current
    return step


def single_copy(vec: Any) -> Any:
    """The one env of a one-copy Gymnasium ``SyncVectorEnv`` without autoreset (what ppo_td's fast collector steps
    directly), else None."""
    import gymnasium as gym

    if (type(vec) is gym.vector.SyncVectorEnv and vec.num_envs == 1
            and vec.autoreset_mode == gym.vector.AutoresetMode.DISABLED):
        return vec.envs[0]
    return None


def plain_ppo_minibatch(config: Any, net: torch.nn.Module, value: torch.nn.Module, rows: Any,
                        parameters: list[torch.Tensor]) -> Callable[[], None]:
    """The floor of one update minibatch: a hand-written PPO step on the same networks, with the loss terms the
    preset asks for (log-prob of stored actions, clipped surrogate, advantage normalization, entropy bonus, clipped
    or plain value loss) on plain tensors, gradient-norm clipping and a fused Adam step. No TensorDicts, no
    diagnostics. ``net`` returns logits, or a (loc, scale) pair for a Gaussian policy."""
    loss, optim = config.loss, config.optim
    n = rows.shape[0]  # (rows: a tensor, or a TensorDict of a Dict observation's entries)
    with torch.no_grad():
        out = net(rows)
    gaussian = isinstance(out, tuple)
    action = out[0].clone() if gaussian else torch.randint(out.shape[-1], (n,))
    old_log_prob, advantage = torch.randn(n) - 1.0, torch.randn(n)
    old_value, target = torch.randn(n, 1), torch.randn(n, 1)
    eps, half_log_2pi = loss.clip_epsilon, 0.5 * math.log(2 * math.pi)
    optimizer = torch.optim.Adam(parameters, lr=1e-6, eps=optim.adam_eps, fused=True)

    def step() -> None:
        out = net(rows)
        if gaussian:
            loc, scale = out[0], out[1]
            log_scale = scale.log()
            log_prob = (-0.5 * ((action - loc) / scale).square() - log_scale - half_log_2pi).sum(-1)
            entropy = (0.5 + half_log_2pi + log_scale).sum(-1)
        else:
            logp = out.log_softmax(-1)
            log_prob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            entropy = -(logp.exp() * logp).sum(-1)
        adv = (advantage - advantage.mean()) / (advantage.std() + 1e-8) if loss.normalize_advantage else advantage
        ratio = (log_prob - old_log_prob).exp()
        total = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).mean()
        if loss.entropy_coeff:
            total = total - loss.entropy_coeff * entropy.mean()
        v = value(rows)
        value_loss = (v - target).square()
        if loss.clip_value:
            clipped = old_value + (v - old_value).clamp(-loss.clip_value, loss.clip_value)
            value_loss = torch.max(value_loss, (clipped - target).square())
        total = total + loss.critic_coeff * value_loss.mean()
        for param in parameters:
            param.grad = None
        total.backward()
        if optim.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(parameters, optim.max_grad_norm, foreach=True)
        optimizer.step()
    return step
