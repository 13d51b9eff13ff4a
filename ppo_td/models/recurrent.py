"""Recurrent actor and critic: an LSTM or GRU between the encoder and the hidden layers.

Built from TorchRL's ``LSTMModule`` / ``GRUModule``: the recurrent state lives in the TensorDict
(``"actor_state_h"``, ...), the env carries it from step to step (a ``TensorDictPrimer`` adds it to the env's
specs and zeroes it at a reset) and ``InitTracker`` marks each episode's first step (``"is_init"``), where the
module starts again from zeros. So any TorchRL collector carries the state with no special case, and every
collected step stores the state the policy acted from. The update replays sequences from those stored states
(TorchRL's recurrent mode, or :func:`run_sequence` on plain tensors), resetting where an episode starts inside
a sequence.

Layout of each network (``model.recurrent``): observation -> encoder -> LSTM/GRU (``model.recurrent_size``) ->
MLP (``model.hidden_sizes``) -> head. With ``model.shared_recurrent`` the encoder and the core are one module
in both networks (CleanRL's ``ppo_atari_lstm``); otherwise each has its own (sb3-contrib's ``RecurrentPPO``
default), and the collector steps the critic too, to carry its state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn
from torchrl.data import Unbounded
from torchrl.envs import EnvBase, InitTracker, TensorDictPrimer, TransformedEnv
from torchrl.modules import GRUModule, LSTMModule, ProbabilisticActor
from torchrl.modules.utils import get_primers_from_module

from ppo_td import keys
from ppo_td.envs import MASK_KEY
from ppo_td.models.networks import PolicyNet, ValueNet

CORES = (LSTMModule, GRUModule)
IS_INIT = "is_init"


def is_recurrent(module: nn.Module | None) -> bool:
    """True when ``module`` holds a TorchRL ``LSTMModule`` or ``GRUModule``."""
    return module is not None and any(isinstance(m, CORES) for m in module.modules())


def state_keys(prefix: str, kind: str) -> list[str]:
    """The TensorDict keys of a core's state: ``{prefix}_h`` (and ``{prefix}_c`` for an LSTM)."""
    return [f"{prefix}_h", f"{prefix}_c"] if kind == "lstm" else [f"{prefix}_h"]


def make_core(kind: str, input_key: str, input_size: int, size: int, prefix: str,
              device: torch.device | None = None) -> LSTMModule | GRUModule:
    """An ``LSTMModule`` or ``GRUModule`` reading ``input_key`` and the state ``{prefix}_h``/``_c``, writing
    ``{prefix}_memory`` and the next state. Weights orthogonal (gain 1), biases zero, as CleanRL's
    ``ppo_atari_lstm``."""
    state = state_keys(prefix, kind)
    cls = LSTMModule if kind == "lstm" else GRUModule
    core = cls(input_size=input_size, hidden_size=size, in_keys=[input_key, *state],
               out_keys=[f"{prefix}_memory", *(("next", k) for k in state)], device=device)
    for name, param in core.named_parameters():
        if "bias" in name:
            nn.init.zeros_(param)
        else:
            nn.init.orthogonal_(param, 1.0)
    return core


def rnn(core: LSTMModule | GRUModule) -> nn.LSTM | nn.GRU:
    """The ``torch.nn`` LSTM or GRU inside a TorchRL core."""
    return core.lstm if isinstance(core, LSTMModule) else core.gru


def one_layer(run: nn.LSTM | nn.GRU) -> bool:
    """True for a one-layer, one-direction LSTM/GRU without projection: :func:`cell_step` computes its step."""
    return run.num_layers == 1 and not run.bidirectional and getattr(run, "proj_size", 0) == 0


