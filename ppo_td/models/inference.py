"""Sampling from a small MLP policy in numpy: the fast collector's step without torch's per-call cost.

At one to a few dozen env copies a policy network is a handful of tiny matrix products. torch spends most of
its time there on dispatch (about 4 us an operation on this project's CPU, 23 us for a 17-64-64-6 forward
through ``nn.Module`` calls), numpy about 1 us (6 us for the same forward). :class:`NumpyPolicy` runs a
:class:`~ppo_td.models.PolicyNet`'s layers, sampling and log-prob on numpy views of the parameters' own memory
(so optimizer steps and ``load_state_dict`` show through), and draws its noise from torch's generator the way
the torch path does (the Gaussian's ``normal_``, the categorical's ``exponential_`` of ``torch.multinomial``'s
one-draw path), so ``torch.manual_seed`` decides every sample and the generator ends in the same state. The
operations are the ones torch runs, in the same order, in the same dtype; the matrix products round
differently (another BLAS), so outputs agree with the torch path within float rounding, not bit for bit
(``tests/test_inference.py``: 1e-6 relative; a categorical action differs only where two actions' scores tie
within rounding).

It runs exactly these policies, and :meth:`NumpyPolicy.of` returns None for anything else (the torch path runs
them):

- a :class:`PolicyNet` whose encoder (if any) is one of ppo_td's own for vectors and indices (``Flatten``,
  ``OneHot``, a ``DictEncoder`` of those: :func:`numpy_encoder`), not a CNN, with an ``IndependentNormal`` head
  (:class:`~ppo_td.models.GaussianHead`), a ``Categorical`` or TorchRL's ``MaskedCategorical`` (a Discrete action's
  legal-move mask: the illegal actions' logits at -inf, as its ``masked_fill``), without distribution kwargs;
- a head that is an ``nn.Sequential`` (TorchRL's ``MLP``) of ``nn.Linear``, ``nn.Tanh``, ``nn.ReLU`` and
  ``nn.Identity`` layers, float32 parameters on the CPU;
- small enough that numpy's BLAS stays on one thread (:func:`one_thread`: larger products run in torch, on
  torch's threads), where its per-call cost is a fraction of torch's;
- weights that are the layers' own parameters (not recomputed by pruning, weight or spectral norm, or a
  parametrization) and no reshaped MLP output.

Module hooks do not fire in numpy; ``collector.inference='torch'`` keeps the torch path for a policy whose
hooks must see collection.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import distributions as D
from torch import nn
from torch.nn.utils import parametrize, prune
from torchrl.modules import MLP, IndependentNormal, MaskedCategorical

from ppo_td.models.activations import Tanh
from ppo_td.models.distributions import _HALF_LOG_2PI
from ppo_td.models.encoders import DictEncoder, Flatten, OneHot
from ppo_td.models.networks import GaussianHead, PolicyNet

MAX_LAYER_WORK = 1 << 18
"""Largest ``rows x inputs x outputs`` of a matrix-matrix product run in numpy (OpenBLAS's gemm goes
multi-threaded above it)."""
MAX_VECTOR_WORK = 9216
"""Largest ``rows x inputs`` (or ``inputs x outputs``) of a matrix-vector product run in numpy: one row, or one
output (OpenBLAS's gemv goes multi-threaded from 2304 x 4)."""


def one_thread(rows: int, inputs: int, outputs: int) -> bool:
    """True when numpy's product of ``[rows, inputs] @ [inputs, outputs]`` stays on one BLAS thread."""
    if rows == 1:
        return inputs * outputs < MAX_VECTOR_WORK
    if outputs == 1:
        return rows * inputs < MAX_VECTOR_WORK
    return rows * inputs * outputs <= MAX_LAYER_WORK


def _relu(h: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.maximum(h, 0.0, out=out)


def _elu(h: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``nn.ELU()`` (alpha 1): max(h, 0) + expm1(min(h, 0))."""
    negative = np.expm1(np.minimum(h, 0.0))
    np.maximum(h, 0.0, out=out)
    return np.add(out, negative, out=out)


_ACTIVATIONS = {nn.Tanh: np.tanh, Tanh: np.tanh, nn.ReLU: _relu, nn.ELU: _elu}  # named functions: a NumpyPolicy
# pickles


class NumpyPolicy:
    """A :class:`PolicyNet`'s forward, sampling and log-prob on numpy arrays (see the module docs).

    Example:
        >>> fast = NumpyPolicy.of(policy_net(actor), rows=4)  # None where it does not apply
        >>> params, action, log_prob = fast.sample(observation)  # numpy in, numpy out
    """

    def __init__(self, kind: str, linears: list[nn.Linear], activations: list[list], head: GaussianHead | None,
                 encode: Any = None):
        self.kind = kind
        """'normal' (a diagonal Gaussian), 'categorical' or 'masked_categorical'."""
        self.encode = encode if encode is not None else _as_is
        """The observation encoder in numpy (:func:`numpy_encoder`): the observation as it is for a float vector."""
        self._linears, self._activations, self._head = linears, activations, head
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self._log_std: np.ndarray | None = None
        self.refresh()

    @classmethod
    def of(cls, net: nn.Module, rows: int) -> NumpyPolicy | None:
        """The numpy form of ``net`` for batches of ``rows`` observations, or None where it does not apply."""
        if type(net) is not PolicyNet or net.distribution_kwargs:
            return None
        encode = numpy_encoder(net.trunk) if net.trunk is not None else _as_is
        if encode is None:
            return None
        head: nn.Module = net.head
        if net.distribution_class is IndependentNormal and type(head) is GaussianHead:
            kind, body, gaussian = "normal", head.net, head
        elif net.distribution_class is D.Categorical and not net.masked:
            kind, body, gaussian = "categorical", head, None
        elif net.distribution_class is MaskedCategorical and net.masked:
            kind, body, gaussian = "masked_categorical", head, None
        else:
            return None
        if not isinstance(body, nn.Sequential) or type(body).forward not in (nn.Sequential.forward, MLP.forward):
            return None
        if isinstance(body, MLP) and not isinstance(body.out_features, int):
            return None  # an MLP that reshapes its output
        linears: list[nn.Linear] = []
        activations: list[list] = []  # the activations after each linear layer
        for layer in body:
            kind_of = type(layer)
            own = dict(layer.named_parameters(recurse=False))
            if parametrize.is_parametrized(layer) or prune.is_pruned(layer):
                return None
            if kind_of is nn.Linear and own.get("weight") is layer.weight and own.get("bias") is layer.bias \
                    and layer.bias is not None:
                linears.append(layer)
                activations.append([])
            elif kind_of in _ACTIVATIONS and linears and getattr(layer, "alpha", 1.0) == 1.0:  # ELU's alpha: 1
                activations[-1].append(_ACTIVATIONS[kind_of])
            elif kind_of is not nn.Identity:
                return None
        if not linears or activations[-1]:
            return None  # no layer, or an activated output
        if not _plain(_parameters(linears, gaussian)) or not all(one_thread(rows, layer.in_features, layer.out_features)
                                         for layer in linears):
            return None
        return cls(kind, linears, activations, gaussian, encode)

    def memory(self) -> list[int]:
        """Where the parameters' data lives now (``data_ptr``): a change means they were moved, cast or replaced
        since :meth:`refresh` (a caller holding the views across optimizer steps checks it; :class:`Policy` does)."""
        return [t.data_ptr() for t in _parameters(self._linears, self._head)]

    def refresh(self) -> bool:
        """Read the parameters again (views of their memory: in-place updates show through; call this after a
        parameter was replaced rather than updated, as the fast collector does before every batch). False when
        they are no longer float32 CPU tensors (moved or cast since): the torch path must run them."""
        if not _plain(_parameters(self._linears, self._head)):
            return False
        self._layers = [(layer.weight.detach().numpy().T, layer.bias.detach().numpy()) for layer in self._linears]
        self._log_std = self._head.log_std.detach().numpy() if self._head is not None else None
        return True

    def forward(self, obs: np.ndarray | dict) -> np.ndarray:
        """The head's output (the Gaussian's mean, or the logits) for ``obs`` (``[rows, inputs]``, or what the
        encoder reads: indices, a nested dict of arrays for a ``Dict``/``Tuple`` observation)."""
        h = self.encode(obs)
        for (weight, bias), activations in zip(self._layers, self._activations, strict=True):
            h = h @ weight
            h += bias
            for activation in activations:
                activation(h, out=h)
        return h

    def sample(self, obs: np.ndarray, mask: np.ndarray | None = None
               ) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
        """The distribution's parameters, a sampled action and its log-prob, as the torch path computes them.
        ``mask``: a masked categorical's legal actions (bool, one row per observation).

        Raises:
            ValueError: the parameters hold NaN (or, for the Gaussian, inf) values, as the torch path does; a masked
                policy without its bool mask, or a legal action's logit infinite (stricter than the torch path,
                which draws around a -inf one), or a row with no legal action.
        """
        out = self.forward(obs)
        if self.kind == "normal":
            loc = out
            scale = np.empty_like(loc)
            scale[...] = np.exp(self._log_std)  # GaussianHead: log_std.exp().expand_as(loc)
            eps = torch.empty(loc.shape, dtype=torch.float32).normal_().numpy()  # torch's RNG, as Normal.rsample
            action = loc + eps * scale
            log_prob = (-((action - loc) ** 2) / (2 * scale**2) - np.log(scale) - np.float32(_HALF_LOG_2PI)).sum(-1)
            if not np.isfinite(log_prob).all():
                raise ValueError("the policy's Gaussian parameters (loc, scale) hold NaN or inf values, or a scale "
                                 "<= 0: the network's parameters or its input overflowed")
            return (loc, scale), action, log_prob
        logits = out
        scores = logits  # what is drawn from: the logits, a masked policy's with the illegal actions at -inf
        if self.kind == "masked_categorical":
            if mask is None:
                raise ValueError("a masked categorical policy needs the legal-action mask (\"action_mask\")")
            if mask.dtype != np.bool_:  # (the torch path's masked_fill refuses it too; MaskCheck casts env masks)
                raise ValueError(f"the legal-action mask is {mask.dtype}; a masked policy reads a bool mask")
            scores = np.where(mask, logits, np.float32(-np.inf))  # MaskedCategorical's masked_fill
        legal = scores[mask] if self.kind == "masked_categorical" else scores
        if not np.isfinite(legal).all():  # an overflowed network (torch's multinomial refuses NaN and +inf)
            raise ValueError("the policy's logits hold NaN or infinite values: the network's parameters or its input "
                             "overflowed")
        if self.kind == "masked_categorical" and not mask.any(-1).all():
            raise ValueError("an observation's action mask allows no action: the policy has nothing to draw from")
        top = scores.max(-1, keepdims=True)
        normalized = scores - (top + np.log(np.exp(scores - top).sum(-1, keepdims=True)))
        # torch.multinomial(probs, 1)'s own draw: one exponential per entry, the largest probs / q
        q = torch.empty(normalized.shape, dtype=torch.float32).exponential_().numpy()
        action = np.argmax(np.exp(normalized) / q, -1)
        log_prob = normalized[np.arange(len(normalized)), action]  # (take_along_axis's values, 3 us sooner)
        return (logits,), action, log_prob


def _as_is(obs: np.ndarray) -> np.ndarray:
    return obs


def numpy_encoder(module: nn.Module) -> Any:
    """The numpy form of one of ppo_td's encoders, as torch computes it (the same values: one-hot ones, casts to
    float32, concatenation in key order), or None for any other module (a CNN, the user's own)."""
    kind = type(module)
    if kind is Flatten:
        size = module.out_features
        return lambda x: np.asarray(x).reshape(len(x), size).astype(np.float32, copy=False)
    if kind is OneHot:
        offsets, width = np.asarray([0, *np.cumsum(module.nvec)][:-1], dtype=np.int64), module.out_features

        def one_hot(x: np.ndarray) -> np.ndarray:
            index = np.asarray(x).reshape(len(x), -1).astype(np.int64) + offsets
            out = np.zeros((index.shape[0], width), dtype=np.float32)
            np.put_along_axis(out, index, 1.0, axis=1)
            return out
        return one_hot
    if kind is DictEncoder:
        parts = {k: (numpy_encoder(module.encoders[k]) if k in module.encoders else _as_is) for k in module.keys}
        if any(part is None for part in parts.values()):
            return None
        return lambda x: np.concatenate([part(x[k]) for k, part in parts.items()], axis=-1)
    return None


def _parameters(linears: list[nn.Linear], head: GaussianHead | None) -> list[torch.Tensor]:
    """The parameters the numpy form reads, looked up afresh (a replaced parameter is the new one)."""
    return [t for layer in linears for t in (layer.weight, layer.bias)] + ([head.log_std] if head is not None else [])


def _plain(params: list[torch.Tensor]) -> bool:
    return all(p.dtype == torch.float32 and p.device.type == "cpu" for p in params)

