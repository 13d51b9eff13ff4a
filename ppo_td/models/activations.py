"""ppo_td's tanh: ``nn.Tanh`` with numpy's kernel on large CPU tensors.

torch's CPU ``tanh`` is slow next to the layers around it: one thread, float32, a [1200, 256] activation took
776 us against numpy's 111 us, and half the time of the ``nn.Linear`` before it (1,525 us). Large activations
are where that shows: the multi-agent presets' [256, 256] networks over every agent row of a minibatch, value
passes over whole batches. :class:`Tanh` is an ``nn.Tanh`` (same module type for ``isinstance``, same repr,
no state) whose forward computes the activation with ``numpy.tanh`` on the tensor's own memory when that pays:

- a CPU float32/float64 tensor of plain type (not a subclass: fake or functional tensors, the tracing
  tensors of ``torch.overrides``), outside tracing, scripting, compiling and export, which keep torch's own
  operation, and not a forward-mode dual tensor without gradients (``NumpyTanh`` has a ``jvp``);
- with gradients to record, through :class:`NumpyTanh` (an ``autograd.Function``; backward is torch's own
  ``tanh_backward``; under functorch transforms its twin :class:`NumpyTanhFunctorch`), from
  :data:`GRAD_MIN_ELEMENTS` elements: below that the Function's per-call cost (about 16 us forward and 30
  backward) outweighs the kernel's gain; without gradients, from
  :data:`NO_GRAD_MIN_ELEMENTS`.

numpy's and torch's tanh differ by at most one float32 unit in the last place (measured: 6e-8 absolute; about
a third of elements differ), so a network's outputs move within float rounding. Which kernel runs depends on
the tensor's size, so the same row can differ in its last bit between collection (a few env copies, without
gradients) and a minibatch (with gradients): the first epoch's ratios are 1 within float rounding, as with the
numpy collection policy. ppo_td's paths and TorchRL's (its fast collector and loss, TorchRL's collector and
``ClipPPOLoss``) call the same module at the same sizes, so they stay identical to each other. The doctor does
not count the ``detach``/``numpy`` inside as a cut from the graph: ``NumpyTanh`` carries the gradient. Under
``torch.vmap`` (TorchRL's GAE may map the critic) :class:`NumpyTanhFunctorch`'s ``vmap`` rule runs torch's tanh.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.autograd import forward_ad

GRAD_MIN_ELEMENTS = 1 << 15  # measured crossover, forward + backward: [512, 64] 117 -> 94 us, [256, 64] 69 -> 79
NO_GRAD_MIN_ELEMENTS = 1 << 10  # forward only: [64, 64] 12.3 -> 3.7 us, [32, 64] 6.3 -> 3.0


class NumpyTanhFunctorch(torch.autograd.Function):
    """:class:`NumpyTanh` as functorch transforms (vmap, ``torch.func.grad``, ...) need it: with ``setup_context``
    and a ``vmap`` rule (torch's tanh)."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.tanh(x.detach().numpy()))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        ctx.save_for_backward(output)
        ctx.save_for_forward(output)

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:  # forward-mode AD: the same derivative
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(tangent, y)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)

    @staticmethod
    def vmap(info: Any, in_dims: tuple[int | None], x: torch.Tensor) -> tuple[torch.Tensor, int | None]:
        return torch.tanh(x), in_dims[0]


class NumpyTanh(torch.autograd.Function):
    """tanh computed by numpy on a CPU tensor's memory; backward ``grad * (1 - y^2)`` by torch's kernel.

    Without ``setup_context`` (forward stores what backward and jvp read), so its ``apply`` skips the
    ``inspect.signature`` binding torch does on every call of a Function that has one (about 47 us, a tenth of a
    [1200, 256] activation's cost). functorch transforms need ``setup_context``: under them ``apply`` raises
    before running anything, and :class:`NumpyTanhFunctorch` runs instead."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.from_numpy(np.tanh(x.detach().numpy()))
        ctx.save_for_backward(y)
        ctx.save_for_forward(y)
        return y

    jvp = NumpyTanhFunctorch.jvp
    backward = NumpyTanhFunctorch.backward


def _numpy_applies(x: torch.Tensor) -> bool:
    """The checks after the size (a plain CPU tensor outside tracing was checked first): dtype, views, compiling."""
    return (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and not x.is_neg()
            and not x.is_conj() and not (torch.jit.is_scripting() or torch.compiler.is_compiling()
                                         or torch.compiler.is_exporting()))  # ONNX export traces through these


class Tanh(nn.Tanh):
    """``nn.Tanh`` computed by numpy on large CPU tensors (see the module docs); torch's ``tanh`` otherwise."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 (nn.Tanh's argument name)
        # the cheap checks first: most calls (small minibatches, single observations) stop at the size
        if type(input) is not torch.Tensor or torch.jit.is_tracing():  # (under tracing numel() is traced too)
            return torch.tanh(input)
        grad = input.requires_grad and torch.is_grad_enabled()
        if input.numel() < (GRAD_MIN_ELEMENTS if grad else NO_GRAD_MIN_ELEMENTS) or not _numpy_applies(input):
            return torch.tanh(input)
        if grad:
            try:
                return NumpyTanh.apply(input)
            except RuntimeError as err:  # under a functorch transform (vmap, grad, ...) apply refuses a Function
                if "setup_context" not in str(err):  # without setup_context before running anything: the
                    raise  # Function it can run; any other error (after the forward ran) is the caller's
                return NumpyTanhFunctorch.apply(input)
        if forward_ad.unpack_dual(input).tangent is not None:  # a forward-mode dual: torch's op, with its jvp
            return torch.tanh(input)
        try:
            return torch.from_numpy(np.tanh(input.detach().numpy()))
        except RuntimeError:  # no storage to read: a tensor batched by torch.vmap
            return torch.tanh(input)