def cell_step(run: nn.LSTM | nn.GRU, x: torch.Tensor, state: list[torch.Tensor]) -> list[torch.Tensor]:
    """One step of a :func:`one_layer` LSTM or GRU on ``[N, features]`` inputs from ``[N, size]`` states (``[h, c]``
    or ``[h]``): the next states, with the gate equations of ``torch.nn.LSTM`` / ``torch.nn.GRU`` on its own weights.

    For the collector's and the deployed policy's one step per call: about 35 us against 90 us for calling the
    module on a length-1 sequence (per-call set-up dominates at these sizes; ``benchmarks/recurrent.py`` times
    it), equal to it within float rounding (``tests/test_recurrent.py``)."""
    bias_ih, bias_hh = getattr(run, "bias_ih_l0", None), getattr(run, "bias_hh_l0", None)
    gi = F.linear(x, run.weight_ih_l0, bias_ih)
    gh = F.linear(state[0], run.weight_hh_l0, bias_hh)
    if isinstance(run, nn.LSTM):
        h, c = state
        gates = gi + gh
        size = h.shape[-1]
        act = torch.sigmoid(gates)  # input, forget, (cell), output: the cell gate's tanh below
        cell = torch.addcmul(act[:, size:2 * size] * c, act[:, :size], torch.tanh(gates[:, 2 * size:3 * size]))
        return [act[:, 3 * size:] * torch.tanh(cell), cell]
    h = state[0]
    size = h.shape[-1]
    reset, update = torch.sigmoid(gi[:, :2 * size] + gh[:, :2 * size]).chunk(2, 1)
    new = torch.tanh(torch.addcmul(gi[:, 2 * size:], reset, gh[:, 2 * size:]))
    return [torch.lerp(new, h, update)]


MemorySpec = tuple[tuple[str, tuple[int, ...]], ...]


def memory_spec(*modules: nn.Module | None) -> MemorySpec:
    """Each recurrent state ``modules`` read, as (key, per-copy shape) pairs: picklable, for worker envs."""
    out: dict = {}
    for module in modules:
        if is_recurrent(module):
            primer = get_primers_from_module(module, warn=False)
            out.update({key: tuple(spec.shape) for key, spec in primer.primers.items()})
    return tuple(out.items())


def memory_transforms(spec: MemorySpec) -> list:
    """What an env needs for the states of ``spec``: ``InitTracker`` and a ``TensorDictPrimer`` (zeros at a
    reset)."""
    if not spec:
        return []
    return [InitTracker(), TensorDictPrimer({key: Unbounded(shape=shape) for key, shape in spec}, expand_specs=True)]


def add_memory(env: EnvBase, *modules: nn.Module) -> EnvBase:
    """``env`` with what ``modules``' recurrent states need (:func:`memory_transforms`), for the keys it lacks (a
    ``TransformedEnv`` is extended in place and returned). Raises ValueError for an env that cannot take them."""
    present = set(env.observation_spec.keys())
    spec = tuple((key, shape) for key, shape in memory_spec(*modules) if key not in present)
    if not spec and (IS_INIT in present or not memory_spec(*modules)):
        return env
    if not isinstance(env, TransformedEnv):
        missing = [IS_INIT] * (IS_INIT not in present) + [key for key, _ in spec]
        raise ValueError(f"the recurrent policy reads {missing}, which this {type(env).__name__} does not carry: "
                         "wrap it as TransformedEnv(env) and append InitTracker() and "
                         "torchrl.modules.utils.get_primers_from_module(policy)")
    tracker, *primer = memory_transforms(spec or memory_spec(*modules))
    if IS_INIT not in present:
        env.append_transform(tracker)
    if spec:
        env.append_transform(primer[0])
    return env


def _features(encoder: nn.Module | None, prefix: str) -> tuple[list[TensorDictModuleBase], str]:
    if encoder is None:
        return [], keys.OBSERVATION
    key = f"{prefix}_features"
    return [TensorDictModule(encoder, in_keys=[keys.OBSERVATION], out_keys=[key])], key


