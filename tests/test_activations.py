"""ppo_td's Tanh (numpy's kernel on large CPU tensors) against torch's tanh: values, gradients, the cases that
must keep torch's operation (small tensors, tracing, export, compile, vmap, tensor subclasses)."""

from __future__ import annotations

import pickle

import numpy as np
import torch
from torch import nn
from torch.autograd import forward_ad

from ppo_td.config import ModelConfig
from ppo_td.doctor import audit
from ppo_td.models.activations import GRAD_MIN_ELEMENTS, NO_GRAD_MIN_ELEMENTS, NumpyTanh, Tanh
from ppo_td.models.networks import mlp

torch.set_num_threads(1)

BIG = (GRAD_MIN_ELEMENTS // 64 + 3, 64)  # over both thresholds


def test_large_tensors_use_numpy_within_float_rounding() -> None:
    x = torch.randn(*BIG, generator=torch.Generator().manual_seed(0)) * 3
    y = Tanh()(x)
    assert y.grad_fn is None and y.dtype == torch.float32
    assert torch.equal(y, torch.from_numpy(np.tanh(x.numpy())))  # numpy's kernel ran
    torch.testing.assert_close(y, torch.tanh(x), rtol=1e-6, atol=1e-7)
    x64 = x.double()
    torch.testing.assert_close(Tanh()(x64), torch.tanh(x64))
    strided = x.t()  # numpy reads the strides
    torch.testing.assert_close(Tanh()(strided), torch.tanh(strided), rtol=1e-6, atol=1e-7)


def test_gradients_match_torch() -> None:
    x = torch.randn(*BIG, generator=torch.Generator().manual_seed(1), requires_grad=True)
    y = Tanh()(x)
    assert type(y.grad_fn).__name__ == "NumpyTanhBackward"
    g = torch.randn(*BIG, generator=torch.Generator().manual_seed(2))
    (got,) = torch.autograd.grad(y, x, g)
    ref = x.detach().requires_grad_()
    (want,) = torch.autograd.grad(torch.tanh(ref), ref, g)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    small = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(NumpyTanh.apply, (small,))


def test_small_tensors_keep_torch_exactly() -> None:
    x = torch.randn(NO_GRAD_MIN_ELEMENTS - 1)
    assert torch.equal(Tanh()(x), torch.tanh(x))
    xg = torch.randn(GRAD_MIN_ELEMENTS - 1, requires_grad=True)
    y = Tanh()(xg)
    assert type(y.grad_fn).__name__ == "TanhBackward0" and torch.equal(y, torch.tanh(xg))


def test_transforms_and_tracing_keep_working() -> None:
    m = Tanh()
    batched = torch.randn(3, *BIG)
    torch.testing.assert_close(torch.vmap(m)(batched), torch.tanh(batched))  # no storage under vmap: torch's
    xg = batched.clone().requires_grad_()
    torch.vmap(m)(xg).sum().backward()  # the Function's vmap rule
    torch.testing.assert_close(xg.grad, 1 - torch.tanh(batched) ** 2)
    x = torch.randn(*BIG)
    torch.testing.assert_close(torch.func.grad(lambda z: m(z).sum())(x), 1 - torch.tanh(x) ** 2)
    net = nn.Sequential(nn.Linear(8, 64), Tanh(), nn.Linear(64, 2))
    rows = torch.randn(BIG[0], 8)
    traced = torch.jit.trace(net, (rows,), check_trace=False)
    assert "aten::tanh" in str(traced.inlined_graph)  # torch's operation in the file, not a numpy call
    torch.testing.assert_close(traced(rows), net(rows), rtol=1e-5, atol=1e-6)
    program = torch.export.export(net, (rows,), strict=False)
    assert "tanh" in str(program.graph)
    torch.testing.assert_close(program.module()(rows), net(rows), rtol=1e-5, atol=1e-6)


def test_tensor_subclasses_keep_torch() -> None:
    class Traced(torch.Tensor):  # the doctor's kind of tensor: it must see torch's tanh
        seen: list = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.randn(*BIG).as_subclass(Traced)
    Tanh()(x)
    assert torch.tanh in Traced.seen


def test_networks_use_it_and_it_is_an_nn_tanh() -> None:
    net = mlp(8, 2, ModelConfig(hidden_sizes=(64, 64)), head_gain=0.01)
    activations = [m for m in net.modules() if isinstance(m, nn.Tanh)]
    assert len(activations) == 2 and all(type(m) is Tanh for m in activations)
    assert repr(Tanh()) == "Tanh()"
    copy = pickle.loads(pickle.dumps(net))
    rows = torch.randn(BIG[0], 8)
    torch.testing.assert_close(copy(rows), net(rows))


def test_forward_mode_derivatives() -> None:
    x, v = torch.randn(*BIG), torch.randn(*BIG)
    want = v * (1 - torch.tanh(x) ** 2)
    with forward_ad.dual_level():
        dual = Tanh()(forward_ad.make_dual(x, v))  # without gradients: torch's kernel, its tangent
        torch.testing.assert_close(forward_ad.unpack_dual(dual).tangent, want)
        dual = Tanh()(forward_ad.make_dual(x.clone().requires_grad_(), v))  # the Function's jvp
        assert type(dual.grad_fn).__name__ == "NumpyTanhBackward"
        torch.testing.assert_close(forward_ad.unpack_dual(dual).tangent, want, rtol=1e-5, atol=1e-6)


def test_the_doctor_sees_no_cut_inside_it() -> None:
    """Its numpy call reads a graph tensor's memory, but the Function gives the gradient back: no cut to report."""
    torch.manual_seed(0)
    config = ModelConfig(hidden_sizes=(64, 64))
    trunk = mlp(8, 64, config, head_gain=None)  # the audited actor; its output goes through another network
    head = mlp(64, 2, config, head_gain=0.01)
    critic = mlp(8, 1, config, head_gain=1.0)
    opt = torch.optim.Adam([*trunk.parameters(), *head.parameters(), *critic.parameters()], lr=1e-3)
    obs = torch.randn(BIG[0], 8)
    with audit(actor=trunk, critic=critic, optimizers=[opt]) as a:
        loss = head(trunk(obs)).logsumexp(-1).mean() + critic(obs).square().mean()
        assert "NumpyTanhBackward" in _graph_names(loss)  # the case in question: numpy's kernel in the graph
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert not a._cuts, a._cuts
    assert all(f.item != 4 for f in a.findings), a.report()


def _graph_names(t: torch.Tensor) -> set[str]:
    names, todo, seen = set(), [t.grad_fn], set()
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.add(type(fn).__name__)
        todo += [f for f, _ in fn.next_functions]
    return names
