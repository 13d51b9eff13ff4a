"""The doctor: find the autograd mistakes that break hand-written PPO updates.

Wrap a few training steps in :func:`audit`. It watches every forward of the audited modules,
every ``backward()`` (and looks at its graph *before* it runs), every optimizer step and the torch calls its
detectors ask for, and hands each event to the detectors (:mod:`ppo_td.doctor.detectors`, one check each), which
report each mistake with the culprit (module, parameter, line) and the fix in RL terms.

Example:
    >>> with audit(policy=actor, critics=[v_net, q_net], optimizers=[pi_opt, v_opt, q_opt]) as a:
    ...     my_update(batch)
    >>> print(a.report())

Modules and optimizers come as one object, a list, tuple or dict of them, under any keyword;
findings name them by the keyword, the dict key, or the keyword with an index. Without any
module, the audit discovers the modules called at the top level of the user's code (and the
optimizers that step) through torch's global hooks, naming them by the user's variables.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module
from torch.overrides import TorchFunctionMode

from ppo_td.doctor.audit import Audit, Backward, Cut, Forward, StopAudit, shared_nodes
from ppo_td.doctor.detectors import registered
from ppo_td.doctor.explain import DoctorError, explain, parse_inplace_error
from ppo_td.doctor.findings import ErrorReport, Finding
from ppo_td.doctor.graph import below, graph, leaves
from ppo_td.doctor.lines import (
    OWN_KERNELS,
    POLICY_WORDS,
    VALUE_WORDS,
    call_chain,
    caller,
    error_line,
    outer,
    user_frame,
    user_name,
    user_name_by_parameters,
    words,
)

__all__ = ["Audit", "Finding", "StopAudit", "audit"]

# torch functions whose result carries no gradient back to their input: where a policy's graph is cut
_CUTS = {torch.Tensor.item: ".item()", torch.Tensor.tolist: ".tolist()", torch.Tensor.numpy: ".numpy()",
         torch.Tensor.detach: ".detach()", torch.argmax: "argmax", torch.Tensor.argmax: "argmax",
         torch.argmin: "argmin", torch.Tensor.argmin: "argmin", torch.multinomial: "sampling (multinomial)",
         torch.Tensor.long: ".long()", torch.Tensor.int: ".int()", torch.round: "round",
         torch.Tensor.round: "round"}


def _each(a: Audit, event: str, *args: Any) -> None:
    """Hand an event to every detector; a failure of a detector is a warning, never the audited code's error."""
    for detector in a.detectors:
        _guarded(getattr(detector, event), a, *args)


# -- forwards --------------------------------------------------------------------------------------
def _tensors(output: Any) -> list[torch.Tensor]:
    if torch.is_tensor(output):
        return [output]
    if hasattr(output, "batch_size") and hasattr(output, "values"):  # a TensorDict
        return [t for t in output.values(True, True) if torch.is_tensor(t)]
    if isinstance(output, (tuple, list)):
        return [t for t in output if torch.is_tensor(t)]
    if isinstance(output, Mapping):
        return [t for t in output.values() if torch.is_tensor(t)]
    return []


def _record_forward(a: Audit, name: str, output: Any, module: nn.Module) -> None:
    a._forwards[name] = n = a._forwards.get(name, 0) + 1
    tensors = _tensors(output)
    if name not in a._output_roles and tensors:
        keys = set(output.keys(True, True)) if hasattr(output, "batch_size") else set()
        value_like = "state_value" in keys or "state_action_value" in keys or (
            not keys and tensors[0].dim() > 0 and tensors[0].shape[-1] == 1)
        a._output_roles[name] = "value" if value_like else "policy"
    graphs = [t.grad_fn for t in tensors if t.grad_fn is not None]
    record = None
    if graphs:  # (not for a rollout under no_grad: finding the line costs a stack walk)
        chain = call_chain()
        where = outer(chain)
        for t in tensors:
            if t.grad_fn is not None:
                a._outputs[id(t.grad_fn)] = record = Forward(name, n, where, a._steps, t.grad_fn, chain,
                                                             tuple(t.shape))
    a.called = module  # (``name``'s module, or a part or view of it that ran)
    _each(a, "forward", name, output, record)


def _forward_hook(a: Audit, name: str):
    def hook(module, args, output):
        _guarded(_record_forward, a, name, output, module)
    return hook