def recurrent_actor(net: PolicyNet, encoder: nn.Module | None, core: LSTMModule | GRUModule,
                    param_keys: list) -> ProbabilisticActor:
    """``ProbabilisticActor`` over encoder -> ``core`` -> ``net`` (a :class:`PolicyNet` reading the memory)."""
    prefix = core.out_keys[0].removesuffix("_memory")
    front, _ = _features(encoder, prefix)
    head = TensorDictModule(net, in_keys=[core.out_keys[0]], out_keys=param_keys)
    dist_keys = dict(zip(net.param_names, param_keys, strict=True))
    if net.masked:
        dist_keys["mask"] = MASK_KEY
    return ProbabilisticActor(TensorDictSequential(*front, core, head), in_keys=dist_keys, out_keys=[keys.ACTION],
                              distribution_class=net.distribution_class,
                              distribution_kwargs=net.distribution_kwargs, return_log_prob=True)


def recurrent_critic(net: ValueNet, encoder: nn.Module | None, core: LSTMModule | GRUModule) -> TensorDictSequential:
    """encoder -> ``core`` -> ``net`` (a :class:`ValueNet` reading the memory) -> ``"state_value"``."""
    prefix = core.out_keys[0].removesuffix("_memory")
    front, _ = _features(encoder, prefix)
    head = TensorDictModule(net, in_keys=[core.out_keys[0]], out_keys=[keys.STATE_VALUE])
    return TensorDictSequential(*front, core, head)


def collection_policy(actor: TensorDictModuleBase, critic: TensorDictModuleBase | None) -> TensorDictModuleBase:
    """What a collector runs each step: the actor, and the critic after it when the critic carries a recurrent
    state of its own (its state must advance with every step, as the actor's does)."""
    if critic is None or not is_recurrent(critic):
        return actor
    own = {k for m in critic.modules() if isinstance(m, CORES) for k in m.in_keys[1:-1]}
    acted = {k for m in actor.modules() if isinstance(m, CORES) for k in m.in_keys[1:-1]}
    return actor if own <= acted else TensorDictSequential(actor, critic)


