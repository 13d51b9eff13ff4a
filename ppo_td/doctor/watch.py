"""The doctor: find the autograd mistakes that break hand-written PPO updates.

Wrap a few training steps in :func:`audit`; it watches every ``backward()``, every
optimizer step and every forward of the given modules, and reports each mistake
with the culprit (module, parameter, tensor) and the fix in RL terms.

Example:
    >>> with audit(actor=actor, critic=critic, optimizers=[opt]) as a:
    ...     my_update(batch)
    >>> print(a.report())
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ppo_td.doctor.explain import DoctorError, explain, parse_inplace_error

__all__ = ["Audit", "Finding", "audit"]

# Nodes that only add, stack or reshape: mixing actor and critic terms through them is fine.
_LINEAR_NODES = ("AddBackward", "SubBackward", "CatBackward", "StackBackward", "SumBackward", "MeanBackward",
                 "NegBackward", "ViewBackward", "UnsqueezeBackward", "SqueezeBackward", "ExpandBackward")
_DISTANCE_NODES = ("MseLossBackward", "SmoothL1LossBackward", "L1LossBackward", "HuberLossBackward", "SubBackward")


@dataclass
class Finding:
    """One diagnosed mistake: item number (1-6 of the doctor's list), what, culprit and fix."""

    item: int
    title: str
    culprit: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.item}] {self.title}\n    culprit: {self.culprit}\n    fix: {self.fix}"


@dataclass
class _Backward:
    index: int
    where: str
    nodes: dict[int, object]  # id -> node (kept alive so ids stay unique)
    retain_graph: bool


@dataclass
class Audit:
    """State of one audit; read :attr:`findings` or :meth:`report` after the ``with`` block."""

    actor: nn.Module | None
    critic: nn.Module | None
    optimizers: list[torch.optim.Optimizer]
    explode_threshold: float
    findings: list[Finding] = field(default_factory=list)
    _backwards: list[_Backward] = field(default_factory=list)
    _outputs: dict[int, tuple[object, str]] = field(default_factory=dict)
    _steps: int = 0
    _stepped_at: dict[int, int] = field(default_factory=dict)  # param id -> last optimizer step that changed it
    _ratio_checked: bool = False
    _nonzero_steps: dict[int, list] = field(default_factory=dict)  # param id -> [param, steps with grad != 0]

    @property
    def ok(self) -> bool:
        """True when the audit found nothing."""
        return not self.findings

    def report(self) -> str:
        """Human-readable report: one block per finding, or a clean bill of health."""
        head = f"ppo_td doctor: {len(self._backwards)} backward call(s), {self._steps} optimizer step(s) audited"
        if self.ok:
            return head + "\nno findings: the update is clean."
        return head + f"\n{len(self.findings)} finding(s):\n" + "\n".join(str(f) for f in self.findings)

    def check_ratio(self, log_ratio: torch.Tensor, tolerance: float = 1e-4) -> None:
        """Check the first minibatch's log(pi_new / pi_old): before any step it must be 0 (item 6)."""
        if self._ratio_checked or self._steps:
            return
        self._ratio_checked = True
        worst = float(log_ratio.detach().abs().max())
        if worst > tolerance:
            self._add(6, "PPO ratio is not 1 on the first minibatch of the update",
                      f"max |log ratio| = {worst:.3g} before any optimizer step",
                      "the stored old log-probs are not the current policy's: record them with the same network "
                      "that is trained (not a stale copy), read them from the right key "
                      "(loss.tensor_keys.sample_log_prob), and recompute nothing between collection and update")

    def check_rollout(self, data: Mapping[str, Any]) -> None:
        """Report rollout entries that carry an autograd graph (item 1): they must be recorded without one."""
        leaves = data.items(True, True) if hasattr(data, "batch_size") else data.items()
        carrying = [str(k) for k, v in leaves if torch.is_tensor(v) and v.requires_grad]
        if carrying:
            self._add(1, "rollout data carries an autograd graph",
                      f"rollout entries {', '.join(carrying[:5])} were recorded with gradients on",
                      "run the policy and critic under torch.no_grad() while collecting (TorchRL collectors do); "
                      "store .detach()ed tensors")

    # -- bookkeeping -----------------------------------------------------------------
    def _add(self, item: int, title: str, culprit: str, fix: str) -> None:
        finding = Finding(item, title, culprit, fix)
        if all(str(f) != str(finding) for f in self.findings):
            self.findings.append(finding)

    def _role_params(self) -> tuple[dict[int, str], dict[int, str]]:
        actor = {id(p): f"actor.{n}" for n, p in self.actor.named_parameters()} if self.actor is not None else {}
        critic = {id(p): f"critic.{n}" for n, p in self.critic.named_parameters()} if self.critic is not None else {}
        both = actor.keys() & critic.keys()
        return ({k: v for k, v in actor.items() if k not in both}, {k: v for k, v in critic.items() if k not in both})

    def _named(self, param: torch.Tensor) -> str:
        for prefix, module in (("actor", self.actor), ("critic", self.critic)):
            for name, p in module.named_parameters() if module is not None else ():
                if p is param:
                    return f"{prefix}.{name}"
        return f"parameter of shape {list(param.shape)}"

    def _params(self) -> list[nn.Parameter]:
        found = {}
        for module in (self.actor, self.critic):
            if module is not None:
                found.update({id(p): p for p in module.parameters() if p.requires_grad})
        for opt in self.optimizers:
            found.update({id(p): p for g in opt.param_groups for p in g["params"] if p.requires_grad})
        return list(found.values())