class _Discovery:
    """Torch's global module hooks: register the modules the user's code calls at the top level (not inside
    another module's forward), named by the user's variables, and record their forwards. A top-level module
    made of named parts (``self.actor``, ``self.critic``, a trunk and ``pi``/``v`` heads) is audited as its
    parts, so a policy and a value network inside one module stay apart."""

    def __init__(self, a: Audit, losses: _LossWatch) -> None:
        self.audit, self.losses, self.depth, self.counts = a, losses, 0, {}
        self.seen: dict[int, nn.Module] = {}  # top-level modules already looked at (kept: their ids stay theirs)

    def pre(self, module: nn.Module, args: Any) -> None:
        if self.depth == 0 and id(module) not in self.seen:
            self.seen[id(module)] = module
            _guarded(self._register, module)
        self.depth += 1
        self.losses.pre(module, args)

    def _register(self, module: nn.Module) -> None:
        if not any(p.requires_grad for p in module.parameters()) or self.audit.name_of(module) is not None:
            return
        cls = type(module).__name__
        self.counts[cls] = self.counts.get(cls, 0) + 1
        name = user_name(module) or f"{cls}#{self.counts[cls]}"
        for part_name, part in _parts(name, module):
            holder = self.audit.holder_of(part)
            if holder is not None:  # (a part of a module audited already, or a view of its parameters)
                self.audit.alias(part, holder)
            else:
                self.audit.add_module(part_name if part is module else user_name_by_parameters(part) or part_name,
                                      part)

    def post(self, module: nn.Module, args: Any, output: Any) -> None:
        self.depth -= 1
        self.losses.post(module, args, output)
        name = self.audit.name_of(module)
        if name is not None:
            _guarded(_record_forward, self.audit, name, output, module)


def _parts(name: str, module: nn.Module) -> list[tuple[str, nn.Module]]:
    """``module`` as the parts to audit: its children when two or more hold parameters and one is named as a
    policy or value part (``actor``/``critic``, ``pi``/``v``, ...); else the module itself."""
    if isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        return [(name, module)]
    parts = [(f"{name}.{child_name}", child) for child_name, child in module.named_children()
             if any(p.requires_grad for p in child.parameters())]
    if len(parts) >= 2 and any(words(n.rsplit(".", 1)[1]) & (VALUE_WORDS | POLICY_WORDS) for n, _ in parts):
        return parts
    return [(name, module)]


class _LossWatch:
    """For TorchRL's loss modules only (``LossModule``: ``ClipPPOLoss``, ...; seen once TorchRL's objectives are
    imported), from torch's global module hooks: their outputs go to the detectors' ``loss`` event, and
    :attr:`Audit.in_loss` says when code runs inside one."""

    def __init__(self, a: Audit) -> None:
        self.audit, self.names, self.cls = a, {}, None

    def _is_loss(self, module: nn.Module) -> bool:
        if self.cls is None:
            self.cls = getattr(sys.modules.get("torchrl.objectives.common"), "LossModule", None)
        return self.cls is not None and isinstance(module, self.cls)

    def pre(self, module: nn.Module, args: Any) -> None:
        if self._is_loss(module):
            self.audit.in_loss += 1

    def post(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._is_loss(module):
            self.audit.in_loss -= 1
            _guarded(self._report, module, args, output)

    def _report(self, module: nn.Module, args: Any, output: Any) -> None:
        if id(module) not in self.names:
            self.names[id(module)] = (module, user_name(module) or type(module).__name__)
        _each(self.audit, "loss", self.names[id(module)][1], module, args[0] if args else None, output,
              call_chain())


# -- backward: look at the graph before it runs -------------------------------------------------------
def _on_backward(a: Audit, tensors: Any, retain_graph: bool | None) -> Backward | None:
    tensors = [t for t in (list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]) if torch.is_tensor(t)]
    roots = [t.grad_fn for t in tensors if t.grad_fn is not None]
    if not roots:
        return None
    nodes, children = graph(roots)
    reached = leaves(nodes)
    modules = {name for pid in reached for name in a._owners.get(pid, ())}
    record = Backward(len(a._backwards) + 1, caller(), nodes, bool(retain_graph), modules, a._steps, reached,
                      tensors)
    _each(a, "backward", record, roots, children)
    a._backwards.append(record)
    return record


# -- optimizer steps ---------------------------------------------------------------------------------
def _pre_step(a: Audit, opt: torch.optim.Optimizer) -> None:
    if a.stop_after is not None and a._steps >= a.stop_after:
        a.stopped = f"stopped after {a._steps} optimizer steps (--steps)"
        raise StopAudit(a.stopped)  # (again at every later step: a bare except in the code may swallow one)
    where = caller()
    params = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
    name = a.optimizer_name(opt) or a.add_optimizer(user_name(opt) or f"{type(opt).__name__}#{len(a.optimizers) + 1}",
                                                    opt)
    a._grad_norms = _grad_norms(params)
    _each(a, "step", opt, name, params, where)
    a._steps += 1
    a._stepped_at.update({id(p): (a._steps, where, name) for p in params})


