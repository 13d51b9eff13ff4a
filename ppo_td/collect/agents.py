"""The agents collector: TorchRL ``Collector``'s batches of a VMAS agent group, without its per-step machinery.

A VMAS scenario simulates its copies in torch, a couple of milliseconds a step on the CPU; TorchRL's ``Collector``
over its ``VmasWrapper`` adds about as much again (TensorDict construction per agent, spec and key bookkeeping,
``step_mdp``, the policy's TensorDictModule dispatch). :class:`AgentsCollector` runs the same steps on plain
tensors: it steps the VMAS ``Environment`` that :func:`ppo_td.envs.build_env` built (its public ``step``,
``reset``, ``reset_at`` and ``get_from_scenario``), reads the outputs with the wrapper's public readers, applies
ppo_td's two multi-agent transforms (``StepCounter`` with the episode limit, ``RewardSum`` over the group's reward)
as TorchRL does, and samples the group's policy as TorchRL's ``ProbabilisticActor`` does, in the same order. So it
writes the same batch as ``Collector`` from the same state, bit for bit, and leaves the simulator and torch's RNG
in the same state (``tests/test_agents_collector.py`` compares every key over truncations and partial resets).

It runs exactly that, and refuses anything else with :class:`~ppo_td.collect.FastUnsupported` naming the part
(:func:`ppo_td.collect.make_collector` then uses TorchRL's ``Collector``): a VMAS env ppo_td built, agent groups
(one, or several: each group's policy sampled in the groups' order, as the ``TensorDictSequential`` of
:func:`ppo_td.models.multiagent.make_team_actor_critic` samples them) whose agents share their specs inside a group,
observations that are single tensors, Box or Discrete (index) actions, the two transforms above with an episode
limit (checked again before each batch), and an actor that :func:`ppo_td.models.make_agent_actor` (or the team
factory) built, left as built. One difference it cannot see: a ``ProbabilisticActor``
given its own ``generator`` (TorchRL has no public reader for it) samples from that generator under ``Collector``,
from torch's global one here; set ``collector.step_loop='torchrl'`` for such an actor.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import expand_as_right
from torch import nn
from torchrl.data import Composite
from torchrl.envs import RewardSum, StepCounter
from torchrl.modules.distributions.utils import sample_and_log_prob

from ppo_td import keys
from ppo_td.collect.fast import FastUnsupported, InProcessCollector, env_transforms
from ppo_td.envs import BuiltEnv
from ppo_td.models import ClosedForm, same_device
from ppo_td.models.multiagent import GroupPolicy, group_policy, team_members

Values = dict[str, torch.Tensor]

_FLAGS = ("done", "terminated", "truncated")


class AgentsCollector(InProcessCollector):
    """In-process collector of a VMAS env's agent groups with TorchRL ``Collector``'s batches and interface, minus
    its per-step cost.

    Yields ``[num_envs, frames_per_batch // num_envs]`` TensorDicts (time dim named ``"time"``) with the keys
    ``Collector`` writes (each group's entries under its name, ``("collector", "traj_ids")`` included) until
    ``total_frames``. The policy is called, not copied: weight updates apply at once.

    Raises:
        FastUnsupported: a part of ``env`` or ``actor`` it cannot run (the message names it).

    Example:
        >>> env = build_env(get_preset("vmas-navigation").env)
        >>> collector = AgentsCollector(env, make_agent_actor(env.description, config.model), 6000, 60_000)
        >>> batch = next(iter(collector))  # [10, 600]; batch["agents", "action"] is [10, 600, 3, 2]
    """

    def __init__(self, env: BuiltEnv, actor: nn.Module, frames_per_batch: int, total_frames: int,
                 device: torch.device | str = "cpu") -> None:
        if not isinstance(env, BuiltEnv) or env.simulator is None:
            raise FastUnsupported("the env is not a VMAS env that ppo_td.envs.build_env built (the agents collector "
                                  "steps its VMAS simulator)")
        self.env, self.simulator = env.env, env.simulator
        self.wrapper = env.env.base_env
        """TorchRL's ``VmasWrapper`` of :attr:`simulator` (its readers turn VMAS's outputs into its entries)."""
        group_map = self.wrapper.group_map
        self.groups: list[str] = list(group_map)
        """The agent groups, in the wrapper's order (the order their policies sample in)."""
        index = self.wrapper.agent_names_to_indices_map
        if sorted(index[name] for names in group_map.values() for name in names) != list(range(len(index))):
            raise FastUnsupported(f"the groups {dict(group_map)} do not hold each of the simulator's agents once")
        self.agents: dict[str, list[int]] = {}
        """For each group, each of its agents' place in the simulator's lists."""
        place = {}
        for group, names in group_map.items():
            if self.wrapper.het_specs_map[group]:
                raise FastUnsupported(f"the agents of group {group!r} have different specs")
            self.agents[group] = [index[name] for name in names]
            place.update({name: (group, i) for i, name in enumerate(names)})
        self.order = [place[agent] for agent in sorted(index, key=index.__getitem__)]
        """For each of the simulator's agents, in its order, its group and place in the group (what the wrapper's
        step hands VMAS)."""
        self.transforms = env_transforms(self.env)
        self.max_steps = self._check_transforms()
        if not self.simulator.continuous_actions and not self.wrapper.categorical_actions:
            raise FastUnsupported("one-hot discrete actions (VmasWrapper categorical_actions=False)")
        for group in self.groups:
            if isinstance(self.wrapper.observation_spec[group, keys.OBSERVATION], Composite):
                raise FastUnsupported("the agents observe several entries (a dict observation); the agents "
                                      "collector steps single-tensor observations")
        self.policies: dict[str, GroupPolicy] = self._policies(actor)
        self.closed_forms = {g: ClosedForm.of(p.distribution_class, p.distribution_kwargs, p.masked)
                             for g, p in self.policies.items()}
        """A Gaussian, tanh-normal (bounds -1 and 1) or categorical policy samples without building the distribution
        object (:class:`~ppo_td.models.ClosedForm`: the same operations, so the same bits)."""
        self.policy_device = torch.device(device)
        self.env_device = torch.device(self.simulator.device)
        """Where the simulator steps (``env.device``): the rollout is kept there, and the batch is stored there (with
        the policy on the same device, no step copies anything to the host but the done flags' check)."""
        self.num_envs = int(self.wrapper.batch_size[0])
        if frames_per_batch % self.num_envs:
            raise ValueError(f"frames_per_batch={frames_per_batch} must be a multiple of the {self.num_envs} env "
                             "copies")
        self.frames_per_batch, self.total_frames = frames_per_batch, total_frames
        first = self.env.reset()
        self.info_keys: dict[str, list[str]] = {}
        self.current: Values = {"step_count": first.get("step_count"), **{k: first.get(k) for k in _FLAGS}}
        for group in self.groups:
            entries = first.get(group)
            info = entries.get("info", None)
            self.info_keys[group] = [] if info is None else list(info.keys())
            if info is not None and any(isinstance(info.get(k), TensorDictBase) for k in self.info_keys[group]):
                raise FastUnsupported("the scenario's info has nested entries")
            self.current.update({(group, keys.OBSERVATION): entries.get(keys.OBSERVATION),
                                 (group, "episode_reward"): entries.get("episode_reward"),
                                 **{(group, "info", k): info.get(k) for k in self.info_keys[group]}})
        self.traj_ids = torch.arange(self.num_envs, device=self.env_device)
        self.next_traj = self.num_envs
        self.frames = 0

    def _policies(self, actor: nn.Module) -> dict[str, GroupPolicy]:
        """Each group's plain-tensor policy, as :func:`~ppo_td.models.multiagent.group_policy` finds it."""
        try:
            actors = {self.groups[0]: actor} if len(self.groups) == 1 else team_members(actor, self.groups,
                                                                                         keys.ACTION)
        except ValueError as err:
            raise FastUnsupported(str(err)) from err
        if len(self.groups) > 1 and list(actor.module) != [actors[g] for g in self.groups]:
            raise FastUnsupported(f"the team actor samples its groups in another order than the env's {self.groups}")
        policies = {}
        for group, part in actors.items():
            policy = group_policy(part)
            if policy is None:
                raise FastUnsupported(f"the actor of group {group!r} ({type(part).__name__}) is not one that "
                                      "ppo_td.models.make_agent_actor builds, so the agents collector cannot run it "
                                      "on plain tensors")
            written = [*policy.param_keys, (group, keys.ACTION), policy.log_prob_key]
            if (policy.observation_key != (group, keys.OBSERVATION) or policy.masked or part.module[1].safe
                    or any(not (isinstance(k, tuple) and len(k) == 2 and k[0] == group) for k in written)):
                raise FastUnsupported(f"the actor reads {policy.observation_key} (and a mask: {policy.masked}), "
                                      f"writes {written} (and projects its actions into a spec: "
                                      f"{part.module[1].safe}); the agents collector runs a policy of "
                                      f"{(group, keys.OBSERVATION)} that writes entries of group {group!r}, as "
                                      "make_agent_actor builds it")
            policies[group] = policy
        return policies

    def _check_transforms(self) -> int:
        """The episode limit of ppo_td's ``StepCounter``, after checking the env's transforms are exactly what
        :func:`ppo_td.envs.build_env` adds to a multi-agent env."""
        parts = self.transforms
        expected = "StepCounter(max_steps=...) and RewardSum over the groups' rewards, as ppo_td.envs.build_env adds"
        if [type(t) for t in parts] != [StepCounter, RewardSum]:
            raise FastUnsupported(f"the env's transforms are {[type(t).__name__ for t in parts]}; the agents "
                                  f"collector runs {expected}")
        counter, rewards = parts
        if (counter.max_steps is None or list(counter.step_count_keys) != ["step_count"]
                or list(counter.truncated_keys) != ["truncated"] or not counter.update_done
                or list(rewards.in_keys) != [(g, "reward") for g in self.groups]
                or list(rewards.out_keys) != [(g, "episode_reward") for g in self.groups]):
            raise FastUnsupported(f"the env's StepCounter or RewardSum differ from {expected}")
        return int(counter.max_steps)

    def _group(self, group: str, per_agent: list[torch.Tensor], read: Any) -> torch.Tensor:
        """One entry of ``group``, ``[num_envs, agents, ...]``, from the simulator's per-agent list."""
        return torch.stack([read(per_agent[i]) for i in self.agents[group]], 1)

    def _info(self, infos: list[dict[str, torch.Tensor]]) -> Values:
        """The groups' info entries as the wrapper's ``read_info`` gives them (float32, one trailing dim)."""
        read = self.wrapper.read_reward  # the same unsqueeze of a [num_envs] entry as read_info's
        return {(g, "info", k): torch.stack([read(infos[i][k].to(torch.float32)) for i in self.agents[g]], 1)
                for g in self.groups for k in self.info_keys[g]}

    def _sample(self, group: str, observation: torch.Tensor
                ) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
        """The group policy's parameters, action and log-probability, sampled as ``ProbabilisticActor`` samples."""
        policy, device, here = self.policies[group], self.policy_device, self.env_device
        moved = not same_device(device, here)
        params = policy(observation.to(device, non_blocking=device.type != "cpu") if moved else observation)
        params = params if isinstance(params, tuple) else (params,)
        closed_form = self.closed_forms[group]
        if closed_form is not None:
            action, log_prob = closed_form.sample(params)
        else:
            dist = policy.distribution(params)
            action, log_prob = sample_and_log_prob(dist, torch.Size(), reparameterize=dist.has_rsample)
        if moved:
            params, action, log_prob = tuple(p.to(here) for p in params), action.to(here), log_prob.to(here)
        return params, action, log_prob

    def _step(self, actions: dict[str, torch.Tensor], cur: Values) -> Values:
        """The env's ``("next", ...)`` entries after each group's ``actions`` from ``cur``, with the transforms' step
        applied."""
        wrapper = self.wrapper
        unbound = {g: a.unbind(1) for g, a in actions.items()}  # the wrapper's read_action (whose lookup of VMAS's
        # continuous_actions through the wrapper's __getattr__ costs 0.2 ms a step) for the actions it takes as
        # they are: Box, or Discrete indices
        obs, rewards, dones, infos = self.simulator.step([unbound[g][i] for g, i in self.order])
        done = wrapper.read_done(dones)
        step_count = cur["step_count"] + 1
        truncated = step_count >= self.max_steps  # StepCounter's step
        out: Values = {"step_count": step_count, "done": truncated | done, "terminated": done.clone(),
                       "truncated": truncated, **self._info(infos)}
        for g in self.groups:
            reward = self._group(g, rewards, wrapper.read_reward)
            out.update({(g, keys.OBSERVATION): self._group(g, obs, wrapper.read_obs), (g, "reward"): reward,
                        (g, "episode_reward"): cur[(g, "episode_reward")] + reward})  # RewardSum's step
        return out

    def _reset(self, reset: torch.Tensor, cur: Values) -> Values:
        """Reset the copies where ``reset`` (``[num_envs, 1]``) is True, as the wrapper's reset, the transforms'
        and TorchRL's partial-reset update do; the other copies keep ``cur``."""
        wrapper, mask = self.wrapper, reset.view(self.num_envs)
        if mask.all():
            self.simulator.reset(return_observations=False)
        else:
            for index in mask.nonzero().view(-1).tolist():
                self.simulator.reset_at(index, return_observations=False)
        obs, dones, infos = self.simulator.get_from_scenario(get_observations=True, get_infos=True,
                                                             get_rewards=False, get_dones=True)
        step_count = torch.where(~reset, cur["step_count"], 0)
        truncated = step_count >= self.max_steps  # StepCounter's reset, which also sets done to it
        out = {**self._info(infos), "step_count": step_count,
               "done": truncated, "terminated": wrapper.read_done(dones).clone(), "truncated": truncated}
        for g in self.groups:
            summed = cur[(g, "episode_reward")]
            out[(g, keys.OBSERVATION)] = self._group(g, obs, wrapper.read_obs)
            out[(g, "episode_reward")] = torch.where(expand_as_right(~mask, summed), summed, 0.0)  # RewardSum's
        return {key: torch.where(expand_as_right(mask, value), value, cur[key]) for key, value in out.items()}

    @torch.no_grad()
    def rollout(self) -> TensorDictBase:
        """One batch of ``frames_per_batch`` frames from the current state."""
        now = env_transforms(self.env)
        if len(now) != len(self.transforms) or any(a is not b for a, b in zip(now, self.transforms, strict=True)):
            raise FastUnsupported("the env's transforms changed after the agents collector was built (it runs "
                                  "StepCounter and RewardSum only): add transforms before building the pipeline, "
                                  "or set collector.step_loop='torchrl'")
        n, steps = self.num_envs, self.frames_per_batch // self.num_envs
        cur, traj_ids = self.current, self.traj_ids
        carried = list(cur)
        written = {g: [*(key for key in p.param_keys), (g, keys.ACTION), p.log_prob_key]
                   for g, p in self.policies.items()}
        root: dict[Any, list[torch.Tensor]] = {k: [] for k in [*carried, *(k for w in written.values() for k in w)]}
        nexts: dict[Any, list[torch.Tensor]] = {k: [] for k in [*carried, *((g, "reward") for g in self.groups)]}
        ids: list[torch.Tensor] = []
        for _ in range(steps):
            actions = {}
            for group in self.groups:  # in the order the team actor's modules sample
                params, action, log_prob = self._sample(group, cur[(group, keys.OBSERVATION)])
                for key, value in zip(written[group], (*params, action, log_prob), strict=True):
                    root[key].append(value)
                actions[group] = action
            for key in carried:
                root[key].append(cur[key])
            nxt = self._step(actions, cur)
            for key, store in nexts.items():
                store.append(nxt[key])
            ids.append(traj_ids)
            cur = {k: nxt[k] for k in carried}
            done = nxt["done"]
            if done.any():
                cur = self._reset(done, cur)
                ended = done.view(n)
                fresh = torch.arange(self.next_traj, self.next_traj + int(ended.sum()), device=self.env_device)
                self.next_traj += fresh.numel()
                traj_ids = traj_ids.masked_scatter(ended, fresh)
        self.current, self.traj_ids = cur, traj_ids
        source = self._layout(root, [n, steps])
        here = self.env_device
        source["next"] = TensorDict(self._layout(nexts, [n, steps]), batch_size=[n, steps], device=here)
        source["collector"] = TensorDict({"traj_ids": torch.stack(ids, 1)}, batch_size=[n, steps], device=here)
        return TensorDict(source, batch_size=[n, steps], device=here).refine_names(None, "time")

    def _layout(self, entries: dict[Any, list[torch.Tensor]], batch: list[int]) -> dict[str, Any]:
        """The batch's entries (stacked over time) in ``Collector``'s layout: env-wide ones at the root, each
        group's under its name (batch ``[envs, time, agents]``), its info under ``(group, "info")``."""
        out: dict[str, Any] = {k: torch.stack(v, 1) for k, v in entries.items() if not isinstance(k, tuple)}
        for g in self.groups:
            shape = [*batch, len(self.agents[g])]
            group = TensorDict({k[1]: torch.stack(v, 1) for k, v in entries.items()
                                if isinstance(k, tuple) and k[0] == g and len(k) == 2},
                               batch_size=shape, device=self.env_device)
            if self.info_keys[g]:
                group["info"] = TensorDict({k[2]: torch.stack(v, 1) for k, v in entries.items()
                                            if isinstance(k, tuple) and k[0] == g and len(k) == 3},
                                           batch_size=shape, device=self.env_device)
            out[g] = group
        return out
