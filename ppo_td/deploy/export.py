"""A trained policy as a file that runs without ppo_td: TorchScript, ``torch.export`` or ONNX.

The file holds the deterministic policy from the env's observation to its action: the observation normalizer
at its checkpointed statistics, the encoder and networks, the distribution's deterministic action (the mode of
a categorical, masked where the policy reads a mask; the mean of a Gaussian) and the clipping of Box actions to
their bounds. Its inputs are batches (a leading batch dimension, of any size): the observation entries, in the
order :func:`input_names` gives (one ``observation`` for a Box; the leaves of a Dict, ``observation.<key>``),
then ``action_mask`` for a masked policy, then a recurrent policy's state (zeros at an episode's start; the file
returns the next state after the action). ``tests/test_deploy.py`` loads each format with plain ``torch`` or
``onnxruntime`` and checks its actions against :class:`~ppo_td.deploy.Policy`'s. An agent group's file
(:class:`DeterministicAgentsPolicy`) takes ``observation`` ``[batch, agents, obs]`` (and ``action_mask``) and gives
each agent's action, as :class:`~ppo_td.deploy.agents.AgentsPolicy` acts (``tests/test_multiagent.py``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.modules import TanhNormal

from ppo_td import keys
from ppo_td.deploy.agents import AgentsPolicy, TeamPolicy
from ppo_td.deploy.policy import Policy
from ppo_td.envs import MASK_KEY
from ppo_td.models.distributions import deterministic_action
from ppo_td.models.multiagent import group_policy, plain_agent_network
from ppo_td.models.plain import policy_net
from ppo_td.models.recurrent import recurrent_parts, rnn

FORMATS = {"torchscript": ".pt", "export": ".pt2", "onnx": ".onnx"}


class ExportError(ValueError):
    """A policy that cannot be exported in the format asked for; the message names the module and what to try."""


class DeterministicPolicy(nn.Module):
    """Plain tensors in, the deterministic action (and a recurrent policy's next state) out: what is exported."""

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        layout = policy.layout
        self.entries = [e for e in layout.entries if e.key != MASK_KEY]
        self.masked = layout.masked
        self.flat = [e.key for e in self.entries] == [keys.OBSERVATION]
        plain, rec = policy_net(policy.actor, acting=True), recurrent_parts(policy.actor)
        if plain is None and rec is None:
            raise ExportError(f"the actor is a {type(policy.actor).__name__} that ppo_td's factories did not build "
                              "(export bakes in ppo_td's own networks); export it yourself with torch.export.export "
                              "on a module of plain tensors")
        if len(policy.transforms):
            names = [type(t).__name__ for t in policy.transforms]
            raise ExportError(f"the policy's observations go through the env's transforms {names} (env.transforms), "
                              "which run on TensorDicts and cannot be baked into an exported file: deploy with "
                              "ppo_td.load_policy, or compute the feature in the network (model.encoder="
                              "module:function)")
        self.net = plain
        self.recurrent = rec is not None
        if rec is not None:  # the LSTM/GRU itself (not TorchRL's module around it), as Recurrent.step runs it
            self.encoder, self.rnn, self.head, self.lstm = rec.encoder, rnn(rec.core), rec.head, rec.lstm
        norm = policy.obs_norm
        self.normalize = norm is not None
        if norm is not None:
            self.register_buffer("obs_mean", norm.mean.to(torch.float32))
            self.register_buffer("obs_std", torch.sqrt(norm.var + norm.eps).to(torch.float32))
            self.obs_clip = float(norm.clip)
            self.norm_slices = policy.obs_norm_slices()
        self.clip = layout.clip_actions
        if self.clip:
            self.register_buffer("low", torch.as_tensor(layout.action_space.low))
            self.register_buffer("high", torch.as_tensor(layout.action_space.high))

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        n = len(self.entries)
        obs_inputs, rest = inputs[:n], list(inputs[n:])
        mask = rest.pop(0).to(torch.bool) if self.masked else None
        if self.flat:
            obs = obs_inputs[0].to(self.entries[0].dtype)
            if self.normalize:
                obs = ((obs - self.obs_mean) / self.obs_std).clamp(-self.obs_clip, self.obs_clip)
        else:
            values = {e.key: x.to(e.dtype) for e, x in zip(self.entries, obs_inputs, strict=True)}
            if self.normalize:  # a Dict observation's normalized entries, each by its slice of the statistics
                for key, where in self.norm_slices:
                    x = values[key].to(torch.float32)
                    flat = ((x.reshape(x.shape[0], -1) - self.obs_mean[where]) / self.obs_std[where])
                    values[key] = flat.clamp(-self.obs_clip, self.obs_clip).reshape(x.shape)
            obs = TensorDict(values, batch_size=[obs_inputs[0].shape[0]]).get(keys.OBSERVATION)
        if self.recurrent:  # Recurrent.step's operations, from the state given
            x = obs if self.encoder is None else self.encoder(obs)
            hidden = [s.transpose(0, 1).contiguous() for s in rest]
            out, new = self.rnn(x.unsqueeze(1), (hidden[0], hidden[1]) if self.lstm else hidden[0])
            state = list(new) if self.lstm else [new]
            action = self._act(self.head, self.head(out.squeeze(1)), mask)
            return (action, *[s.transpose(0, 1) for s in state])
        return self._act(self.net, self.net(obs), mask)

    def _act(self, net: nn.Module, params: Any, mask: torch.Tensor | None) -> torch.Tensor:
        action = deterministic_action(net.distribution(params, mask))
        if self.clip:
            action = torch.maximum(torch.minimum(action, self.high), self.low)
        return action


class DeterministicAgentsPolicy(nn.Module):
    """An agent group's policy on plain tensors: the agents' observations ``[batch, agents, obs]`` (and masks
    ``[batch, agents, actions]``) in, each agent's deterministic action out (``[batch, agents, action]``; Discrete:
    ``[batch, agents]``), as :class:`~ppo_td.deploy.agents.AgentsPolicy` acts: the group's network, the mode of its
    distribution (a tanh-normal's squashed mean), Box actions clipped where training clipped them."""

    def __init__(self, policy: AgentsPolicy) -> None:
        super().__init__()
        group = group_policy(policy.actor)
        if group is None:
            raise ExportError(f"the agents' actor is a {type(policy.actor).__name__} that ppo_td's factories did "
                              "not build (export bakes in ppo_td's own networks); export it yourself with "
                              "torch.export.export on a module of plain tensors")
        self.net, self.policy = plain_agent_network(group.net), group  # per-agent networks as plain modules
        self.masked = group.masked
        kwargs = group.distribution_kwargs
        self.squashed = group.distribution_class is TanhNormal and set(kwargs) <= {"low", "high"}
        """A tanh-normal's deterministic action written out (its safe tanh is an autograd Function, which
        TorchScript's tracer cannot record): the mean's tanh, clamped as TorchRL clamps it, mapped into the bounds."""
        if self.squashed:  # on the network's device (the bounds in the kwargs stay where the actor was built)
            device = next(self.net.parameters()).device
            low = torch.as_tensor(kwargs.get("low", -1.0)).to(device, torch.float32)
            high = torch.as_tensor(kwargs.get("high", 1.0)).to(device, torch.float32)
            self.affine = bool((low != -1.0).any() or (high != 1.0).any())
            self.register_buffer("bounds_mid", (high + low) / 2)
            self.register_buffer("bounds_half", (high - low) / 2)
        self.clip = policy.clip
        if self.clip:
            self.register_buffer("low", policy.action_low.detach().clone())
            self.register_buffer("high", policy.action_high.detach().clone())

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:  # (observation[, action_mask]), as DeterministicPolicy
        params = self.net(inputs[0].to(torch.float32))
        if self.squashed:  # TanhNormal.deterministic_sample's values: its transforms applied to the mean
            limit = 1.0 - torch.finfo(params[0].dtype).resolution
            action = params[0].tanh().clamp(-limit, limit)
            if self.affine:
                action = self.bounds_mid + self.bounds_half * action
        else:
            action = deterministic_action(self.policy.distribution(params, inputs[1].to(torch.bool) if self.masked
                                                             else None))
        if self.clip:
            action = torch.maximum(torch.minimum(action, self.high), self.low)
        return action


def _module(policy: Policy | AgentsPolicy) -> nn.Module:
    """What is exported for ``policy``."""
    return DeterministicAgentsPolicy(policy) if isinstance(policy, AgentsPolicy) else DeterministicPolicy(policy)


def input_names(policy: Policy | AgentsPolicy) -> list[str]:
    """The exported file's inputs, in order."""
    if isinstance(policy, AgentsPolicy):
        return [keys.OBSERVATION] + ([MASK_KEY] if policy.description.action_mask else [])
    names = [e.name for e in policy.layout.entries if e.key != MASK_KEY]
    if policy.layout.masked:
        names.append(MASK_KEY)
    rec = recurrent_parts(policy.actor)
    return names + (list(rec.state) if rec is not None else [])


def output_names(policy: Policy | AgentsPolicy) -> list[str]:
    rec = None if isinstance(policy, AgentsPolicy) else recurrent_parts(policy.actor)
    return ["action"] + ([f"next_{k}" for k in rec.state] if rec is not None else [])


def export_inputs(policy: Policy, observation: Any, action_mask: Any = None) -> tuple[torch.Tensor, ...]:
    """The exported file's observation and mask inputs for a batch of raw observations (as ``policy`` takes
    them), without the state a recurrent file also takes."""
    values, single = policy.observation_values(observation, action_mask, normalized=False)
    if single:
        raise ValueError("export_inputs takes a batch of observations (a leading batch dimension)")
    names = input_names(policy)
    rec = recurrent_parts(policy.actor)
    names = names[: len(names) - len(rec.state)] if rec is not None else names
    by_name = {(k if isinstance(k, str) else ".".join(k)): v for k, v in values.items()}
    return tuple(by_name[name] for name in names)


def example_inputs(policy: Policy | AgentsPolicy, batch: int = 2,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
    """Random inputs of the exported file's kinds: observations within the env's space, an all-legal mask, zero
    states (``batch`` rows)."""
    if isinstance(policy, AgentsPolicy):
        desc = policy.description
        out = [torch.randn(batch, desc.num_agents, desc.observation_size, generator=generator)]
        if desc.action_mask:  # each agent of each row with at least one legal action
            mask = torch.rand(batch, desc.num_agents, desc.action_size, generator=generator) < 0.5
            legal = torch.randint(0, desc.action_size, (batch, desc.num_agents, 1), generator=generator)
            out.append(mask.scatter(-1, legal, True))
        return tuple(out)
    space = policy.layout.observation_space
    out = []
    for entry in policy.layout.entries:
        if entry.key == MASK_KEY:
            continue
        if entry.dtype.is_floating_point:
            out.append(torch.randn(batch, *entry.shape, generator=generator).to(entry.dtype))
        else:
            high = _high(space, entry)
            out.append(torch.randint(0, high, (batch, *entry.shape), generator=generator).to(entry.dtype))
    if policy.layout.masked:  # random masks, each row with at least one legal action
        size = next(e.shape for e in policy.layout.entries if e.key == MASK_KEY)
        mask = torch.rand(batch, *size, generator=generator) < 0.5
        mask[torch.arange(batch), torch.randint(0, size[-1], (batch,), generator=generator)] = True
        out.append(mask)
    rec = recurrent_parts(policy.actor)
    if rec is not None:  # a state in mid-episode
        out += [torch.randn(batch, *policy.memory[k], generator=generator) * 0.5 for k in rec.state]
    return tuple(out)


def _high(space: Any, entry: Any) -> int:
    """An exclusive upper bound for random integer values of ``entry`` (its space's, else 2)."""
    import gymnasium as gym

    sub = space
    path = (entry.key,) if isinstance(entry.key, str) else entry.key
    for part in path[1:]:
        if isinstance(sub, gym.spaces.Dict) and part in sub.spaces:
            sub = sub[part]
        elif isinstance(sub, gym.spaces.Tuple) and part.isdigit():
            sub = sub[int(part)]
    if isinstance(sub, gym.spaces.Discrete):
        return int(sub.n)
    if isinstance(sub, gym.spaces.MultiDiscrete):
        return int(sub.nvec.min())
    if isinstance(sub, gym.spaces.Box):
        return int(min(sub.high.min(), 255)) + 1
    return 2


def team_paths(policy: TeamPolicy, path: str | os.PathLike) -> dict[str, Path]:
    """Where :func:`export_team` writes each group's file: ``path`` with the group before its suffix
    (``policy.onnx`` -> ``policy.adversary.onnx``, ``policy.agent.onnx``)."""
    path = Path(path)
    return {g: path.with_name(f"{path.stem}.{g}{path.suffix}") for g in policy.groups}


def export_team(policy: TeamPolicy, fmt: str, path: str | os.PathLike) -> dict[str, Path]:
    """Each agent group's policy of ``policy`` written as :func:`export_policy` writes one, a file per group at
    :func:`team_paths`: all or none. Every group's file is traced and checked under a temporary name first, and
    only then are they moved into place; a failure leaves the files of an earlier export as they were."""
    paths = team_paths(policy, path)
    staged: dict[str, Path] = {}
    try:
        for group, out in paths.items():
            staging = out.with_name(f".{out.stem}.{os.getpid()}.staged{out.suffix}")  # the loaders read the suffix
            staged[group] = export_policy(policy[group], fmt, staging)
        for group, out in paths.items():
            os.replace(staged[group], out)
    finally:
        for leftover in staged.values():
            leftover.unlink(missing_ok=True)
    return paths


def export_policy(policy: Policy | AgentsPolicy, fmt: str, path: str | os.PathLike) -> Path:
    """Write ``policy``'s deterministic form to ``path`` in format ``fmt`` (``torchscript``, ``export`` or
    ``onnx``); the batch dimension stays dynamic. Returns the path. Raises :class:`ExportError` naming the module
    that could not be traced and the format to try instead."""
    if isinstance(policy, TeamPolicy):
        raise ExportError(f"the policy acts for the agent groups {policy.groups}, one file each: export_team(policy, "
                          f"{fmt!r}, path), or export_policy(policy[group], ...) for one group")
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}: choose one of {sorted(FORMATS)}")
    if fmt == "onnx":
        missing = [m for m in ("onnx", "onnxscript") if importlib.util.find_spec(m) is None]
        if missing:
            raise ExportError(f"ONNX export needs {' and '.join(missing)}: pip install 'ppo_td[export]' "
                              "(or export --format torchscript / export, which need nothing more)")
    if policy.device.type != "cpu":
        policy = copy.deepcopy(policy).to("cpu")  # traced on the CPU; the file runs wherever it is loaded
    module = _module(policy).eval()
    args = example_inputs(policy, batch=2)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")  # the loaders read the suffix
    try:
        with torch.no_grad():
            _write(module, args, fmt, tmp, policy)
    except Exception as err:  # noqa: BLE001 - each exporter fails its own way; name the module and the way out
        tmp.unlink(missing_ok=True)
        other = "torchscript" if fmt != "torchscript" else "export"
        raise ExportError(f"{fmt} export of {_describe(policy)} failed ({type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else ''}); try --format {other}") from err
    try:
        check_export(policy, fmt, tmp)  # a file that does not act as the policy never reaches ``path``
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _write(module: nn.Module, args: tuple, fmt: str, path: Path, policy: Policy) -> None:
    if fmt == "torchscript":
        torch.jit.save(torch.jit.trace(module, args, check_trace=False), str(path))
        return
    batch = torch.export.Dim("batch", min=1, max=1 << 20)
    dynamic = (tuple({0: batch} for _ in args),)  # forward(*inputs): one entry, for the inputs
    if fmt == "export":
        torch.export.save(torch.export.export(module, args, dynamic_shapes=dynamic, strict=False), str(path))
        return
    with _quiet_onnx():
        program = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=dynamic, verbose=False,
                                    input_names=input_names(policy), output_names=output_names(policy))
    program.save(str(path))