def _grad_norms(params: list[torch.Tensor]) -> dict[int, float]:
    """Each dense gradient's norm, read with one transfer per device (parameters may sit on several)."""
    by_device: dict[torch.device, list[torch.Tensor]] = {}
    for p in params:
        if p.grad is not None and not p.grad.is_sparse:
            by_device.setdefault(p.grad.device, []).append(p)
    norms = {}
    for group in by_device.values():
        values = torch.stack([torch.linalg.vector_norm(p.grad.detach()).float() for p in group]).tolist()
        norms.update({id(p): n for p, n in zip(group, values, strict=True)})
    return norms


# -- errors ------------------------------------------------------------------------------------------
def _diagnose(a: Audit, err: RuntimeError, record: Backward | None) -> DoctorError:
    text = str(err)
    explanation = explain(err)
    where = record.where if record else caller()
    culprit = f"backward #{record.index}: {explanation.cause}" if record else explanation.cause
    if "backward through the graph a second time" in text and record is not None:
        earlier = [b for b in a._backwards[:-1] if shared_nodes(record, b)]
        if earlier:
            culprit = (f"backward #{record.index} reuses graph freed by backward #{earlier[-1].index} at "
                       f"{earlier[-1].where}{a.describe_outputs(shared_nodes(record, earlier[-1]))}")
    elif "modified by an inplace operation" in text:
        shape, version = parse_inplace_error(text)
        # a parameter of this graph, stepped since; the saved tensor may be it or its transpose (Linear: weight.t())
        mine = leaves(record.nodes) if record is not None else set()
        params = [p for p in a.params() if shape is not None and shape in (list(p.shape), list(p.shape)[::-1])
                  and (not mine or id(p) in mine)]
        stepped = [(f"{a.named(p)} {list(p.shape)}", a._stepped_at[id(p)]) for p in params if id(p) in a._stepped_at]
        if stepped:
            (param, (step, line, opt)) = stepped[0]
            culprit = (f"backward #{record.index if record else '?'}: {param} was changed in place by optimizer "
                       f"step #{step} ({opt} at {line}) after the forward this loss uses")
        else:
            culprit = f"a tensor of shape {shape} (now at version {version}) was changed in place"
    if explanation.item is None:
        return DoctorError(explanation.message(text))
    finding = a.add(explanation.item, explanation.title, culprit, explanation.fix, where)
    a._error_finding, a._error_text = finding, text
    return DoctorError(f"{text}\n\nppo_td doctor:\n{finding}")


def _record_error(a: Audit, err: BaseException) -> None:
    if isinstance(err, SystemExit) and err.code in (None, 0):
        return  # a script that ends with sys.exit(0) did not fail
    if a._error_finding is not None and isinstance(err, DoctorError):
        a.error = ErrorReport(type(err.__cause__ or err).__name__, a._error_text, error_line(err), a._error_finding)
        return
    finding = None
    if isinstance(err, RuntimeError):
        explanation = explain(err)
        if explanation.item is not None:
            finding = a.add(explanation.item, explanation.title, explanation.cause, explanation.fix, error_line(err))
    a.error = ErrorReport(type(err).__name__, str(err), error_line(err), finding)


class _BackwardWatch(TorchFunctionMode):
    """Sees every ``Tensor.backward`` and ``torch.autograd.backward`` call in the block (torch's public
    function-override mode): audits the graph before it runs, explains the error if it raises. Also notes
    where an audited module's output is cut from the graph (``.item()``, argmax, sampling, ...), and hands the
    calls the detectors watch to them."""

    def __init__(self, a: Audit) -> None:
        super().__init__()
        self.audit = a

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CUTS:
            _guarded(_note_cut, self.audit, func, args)
        watchers = self.audit.watched.get(func)
        if watchers and torch.is_grad_enabled():  # (the detectors judge loss terms: none under no_grad)
            result = func(*args, **kwargs)
            if getattr(result, "requires_grad", False) or func in self.audit.watched_without_grad:
                for detector in watchers:
                    _guarded(detector.call, self.audit, func, args, kwargs, result)
            return result
        if func is not torch.Tensor.backward and func is not torch.autograd.backward:
            return func(*args, **kwargs)
        # both take (tensors, gradient, retain_graph, create_graph, ...); retain_graph defaults to create_graph
        retain_graph = kwargs.get("retain_graph", args[2] if len(args) > 2 else None)
        if retain_graph is None:
            retain_graph = kwargs.get("create_graph", args[3] if len(args) > 3 else False)
        record = _guarded(_on_backward, self.audit, args[0] if args else kwargs.get("tensors"), retain_graph)
        try:
            return func(*args, **kwargs)
        except RuntimeError as err:
            raise _diagnose(self.audit, err, record) from err