@dataclass
class Recurrent:
    """The plain-tensor form of a ppo_td-built recurrent network: ``encoder`` (or None) -> ``core`` -> ``head``
    (a :class:`PolicyNet` or :class:`ValueNet`), with the TensorDict keys of the core's state."""

    encoder: nn.Module | None
    core: LSTMModule | GRUModule
    head: nn.Module
    state: list[str]

    @property
    def lstm(self) -> bool:
        return isinstance(self.core, LSTMModule)

    def step(self, obs: torch.Tensor, state: list[torch.Tensor], is_init: torch.Tensor,
             ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One step of ``[N]`` copies: the memory features and the next state (zeroed first where ``is_init``,
        as the TorchRL module does); states in TorchRL's ``[N, layers, size]`` layout."""
        x = obs if self.encoder is None else self.encoder(obs)
        fresh = is_init.view(-1, 1, 1)
        run = rnn(self.core)
        if one_layer(run):  # one step in closed form: 2.5x faster than the LSTM/GRU call, equal within float rounding
            new = cell_step(run, x, [s.masked_fill(fresh, 0.0).squeeze(1) for s in state])
            return new[0], [s.unsqueeze(1) for s in new]
        hidden = [torch.where(fresh, torch.zeros_like(s), s).transpose(0, 1).contiguous() for s in state]
        out, new = run(x.unsqueeze(1), tuple(hidden) if self.lstm else hidden[0])
        new = list(new) if self.lstm else [new]
        return out.squeeze(1), [s.transpose(0, 1) for s in new]

    def sequence(self, obs: torch.Tensor, state: list[torch.Tensor], is_init: torch.Tensor,
                 cut: Pieces | None = None) -> torch.Tensor:
        """Memory features of ``[B, L]`` sequences replayed from their first step's stored ``state`` (``[B, L,
        layers, size]``), starting from zeros wherever ``is_init`` (``[B, L]``) marks an episode's first step.

        One call of the LSTM/GRU: each sequence is cut at its episode starts and the pieces run side by side,
        padded to the longest (padding only follows a piece's steps, so it never reaches their outputs), as
        TorchRL's recurrent mode does; 2-5x faster than one call per stretch between episode starts when episodes
        start inside the sequences (``benchmarks/recurrent.py`` times it). ``cut``: :func:`pieces` of ``is_init``,
        when the caller replays several networks over the same minibatch (computed here otherwise)."""
        batch, length = is_init.shape
        x = obs if self.encoder is None else self.encoder(obs.flatten(0, 1)).unflatten(0, (batch, length))
        run = rnn(self.core)
        cut = pieces(is_init) if cut is None else cut
        if cut is None:  # no episode starts inside: the sequences as they are
            hidden = [s[:, 0].transpose(0, 1) * (~is_init[:, 0]).view(1, -1, 1).to(s.dtype) for s in state]
            out, _ = run(x, tuple(hidden) if self.lstm else hidden[0])
            return out
        padded = x.new_zeros(cut.count, cut.longest, x.shape[-1])
        padded[cut.piece, cut.offset] = x.flatten(0, 1)
        hidden = [s.flatten(0, 1)[cut.first].transpose(0, 1) * cut.keep.to(s.dtype) for s in state]
        out, _ = run(padded, tuple(hidden) if self.lstm else hidden[0])
        return out[cut.piece, cut.offset].view(batch, length, -1)


@dataclass(frozen=True)
class Pieces:
    """``[B, L]`` sequences cut at their episode starts (see :meth:`Recurrent.sequence`): each step's piece and
    offset in it, each piece's first step (flat index) and whether it carries the stored state (not an episode
    start), the number of pieces and the longest."""

    piece: torch.Tensor
    offset: torch.Tensor
    first: torch.Tensor
    keep: torch.Tensor
    count: int
    longest: int


def pieces(is_init: torch.Tensor) -> Pieces | None:
    """The :class:`Pieces` of ``[B, L]`` sequences with episode starts ``is_init``; None when no episode starts
    inside a sequence (each sequence is then one piece).

    Index arithmetic on a few hundred flags: numpy on the CPU, then one copy of each index to ``is_init``'s device
    (about 25 us per minibatch against 110 us for the same operations as tensors)."""
    flags = is_init.detach().cpu().numpy()
    if not flags[:, 1:].any():
        return None
    batch, length = flags.shape
    starts = flags.copy()
    starts[:, 0] = True
    starts = starts.reshape(-1)
    piece = np.cumsum(starts) - 1  # the piece each step belongs to
    first = np.flatnonzero(starts)  # each piece's first step
    offset = np.arange(batch * length) - first[piece]
    longest = int(np.diff(first, append=batch * length).max())
    keep = ~flags.reshape(-1)[first]
    device = is_init.device
    return Pieces(*(torch.from_numpy(a).to(device) for a in (piece, offset, first)),
                  torch.from_numpy(keep).view(1, -1, 1).to(device), int(first.size), longest)


def recurrent_parts(module: nn.Module) -> Recurrent | None:
    """The :class:`Recurrent` form of an actor or critic built by :func:`recurrent_actor` /
    :func:`recurrent_critic`, else None."""
    seq = module.module[0] if type(module) is ProbabilisticActor and len(module.module) == 2 else module
    if type(seq) is not TensorDictSequential:
        return None
    parts = list(seq.module)
    encoder = None
    if len(parts) == 3 and type(parts[0]) is TensorDictModule:
        encoder = parts.pop(0).module
    if len(parts) != 2 or not isinstance(parts[0], CORES) or type(parts[1]) is not TensorDictModule:
        return None
    core, head = parts[0], parts[1].module
    if not isinstance(head, (PolicyNet, ValueNet)) or list(parts[1].in_keys) != [core.out_keys[0]]:
        return None
    return Recurrent(encoder, core, head, list(core.in_keys[1:-1]))