@contextlib.contextmanager
def _quiet_onnx():
    """torch's ONNX exporter without the lines a user cannot act on: its progress, its notes on optional
    packages (torchvision's operators), and the deprecation and shape-naming warnings of its own internals.
    The levels and filters are put back after."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings("ignore", message=r".*axis name.*will not be used", category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


def _describe(policy: Policy | AgentsPolicy) -> str:
    """The modules a trace goes through, by class, and the settings that chose them."""
    if isinstance(policy, AgentsPolicy):
        group = group_policy(policy.actor)
        return (f"the agent group's policy ({type(group.net).__name__} with {group.distribution_class.__name__} "
                f"actions; inputs {', '.join(input_names(policy))})")
    rec = recurrent_parts(policy.actor)
    net = policy_net(policy.actor, acting=True)
    encoder = rec.encoder if rec is not None else (net.trunk if net is not None else None)
    parts = [f"encoder {type(encoder).__name__} (model.encoder={policy.config.model.encoder!r})"
             if encoder is not None else "no encoder"]
    if rec is not None:
        parts.append(f"{type(rec.core).__name__} core (model.recurrent={policy.config.model.recurrent!r})")
    head = rec.head if rec is not None else net
    if head is not None:
        parts.append(f"{type(head).__name__} with {head.distribution_class.__name__} actions")
    return f"the policy ({', '.join(parts)}; inputs {', '.join(input_names(policy))})"


def input_specs(policy: Policy | AgentsPolicy) -> list[str]:
    """Each input of the exported file with its dtype and shape (``batch`` leading)."""
    if isinstance(policy, AgentsPolicy):
        desc = policy.description
        specs = [f"observation float32 (batch, {desc.num_agents} agents, {desc.observation_size})"]
        if desc.action_mask:
            specs.append(f"action_mask bool (batch, {desc.num_agents} agents, {desc.action_size})")
        return specs
    specs = [(e.name, e.dtype, e.shape) for e in policy.layout.entries if e.key != MASK_KEY]
    if policy.layout.masked:
        specs.append((MASK_KEY, torch.bool, next(e.shape for e in policy.layout.entries if e.key == MASK_KEY)))
    rec = recurrent_parts(policy.actor)
    if rec is not None:
        specs += [(k, torch.float32, policy.memory[k]) for k in rec.state]
    return [f"{name} {str(dtype).removeprefix('torch.')} (batch, {', '.join(map(str, shape))})".replace(", )", ")")
            for name, dtype, shape in specs]


def check_export(policy: Policy | AgentsPolicy, fmt: str, path: str | os.PathLike, rows: int = 64) -> float | None:
    """Run the file at ``path`` on ``rows`` random inputs beside ``policy`` and return the largest difference of
    their actions (None for ONNX without onnxruntime). Raises :class:`ExportError` when they differ by more than
    1e-5 (relative)."""
    args = example_inputs(policy, batch=rows, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if isinstance(policy, AgentsPolicy):  # the group's own actor (TorchRL's modules), not the exported module
            expected = policy(args[0], action_mask=args[1] if len(args) > 1 else None, deterministic=True)
        else:
            expected = _module(policy).eval()(*args)
        if fmt == "torchscript":
            got = torch.jit.load(str(path))(*args)
        elif fmt == "export":
            got = torch.export.load(str(path)).module()(*args)
        else:
            if importlib.util.find_spec("onnxruntime") is None:
                return None
            import onnxruntime

            session = onnxruntime.InferenceSession(str(path))
            outs = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args, strict=True)})
            got = tuple(torch.from_numpy(o) for o in outs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    error = max(float((a.double() - b.double()).abs().max()) for a, b in zip(expected, got, strict=True))
    scale = max(float(a.double().abs().max()) for a in expected)
    if error > 1e-5 * max(1.0, scale):
        raise ExportError(f"the {fmt} file {path} gives actions up to {error:.3g} away from the policy's on random "
                          "inputs; try another --format")
    return error