def _guarded(check: Any, *args: Any) -> Any:
    """Run one of the doctor's checks; a failure of the check itself is a warning, never the audited code's error."""
    try:
        return check(*args)
    except (StopAudit, KeyboardInterrupt):
        raise
    except Exception as err:  # noqa: BLE001 - the audited code must run as it would without the doctor
        warnings.warn(f"ppo_td doctor: {getattr(check, '__qualname__', check).strip('_')} could not check this "
                      f"call: {type(err).__name__}: {err}", RuntimeWarning, stacklevel=2)
        return None


def _note_cut(a: Audit, func: Any, args: tuple) -> None:
    t = args[0] if args else None
    if not torch.is_tensor(t) or t.grad_fn is None or not a._outputs:
        return
    frame = user_frame()  # the code that made the call: the first frame outside the doctor and torch
    if frame is not None and os.path.abspath(frame.f_code.co_filename) in OWN_KERNELS:
        return
    fwd = below(t.grad_fn, a._outputs)
    if fwd is not None:
        cut, cuts = Cut(caller(), _CUTS[func], fwd), a._cuts.setdefault(fwd.module, [])
        if all((c.where, c.how) != (cut.where, cut.how) for c in cuts):
            cuts.append(cut)
            del cuts[:-8]


# -- the context manager -------------------------------------------------------------------------------
def _collect(kind: str, value: Any, name: str) -> list[tuple[str, Any]]:
    """``value`` (one object, or a list, tuple or dict of them) as (name, object) pairs."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)) or (kind == "optimizer" and isinstance(value, Iterable)
                                              and not isinstance(value, torch.optim.Optimizer)):
        return [(f"{name}[{i}]", v) for i, v in enumerate(value)]
    return [(name, value)]


@contextlib.contextmanager
def audit(actor: nn.Module | None = None, critic: nn.Module | None = None,
          optimizers: Any = (), explode_threshold: float = 1e3, stop_after: int | None = None,
          **modules: Any) -> Iterator[Audit]:
    """Audit the training steps run inside the ``with`` block (see module docstring).

    Args:
        actor, critic: the policy and value modules (plain ``nn.Module`` or TorchRL/TensorDict modules).
        optimizers: an optimizer, or a list, tuple or dict of them.
        explode_threshold: a global gradient norm above this before a step is reported.
        stop_after: stop the block (quietly) at the optimizer step after this many.
        **modules: more modules under any name, each one module or a list, tuple or dict of them
            (``critics=[v_net, q_net]``). Roles come from the names (``critic``, ``value``, ``q``, ``v`` ...:
            a value network; else a policy) or, failing that, from the outputs (one number: a value).

    With no module at all, modules are discovered (torch's global module hooks): those the code calls at the
    top level, named by its variables. A ``RuntimeError`` from ``backward()`` is re-raised as
    :class:`DoctorError` (a ``RuntimeError``) naming the earlier backward or optimizer step that caused it; any
    exception leaves :attr:`Audit.error` set and the findings made up to it. The audit keeps every audited
    graph alive until it ends: wrap a few updates, not a run.
    """
    a = Audit(explode_threshold, stop_after, registered())
    for name, module in _collect("module", actor, "actor"):
        a.add_module(name, module, "policy")
    for name, module in _collect("module", critic, "critic"):
        a.add_module(name, module, "value")
    for key, value in modules.items():
        for name, module in _collect("module", value, key):
            a.add_module(name, module)
    for i, (name, opt) in enumerate(_collect("optimizer", optimizers, "optimizer")):
        a.add_optimizer(name if isinstance(optimizers, Mapping) else (user_name(opt) or f"optimizers[{i}]"), opt)
    losses, handles = _LossWatch(a), []
    if a.modules:
        handles += [m.register_forward_hook(_forward_hook(a, n)) for n, m in a.modules.items()]
        if "torchrl.objectives" in sys.modules:  # (global hooks cost every module call: only where a loss may run)
            handles += [nn_module.register_module_forward_pre_hook(losses.pre),
                        nn_module.register_module_forward_hook(losses.post, always_call=True)]
    else:
        discovery = _Discovery(a, losses)
        handles += [nn_module.register_module_forward_pre_hook(discovery.pre),
                    nn_module.register_module_forward_hook(discovery.post, always_call=True)]

    def step_hook(opt, *_):
        _guarded(_pre_step, a, opt)

    if a.optimizers and a.modules:
        handles += [o.register_step_pre_hook(step_hook) for o in a.optimizers.values()]
    else:  # every optimizer that steps in the block
        handles.append(optim_module.register_optimizer_step_pre_hook(step_hook))
    try:
        with _BackwardWatch(a):
            yield a
    except StopAudit as stop:
        a.stopped = str(stop)
    except BaseException as err:
        _record_error(a, err)
        raise
    finally:
        for h in handles:
            h.remove()
        _each(a, "finish")
