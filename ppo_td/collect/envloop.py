"""ppo_td's step loop over any one-agent TorchRL env: the env's own public step, without ``Collector``'s machinery.

:class:`~ppo_td.collect.FastCollector` steps the Gymnasium vector env under a :class:`~ppo_td.envs.BuiltEnv` and
runs the transforms it knows on plain tensors. A TorchRL env (a class, a factory's, an object passed in) or a
transform it does not know (TorchRL's ``ObservationNorm``, a user's own) needs the env's own ``step``.
:class:`EnvLoopCollector` calls exactly that, ``EnvBase.step_and_maybe_reset`` (TorchRL's public step, every
transform included), with ppo_td's :class:`~ppo_td.collect.FastPolicy` writing the policy's outputs into the step's
TensorDict; TorchRL ``Collector``'s per-step policy dispatch, exploration context, trajectory bookkeeping and
buffer copies are what it leaves out. Its batches equal ``Collector``'s bit for bit with ``inference='torch'``
(``tests/test_envloop.py``), within float rounding where the policy samples in numpy.

It runs feed-forward policies built by :func:`ppo_td.models.make_actor` on envs of one batch dimension; anything
else is refused with :class:`~ppo_td.collect.FastUnsupported` (TorchRL's ``Collector`` then collects).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.data import Composite
from torchrl.envs import EnvBase

from ppo_td import keys
from ppo_td.collect.fast import FastPolicy, FastUnsupported, InProcessCollector, _Values
from ppo_td.envs import BuiltEnv
from ppo_td.envs.info import INFO

_TRAJ_IDS = ("collector", "traj_ids")


class EnvLoopCollector(InProcessCollector):
    """In-process collector over any one-agent TorchRL env, with TorchRL ``Collector``'s batches and interface.

    Yields ``[num_envs, frames_per_batch // num_envs]`` TensorDicts (time dim named ``"time"``) with the keys
    ``Collector`` writes, ``("collector", "traj_ids")`` included, until ``total_frames``; the env's own
    sub-TensorDicts that the networks do not read (a simulator's state) are left out. The policy is called, not
    copied. A run on it resumes inexactly (the TorchRL env's state has no public reader).

    Raises:
        FastUnsupported: an env or policy it cannot run (the message names it).

    Example:
        >>> collector = EnvLoopCollector(GymEnv("Pendulum-v1", batch_size=[1]), actor, 200, 10_000)
    """

    def __init__(self, env: BuiltEnv | EnvBase, actor: nn.Module, frames_per_batch: int, total_frames: int,
                 critic: nn.Module | None = None, device: torch.device | str = "cpu", inference: str = "auto",
                 compile: bool = False) -> None:
        self.env = env.env if isinstance(env, BuiltEnv) else env
        if not isinstance(self.env, EnvBase) or len(self.env.batch_size) != 1:
            raise FastUnsupported(f"ppo_td's env loop steps TorchRL envs of one batch dimension; this one has "
                                  f"batch_size={list(getattr(self.env, 'batch_size', []))}")
        if self.env.device is not None and torch.device(self.env.device).type != "cpu":
            raise FastUnsupported(f"ppo_td's env loop steps envs on the CPU; this one steps on {self.env.device} "
                                  "(TorchRL's Collector moves its steps between devices)")
        n = int(self.env.batch_size[0])
        self.policy = actor
        self.fast_policy = FastPolicy(actor, critic, device, inference, rows=n, compile=compile)
        if self.fast_policy.recurrent is not None:
            raise FastUnsupported("ppo_td's env loop runs feed-forward policies; a recurrent one's states are "
                                  "carried by TorchRL's Collector")
        if frames_per_batch % n:
            raise ValueError(f"frames_per_batch={frames_per_batch} must be a multiple of the {n} env copies")
        self.frames_per_batch, self.total_frames, self.frames = frames_per_batch, total_frames, 0
        self.inputs = [k for k in self.fast_policy.inputs if k in self.env.observation_spec.keys(True)]
        spec, read = self.env.observation_spec, {k if isinstance(k, str) else k[0] for k in self.inputs}
        self.unread = tuple(k for k in spec.keys() if isinstance(spec[k], Composite) and k not in read
                            and k not in (keys.OBSERVATION, INFO))
        """The env's own sub-TensorDicts the networks do not read (Brax's whole ``state``, about 11 KB a frame on
        Ant against the observation's 108 bytes): kept in the env's TensorDict, which it reads back to step, and
        left out of the batches."""
        self.current: TensorDictBase = self.env.reset()  # at once, as Collector: stateful transforms size themselves
        self.traj_ids = torch.arange(n)
        self.next_traj = n

    @torch.no_grad()
    def rollout(self) -> TensorDictBase:
        """One batch of ``frames_per_batch`` frames from the current state."""
        env, policy = self.env, self.fast_policy
        policy.refresh()
        td = self.current
        n = int(env.batch_size[0])
        traj_ids, steps = self.traj_ids, []
        for _ in range(self.frames_per_batch // n):
            values = _Values({k: td.get(k) for k in self.inputs})
            policy.sample(values)
            for key in policy.out_keys:
                td.set(key, values[key])
            td.set(_TRAJ_IDS, traj_ids)
            if policy.records_value:
                td.set(("collector", keys.STATE_VALUE), values[keys.STATE_VALUE])
            stepped, td = env.step_and_maybe_reset(td)
            steps.append(stepped.exclude(*self.unread, *[("next", k) for k in self.unread]) if self.unread
                         else stepped)
            done = stepped.get(("next", "done")).reshape(n)
            if done.any():
                fresh = torch.arange(self.next_traj, self.next_traj + int(done.sum()))
                self.next_traj += fresh.numel()
                traj_ids = traj_ids.masked_scatter(done, fresh)
        self.current, self.traj_ids = td, traj_ids
        return torch.stack(steps, 1).contiguous().refine_names(None, "time")