def _graph(root: object) -> tuple[dict[int, object], dict[int, list[object]]]:
    """All nodes under ``root`` and each node's children (iterative: graphs can be deep)."""
    nodes: dict[int, object] = {}
    children: dict[int, list[object]] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in nodes:
            continue
        nodes[id(node)] = node
        kids = [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        children[id(node)] = kids
        stack.extend(kids)
    return nodes, children


def _reach(nodes: dict[int, object], children: dict[int, list[object]], actor: dict, critic: dict) -> dict[int, set]:
    """For each node, the roles ('actor', 'critic') of the exclusive parameters below it."""
    memo: dict[int, set] = {}
    for start in nodes:
        stack = [(start, False)]
        while stack:
            nid, expanded = stack.pop()
            if nid in memo:
                continue
            if not expanded:
                stack.append((nid, True))
                stack.extend((id(k), False) for k in children[nid] if id(k) not in memo)
                continue
            var = getattr(nodes[nid], "variable", None)
            roles = {"actor"} if id(var) in actor else {"critic"} if id(var) in critic else set()
            for k in children[nid]:
                roles |= memo.get(id(k), set())
            memo[nid] = roles
    return memo


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-3]):
        if f"{os.sep}torch{os.sep}" not in frame.filename and frame.filename != __file__:
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "<unknown>"


def _on_backward(a: Audit, tensors, retain_graph: bool | None) -> _Backward | None:
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    roots = [t for t in tensors if t.grad_fn is not None]
    for t in tensors:
        if not torch.isfinite(t.detach()).all():
            a._add(5, "non-finite loss", f"loss passed to backward #{len(a._backwards) + 1} at {_caller()}",
                   "look for log(0), division by a zero std (add eps), exp of a large log-ratio; "
                   "check observations and rewards for NaN/inf")
    if not roots:
        return None
    nodes: dict[int, object] = {}
    children: dict[int, list[object]] = {}
    for r in roots:
        n, c = _graph(r.grad_fn)
        nodes.update(n)
        children.update(c)
    actor, critic = a._role_params()
    roles = _reach(nodes, children, actor, critic)
    _check_mixing(a, nodes, children, roles, critic)
    record = _Backward(len(a._backwards) + 1, _caller(), nodes, bool(retain_graph))
    for earlier in a._backwards:
        shared = _shared_nodes(record, earlier)
        if shared and earlier.retain_graph:
            a._add(1, "rollout data carries an autograd graph that a later loss reuses",
                   f"backward #{record.index} at {record.where} runs through {len(shared)} graph node(s) already "
                   f"used by backward #{earlier.index}{_describe_outputs(a, shared)}",
                   "collect rollouts under torch.no_grad() (or .detach() actions, log-probs, values and advantages "
                   "when storing them); recompute log-probs and values from stored observations in each "
                   "minibatch loss. retain_graph=True only hides this: gradients flow into stale outputs")
    a._backwards.append(record)
    return record


def _shared_nodes(later: _Backward, earlier: _Backward) -> set[int]:
    """Graph nodes two backward calls both run through, parameters' leaves excepted."""
    common = later.nodes.keys() & earlier.nodes.keys()
    return {i for i in common if type(later.nodes[i]).__name__ != "AccumulateGrad"}


def _describe_outputs(a: Audit, node_ids: Iterable[int]) -> str:
    names = sorted({a._outputs[i][1] for i in node_ids if i in a._outputs})
    return f" (outputs of {', '.join(names)})" if names else ""


def _check_mixing(a: Audit, nodes, children, roles, critic) -> None:
    for nid, node in nodes.items():
        kids = children[nid]
        if len(kids) < 2:
            continue
        kid_roles = [roles.get(id(k), set()) for k in kids]
        name = type(node).__name__
        if (name.startswith(_DISTANCE_NODES) and sum("critic" in r for r in kid_roles) >= 2
                and not _derived(kids[0], kids[1])):
            a._add(2, "the value target carries gradient into the critic",
                   f"{name}: both the prediction and the target depend on critic parameters "
                   f"({_some(critic)})",
                   "compute returns / TD targets under torch.no_grad() or .detach() them: the value loss "
                   "is a regression onto a fixed target")
        if name.startswith(_LINEAR_NODES):
            continue
        if any(r == {"actor"} for r in kid_roles) and any(r == {"critic"} for r in kid_roles):
            a._add(2, "critic outputs flow into the actor loss: the actor's loss puts gradient on critic parameters",
                   f"{name} multiplies a policy term with a term that depends on {_some(critic)}",
                   "detach the advantage (advantages = (returns - values).detach(), or compute GAE under "
                   "torch.no_grad()) before it weights the log-prob ratio")


def _derived(a: object, b: object) -> bool:
    """True if one node lies below the other (``x - x.mean()``), i.e. not two independent critic outputs."""
    below_a, _ = _graph(a)
    below_b, _ = _graph(b)
    return id(b) in below_a or id(a) in below_b


def _some(params: dict[int, str]) -> str:
    names = list(params.values())
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def _pre_step(a: Audit, optimizer: torch.optim.Optimizer) -> None:
    a._steps += 1
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    missing = [a._named(p) for p in params if p.grad is None]
    if missing:
        _no_gradient(a, f"no gradient before optimizer step #{a._steps}: {', '.join(missing[:4])}")
    for p in params:  # all-zero is judged over the whole audit: one clipped minibatch may be all-zero
        a._nonzero_steps.setdefault(id(p), [p, 0])
        a._nonzero_steps[id(p)][1] += int(p.grad is not None and bool(torch.any(p.grad)))
    grads = [p.grad for p in params if p.grad is not None]
    if grads:
        norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))
        bad = [a._named(p) for p in params if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad:
            a._add(5, "non-finite gradients", f"{', '.join(bad[:4])} before optimizer step #{a._steps}",
                   "find the NaN/inf source in the loss (log of 0, std of a 1-element batch); "
                   "clip_grad_norm_ does not repair NaN")
        elif norm > a.explode_threshold:
            a._add(5, "exploding gradient norm", f"global grad norm {norm:.3g} before optimizer step #{a._steps}",
                   "clip with torch.nn.utils.clip_grad_norm_(params, 0.5), normalize advantages and "
                   "observations, lower the learning rate")
    a._stepped_at.update({id(p): a._steps for p in params})


def _no_gradient(a: Audit, culprit: str) -> None:
    a._add(4, "parameters that should learn got no gradient", culprit,
           "the loss graph is cut before these parameters: .item(), .numpy(), argmax, a stray .detach(), "
           "or actions sampled without keeping log_prob. Recompute dist.log_prob(action) from the current "
           "network inside the loss; call zero_grad() before backward(), not between backward() and step()")


def _finish(a: Audit) -> None:
    zero = [a._named(p) for p, nonzero in a._nonzero_steps.values() if nonzero == 0 and p.grad is not None]
    if zero:
        _no_gradient(a, f"all-zero gradient at every one of {a._steps} optimizer step(s): {', '.join(zero[:4])}")


def _forward_hook(a: Audit, name: str):
    counter = {"n": 0}

    def hook(module, args, output):
        counter["n"] += 1
        tensors = output.values(True, True) if hasattr(output, "values") and not torch.is_tensor(output) else (
            output if isinstance(output, (tuple, list)) else [output])
        for t in tensors:
            if torch.is_tensor(t) and t.grad_fn is not None:
                a._outputs[id(t.grad_fn)] = (t.grad_fn, f"{name} forward #{counter['n']} {list(t.shape)}")
    return hook


@contextlib.contextmanager
def audit(actor: nn.Module | None = None, critic: nn.Module | None = None,
          optimizers: Iterable[torch.optim.Optimizer] = (), explode_threshold: float = 1e3) -> Iterator[Audit]:
    """Audit the training steps run inside the ``with`` block (see module docstring).

    Args:
        actor, critic: the policy and value modules (plain ``nn.Module`` or TorchRL/TensorDict modules).
        optimizers: the optimizers stepped in the block.
        explode_threshold: a global gradient norm above this before a step is reported.

    A ``RuntimeError`` from ``backward()`` is re-raised as :class:`DoctorError` (a
    ``RuntimeError``) naming the earlier backward or optimizer step that caused it.
    The audit keeps every audited graph alive until it ends: wrap a few updates, not a run.
    """
    a = Audit(actor, critic, list(optimizers), explode_threshold)
    handles = [opt.register_step_pre_hook(lambda opt, *_: _pre_step(a, opt)) for opt in a.optimizers]
    for name, module in (("actor", actor), ("critic", critic)):
        if module is not None:
            handles.append(module.register_forward_hook(_forward_hook(a, name)))
    try:
        with _BackwardWatch(a):
            yield a
    finally:
        for h in handles:
            h.remove()
        _finish(a)


class _BackwardWatch(TorchFunctionMode):
    """Sees every ``Tensor.backward`` and ``torch.autograd.backward`` call in the block (torch's public
    function-override mode): audits the graph before it runs, explains the error if it raises."""

    def __init__(self, a: Audit) -> None:
        super().__init__()
        self.audit = a

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.Tensor.backward and func is not torch.autograd.backward:
            return func(*args, **kwargs)
        # both take (tensors, gradient, retain_graph, create_graph, ...); retain_graph defaults to create_graph
        retain_graph = kwargs.get("retain_graph", args[2] if len(args) > 2 else None)
        if retain_graph is None:
            retain_graph = kwargs.get("create_graph", args[3] if len(args) > 3 else False)
        record = _on_backward(self.audit, args[0] if args else kwargs.get("tensors"), retain_graph)
        try:
            return func(*args, **kwargs)
        except RuntimeError as err:
            raise _diagnose(self.audit, err, record) from err


def _diagnose(a: Audit, err: RuntimeError, record: _Backward | None) -> DoctorError:
    text = str(err)
    explanation = explain(err)
    where = f"backward #{record.index} at {record.where}" if record else "backward"
    culprit = f"{where}: {explanation.cause}"
    if "backward through the graph a second time" in text and record is not None:
        earlier = [b for b in a._backwards[:-1] if _shared_nodes(record, b)]
        if earlier:
            culprit = (f"{where} reuses graph freed by backward #{earlier[-1].index} at {earlier[-1].where}"
                       f"{_describe_outputs(a, _shared_nodes(record, earlier[-1]))}")
    elif "modified by an inplace operation" in text:
        shape, version = parse_inplace_error(text)
        # the saved tensor may be the parameter or its transpose (Linear saves weight.t())
        params = [p for p in a._params() if shape is not None and shape in (list(p.shape), list(p.shape)[::-1])]
        stepped = [(f"{a._named(p)} {list(p.shape)}", a._stepped_at[id(p)]) for p in params if id(p) in a._stepped_at]
        if stepped:
            culprit = (f"{where}: {stepped[0][0]} was changed in place by optimizer step #{stepped[0][1]} "
                       "after the forward this loss uses")
        else:
            culprit = f"{where}: a tensor of shape {shape} (now at version {version}) was changed in place"
    if explanation.item is None:
        return DoctorError(explanation.message(text))
    a._add(explanation.item, explanation.title, culprit, explanation.fix)
    return DoctorError(f"{text}\n\nppo_td doctor:\n{a.findings[-1]}")
