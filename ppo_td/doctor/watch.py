"""The doctor: find the autograd mistakes that break hand-written PPO updates.

Wrap a few training steps in :func:`audit`. It watches every forward of the audited modules,
every ``backward()`` (and looks at its graph *before* it runs) and every optimizer step, and
reports each mistake with the culprit (module, parameter, line) and the fix in RL terms.

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
import importlib.util
import inspect
import os
import re
import sysconfig
import traceback
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module
from torch.overrides import TorchFunctionMode

from ppo_td.doctor.explain import DoctorError, explain, parse_inplace_error
from ppo_td.doctor.findings import ErrorReport, Finding, Findings, render
from ppo_td.doctor.graph import (
    DISTANCE_LOSS_NODES,
    LINEAR_NODES,
    REGRESSION_NODES,
    below,
    derived,
    graph,
    leaves,
    reach,
    reached_outside,
)

__all__ = ["Audit", "Finding", "StopAudit", "audit"]

_VALUE_WORDS = {"critic", "critics", "value", "values", "vf", "baseline", "q", "qf", "v"}
_POLICY_WORDS = {"actor", "actors", "policy", "policies", "pi", "mu"}
_FROZEN_WORDS = {"old", "target", "stale", "frozen", "prev", "previous"}
# torch functions whose result carries no gradient back to their input: where a policy's graph is cut
_CUTS = {torch.Tensor.item: ".item()", torch.Tensor.tolist: ".tolist()", torch.Tensor.numpy: ".numpy()",
         torch.Tensor.detach: ".detach()", torch.argmax: "argmax", torch.Tensor.argmax: "argmax",
         torch.argmin: "argmin", torch.Tensor.argmin: "argmin", torch.multinomial: "sampling (multinomial)",
         torch.Tensor.long: ".long()", torch.Tensor.int: ".int()", torch.round: "round",
         torch.Tensor.round: "round"}
def _package_dirs(*names: str) -> tuple[str, ...]:
    """The folders of the installed packages ``names`` (found without importing them)."""
    dirs = []
    for name in names:
        spec = importlib.util.find_spec(name)
        dirs += [os.path.join(d, "") for d in (spec.submodule_search_locations or [])] if spec else []
    return tuple(dirs)


_LIBRARIES = _package_dirs("torch", "tensordict", "torchrl")
_DOCTOR = os.path.dirname(os.path.abspath(__file__))
# ppo_td's own autograd kernels: they read a tensor's memory (.detach(), .numpy()) and give the gradient back
# themselves, so what they do there is no cut (found by path: the doctor does not import ppo_td.models)
_OWN_KERNELS = (os.path.join(os.path.dirname(_DOCTOR), "models", "activations.py"),)
_TORCH = _package_dirs("torch")
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


class StopAudit(BaseException):  # noqa: N818 - a stop, not an error: it must pass `except Exception`
    """Raised at the optimizer step after ``stop_after`` steps: the audited code has run long enough."""


@dataclass
class _Forward:
    module: str
    index: int
    where: str
    step: int  # optimizer steps done when this forward ran
    node: object  # the output's grad_fn (kept alive so its id stays unique)


@dataclass
class _Backward:
    index: int
    where: str
    nodes: dict[int, object]
    retain_graph: bool
    modules: set[str]  # the audited modules whose parameters this loss reaches
    step: int  # optimizer steps done before it


@dataclass
class _Cut:
    where: str
    how: str
    forward: _Forward


def _words(name: str) -> set[str]:
    """The words of a name, with common compounds split (``vnet`` -> v, ``qf1`` -> q, ``ValueNet`` -> value)."""
    words = {w for w in re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()) if w}
    return words | {m.group(1) for w in words if (m := re.fullmatch(r"(v|q|pi|mu|value|critic|actor|policy)"
                                                                    r"(?:net|network|fn|func|head|f)", w))}


class Audit:
    """State of one audit; read :attr:`findings`, :attr:`error` or :meth:`report` after the ``with`` block."""

    def __init__(self, explode_threshold: float = 1e3, stop_after: int | None = None) -> None:
        self.explode_threshold = explode_threshold
        self.stop_after = stop_after
        self.modules: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.error: ErrorReport | None = None
        self.stopped = ""  # why the audit stopped the code early (stop_after, a time limit), if it did
        self._roles: dict[str, str] = {}  # given roles; others are inferred (see role())
        self._output_roles: dict[str, str] = {}
        self._groups = Findings()
        self._backwards: list[_Backward] = []
        self._outputs: dict[int, _Forward] = {}
        self._forwards: dict[str, int] = {}
        self._steps = 0
        self._stepped_at: dict[int, tuple[int, str, str]] = {}  # param id -> (step, line, optimizer)
        self._last_backward: dict[int, int] = {}  # optimizer id -> number of backward calls at its last step
        self._nonzero_steps: dict[int, list] = {}  # param id -> [param, steps with a gradient, steps with grad != 0]
        self._cuts: dict[str, list[_Cut]] = {}  # module -> where its outputs were cut from the graph (newest last)
        self._owners: dict[int, list[str]] = {}
        self._names: dict[int, str] = {}  # param id -> "module.parameter"
        self._by_id: dict[int, str] = {}  # module id -> its name
        self._error_finding: Finding | None = None
        self._error_text = ""
        self._ratio_checked = False

    # -- what the user reads ----------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """The findings, one per (kind, source line), most severe first."""
        return self._groups.ordered()

    @property
    def ok(self) -> bool:
        """True when the audit found nothing and the audited code did not fail."""
        return not len(self._groups) and self.error is None

    @property
    def audited(self) -> bool:
        """True when the audited code ran at least one backward() or optimizer step."""
        return bool(self._backwards or self._steps)

    def report(self) -> str:
        """Human-readable report: every finding, most severe first, then the error that stopped the code."""
        head = f"ppo_td doctor: {len(self._backwards)} backward call(s), {self._steps} optimizer step(s) audited"
        if not self.audited and self.ok:
            return head + ("\nnothing audited: the code ran no backward() and no optimizer step (does it train "
                           "with these arguments?)")
        if self.modules:
            head += "\n    modules: " + ", ".join(f"{n} ({self.role(n)}{'?' if self.role_is_guessed(n) else ''})"
                                                 for n in self.modules)
        if self.optimizers:
            head += "\n    optimizers: " + ", ".join(self.optimizers)
        return render(head, self.findings, self.error)

    def to_dict(self) -> dict[str, Any]:
        """The report as data (``ppo-td doctor --json``)."""
        return {"backward_calls": len(self._backwards), "optimizer_steps": self._steps,
                "modules": {n: self.role(n) + ("?" if self.role_is_guessed(n) else "") for n in self.modules},
                "optimizers": list(self.optimizers),
                "findings": [f.to_dict() for f in self.findings],
                "error": self.error.to_dict() if self.error else None, "ok": self.ok, "audited": self.audited}

    def role(self, name: str) -> str:
        """'policy' or 'value': given (``actor=``/``critic=``), else from the name, else guessed from the outputs
        (one number: a value network; see :meth:`role_is_guessed`)."""
        if name in self._roles:
            return self._roles[name]
        words = _words(name)
        if words & _VALUE_WORDS:
            return "value"
        if words & _POLICY_WORDS:
            return "policy"
        return self._output_roles.get(name, "policy")

    def role_is_guessed(self, name: str) -> bool:
        """True when the role comes from the output shape only: a policy with one output (a Bernoulli logit, a
        1-D Gaussian mean) looks like a value network, so such a guess never decides a finding alone."""
        return name not in self._roles and not _words(name) & (_VALUE_WORDS | _POLICY_WORDS)

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
                      "(loss.tensor_keys.sample_log_prob), and recompute nothing between collection and update",
                      _caller())

    def check_rollout(self, data: Mapping[str, Any]) -> None:
        """Report rollout entries that carry an autograd graph (item 1): they must be recorded without one."""
        items = data.items(True, True) if hasattr(data, "batch_size") else data.items()
        carrying = [str(k) for k, v in items if torch.is_tensor(v) and v.requires_grad]
        if carrying:
            self._add(1, "rollout data carries an autograd graph",
                      f"rollout entries {', '.join(carrying[:5])} were recorded with gradients on",
                      "run the policy and critic under torch.no_grad() while collecting (TorchRL collectors do); "
                      "store .detach()ed tensors", _caller())

    # -- registration -------------------------------------------------------------------------
    def add_module(self, name: str, module: nn.Module, role: str | None = None) -> str:
        """Audit ``module`` under ``name`` (made unique); returns the name used."""
        if not isinstance(module, nn.Module):
            raise TypeError(f"doctor.audit: {name} is a {type(module).__name__}, not a torch.nn.Module (pass "
                            "modules, or lists, tuples or dicts of them)")
        known = self.name_of(module)
        if known is not None:
            return known
        unique = _unique(name, self.modules)
        self.modules[unique] = module
        self._by_id[id(module)] = unique
        if role is not None:
            self._roles[unique] = role
        for pname, p in module.named_parameters():
            self._owners.setdefault(id(p), []).append(unique)
            self._names.setdefault(id(p), f"{unique}.{pname}")
        return unique

    def name_of(self, module: nn.Module) -> str | None:
        """The name ``module`` is audited under, or None."""
        return self._by_id.get(id(module))

    def add_optimizer(self, name: str, opt: torch.optim.Optimizer) -> str:
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"doctor.audit: {name} is a {type(opt).__name__}, not a torch.optim.Optimizer")
        known = next((n for n, o in self.optimizers.items() if o is opt), None)
        if known is not None:
            return known
        unique = _unique(name, self.optimizers)
        self.optimizers[unique] = opt
        return unique

    # -- bookkeeping ----------------------------------------------------------------------------
    def _add(self, item: int, title: str, culprit: str, fix: str, where: str = "") -> Finding:
        return self._groups.add(Finding(item, title, culprit, fix, where), self._steps + 1)

    def _named(self, param: torch.Tensor) -> str:
        return self._names.get(id(param), f"a parameter of shape {list(param.shape)}")

    def _exclusive_owner(self) -> dict[int, str]:
        return {pid: names[0] for pid, names in self._owners.items() if len(names) == 1}

    def _optimized(self, name: str) -> bool | None:
        """Whether an optimizer seen so far holds the module's parameters (None: no optimizer seen yet)."""
        if not self.optimizers:
            return None
        ids = {id(p) for p in self.modules[name].parameters()}
        return any(id(p) in ids for o in self.optimizers.values() for g in o.param_groups for p in g["params"])

    def _learns(self, name: str) -> bool:
        """A module whose parameters should get gradient: one an optimizer seen so far holds, or one not named
        as a frozen copy (``old_policy``, ``target_net``): its optimizer may not have stepped yet."""
        return bool(self._optimized(name)) or not _words(name) & _FROZEN_WORDS

    def _params(self) -> list[torch.Tensor]:
        found = {}
        for module in self.modules.values():
            found.update({id(p): p for p in module.parameters() if p.requires_grad})
        for opt in self.optimizers.values():
            found.update({id(p): p for g in opt.param_groups for p in g["params"] if p.requires_grad})
        return list(found.values())


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    """``name``, or ``name#2``, ``name#3``, ... if it is taken."""
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}#{n}", n + 1
    return unique


def _internal(filename: str) -> bool:
    """A frame of torch, TensorDict, TorchRL, Python's standard library or the doctor: not the user's line."""
    if filename.startswith("<"):
        return filename.startswith("<frozen")
    return (filename.startswith(_LIBRARIES) or (filename.startswith(_STDLIB) and "site-packages" not in filename)
            or os.path.dirname(filename) == _DOCTOR)


def _format(filename: str, lineno: int, line: str | None) -> str:
    return f"{filename}:{lineno}" + (f" ({line.strip()})" if line else "")


def _caller() -> str:
    """The innermost line of the user's code on the stack."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not _internal(frame.filename):
            return _format(frame.filename, frame.lineno, frame.line)
    return "<unknown>"


def _user_name(obj: object) -> str | None:
    """The name the user's code gives ``obj``: a variable, or an attribute/child of a variable (``self.actor``)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if not _internal(frame.f_code.co_filename):
                for scope in (frame.f_locals, frame.f_globals):
                    for key, value in scope.items():
                        if value is obj and not key.startswith("__"):
                            return key
                for value in list(frame.f_locals.values()):
                    children = value.named_children() if isinstance(value, nn.Module) else (
                        vars(value).items() if hasattr(value, "__dict__") and not inspect.ismodule(value)
                        and not inspect.isclass(value) else ())
                    for key, child in children:
                        if child is obj:
                            return key
            frame = frame.f_back
    finally:
        del frame
    return None


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


def _record_forward(a: Audit, name: str, output: Any) -> None:
    a._forwards[name] = n = a._forwards.get(name, 0) + 1
    tensors = _tensors(output)
    if name not in a._output_roles and tensors:
        keys = set(output.keys(True, True)) if hasattr(output, "batch_size") else set()
        value_like = "state_value" in keys or "state_action_value" in keys or (
            not keys and tensors[0].dim() > 0 and tensors[0].shape[-1] == 1)
        a._output_roles[name] = "value" if value_like else "policy"
    graphs = [t.grad_fn for t in tensors if t.grad_fn is not None]
    if graphs:  # (not for a rollout under no_grad: finding the line costs a stack walk)
        where = _caller()
        for node in graphs:
            a._outputs[id(node)] = _Forward(name, n, where, a._steps, node)


def _forward_hook(a: Audit, name: str):
    def hook(module, args, output):
        _record_forward(a, name, output)
    return hook


class _Discovery:
    """Torch's global module hooks: register the modules the user's code calls at the top level (not inside
    another module's forward), named by the user's variables, and record their forwards. A top-level module
    made of named parts (``self.actor``, ``self.critic``, a trunk and ``pi``/``v`` heads) is audited as its
    parts, so a policy and a value network inside one module stay apart."""

    def __init__(self, a: Audit) -> None:
        self.audit, self.depth, self.counts = a, 0, {}
        self.seen: dict[int, nn.Module] = {}  # top-level modules already looked at (kept: their ids stay theirs)

    def pre(self, module: nn.Module, args: Any) -> None:
        if self.depth == 0 and id(module) not in self.seen:
            self.seen[id(module)] = module
            if any(p.requires_grad for p in module.parameters()) and self.audit.name_of(module) is None:
                cls = type(module).__name__
                self.counts[cls] = self.counts.get(cls, 0) + 1
                name = _user_name(module) or f"{cls}#{self.counts[cls]}"
                for part_name, part in _parts(name, module):
                    self.audit.add_module(part_name, part)
        self.depth += 1

    def post(self, module: nn.Module, args: Any, output: Any) -> None:
        self.depth -= 1
        name = self.audit.name_of(module)
        if name is not None:
            _guarded(_record_forward, self.audit, name, output)


def _parts(name: str, module: nn.Module) -> list[tuple[str, nn.Module]]:
    """``module`` as the parts to audit: its children when two or more hold parameters and one is named as a
    policy or value part (``actor``/``critic``, ``pi``/``v``, ...); else the module itself."""
    if isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        return [(name, module)]
    parts = [(f"{name}.{child_name}", child) for child_name, child in module.named_children()
             if any(p.requires_grad for p in child.parameters())]
    if len(parts) >= 2 and any(_words(n.rsplit(".", 1)[1]) & (_VALUE_WORDS | _POLICY_WORDS) for n, _ in parts):
        return parts
    return [(name, module)]


# -- backward: look at the graph before it runs -------------------------------------------------------
def _on_backward(a: Audit, tensors: Any, retain_graph: bool | None) -> _Backward | None:
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    where = _caller()
    index = len(a._backwards) + 1
    for t in tensors:
        if torch.is_tensor(t) and not torch.isfinite(t.detach()).all():
            a._add(5, "non-finite loss", f"the loss passed to backward #{index} is not finite",
                   "look for log(0), division by a zero std (add eps), exp of a large log-ratio; "
                   "check observations and rewards for NaN/inf", where)
    roots = [t.grad_fn for t in tensors if torch.is_tensor(t) and t.grad_fn is not None]
    if not roots:
        return None
    nodes, children = graph(roots)
    reached = leaves(nodes)
    modules = {name for pid in reached for name in a._owners.get(pid, ())}
    record = _Backward(index, where, nodes, bool(retain_graph), modules, a._steps)
    _check_value_gradient(a, record, roots, children)
    _check_stale_forwards(a, record)
    forwards = {}  # module -> its forwards in this graph
    for nid in nodes:
        if nid in a._outputs:
            forwards.setdefault(a._outputs[nid].module, set()).add(a._outputs[nid].index)
    for earlier in (b for b in a._backwards if b.retain_graph):  # only a retained graph can be run through again
        shared = _shared_nodes(record, earlier)
        reused = {a._outputs[i].module for i in shared if i in a._outputs}
        # two losses on one forward before a step are the same as their sum (retain_graph is right there); a
        # step in between, or the same module's fresh outputs next to the reused ones (a rollout's log-probs
        # with their graph in the ratio), is the mistake
        stale = earlier.step < a._steps or any(len(forwards.get(m, ())) > 1 for m in reused)
        if shared and earlier.retain_graph and stale:
            a._add(1, "a graph reused by a later loss: rollout data or values computed once carry an autograd graph",
                   f"backward #{record.index} runs through {len(shared)} graph node(s) already used by backward "
                   f"#{earlier.index} at {earlier.where}{_describe_outputs(a, shared)}",
                   "collect rollouts under torch.no_grad() (or .detach() actions, log-probs, values and advantages "
                   "when storing them); recompute log-probs and values from stored observations in each "
                   "minibatch loss. retain_graph=True only hides this: gradients flow into stale outputs", where)
    a._backwards.append(record)
    return record


def _check_value_gradient(a: Audit, record: _Backward, roots: list, children: dict) -> None:
    """Item 2: a value target that is not detached; a loss that reaches a value network other than through a
    regression (the advantage is not detached). A policy loss that reaches value networks but no policy: item 4."""
    owner = a._exclusive_owner()
    values = {n for n in a.modules if a.role(n) == "value"}
    roles = reach(record.nodes, children, owner)
    for name, sides in _distances(record, children):
        common = set.intersection(*(roles.get(id(k), set()) & values for k in sides))
        if common and not derived(sides[0], sides[1]):
            a._add(2, "the value target carries gradient into the value network",
                   f"{name}: both the prediction and the target depend on {', '.join(sorted(common))} "
                   f"({_some(a, common)}){_describe_outputs(a, record.nodes.keys(), only=common)}",
                   "compute returns / TD targets under torch.no_grad() or .detach() them: the value loss "
                   "is a regression onto a fixed target", record.where)
    # paths to value-network parameters that pass through no squared/absolute/Huber error; a role guessed from the
    # output shape counts only where a policy term multiplies the value term
    outside = {owner[pid] for pid in reached_outside(roots, REGRESSION_NODES) if pid in owner} & values
    named = {n for n in outside if not a.role_is_guessed(n)}
    node = _mixing_node(record, children, roles, outside) if outside else None
    leaked = sorted(outside if node else named)
    if not leaked:
        return
    through = f" ({node} multiplies a policy term with a value term)" if node else ""
    forwards = _describe_outputs(a, record.nodes.keys(), only=set(leaked))
    a._add(2, "the policy loss puts gradient on value-network parameters: the advantage is not detached",
           f"backward #{record.index} reaches {', '.join(leaked)} ({_some(a, set(leaked))}) other than through "
           f"a regression onto a target{through}{forwards}",
           "detach the advantage before it weights the policy term: advantages = (returns - values).detach(), "
           "or compute advantages/GAE under torch.no_grad()", record.where)
    policies = [n for n in a.modules if a.role(n) == "policy" and not a.role_is_guessed(n) and a._learns(n)
                and any(p.requires_grad for p in a.modules[n].parameters())]
    if policies and not record.modules & set(policies):
        for name in policies:
            a._add(4, f"{name} gets no gradient from the policy loss",
                   f"backward #{record.index} reaches {', '.join(sorted(record.modules))} but no parameter of "
                   f"{name}{_cut_of(a, name)}", _NO_GRADIENT_FIX, record.where)


def _distances(record: _Backward, children: dict) -> Iterator[tuple[str, list]]:
    """(name, [side, side]) of each distance in the graph: a loss node (MSE, Huber, ...) or a subtraction that is
    squared or taken absolute (``(v - target) ** 2``); a plain sum or difference of losses is not one."""
    for nid, node in record.nodes.items():
        name, kids = type(node).__name__, children[nid]
        if name.startswith(DISTANCE_LOSS_NODES) and len(kids) >= 2:
            yield name, kids[:2]
        elif name.startswith(("PowBackward", "AbsBackward")):
            for kid in kids:
                grandkids = children.get(id(kid), [])
                if type(kid).__name__.startswith("SubBackward") and len(grandkids) >= 2:
                    yield f"{name} of {type(kid).__name__}", grandkids[:2]


def _mixing_node(record: _Backward, children: dict, roles: dict, values: set[str]) -> str | None:
    for nid, node in record.nodes.items():
        name = type(node).__name__
        if name.startswith(LINEAR_NODES) or len(children[nid]) < 2:
            continue
        kid_roles = [roles.get(id(k), set()) for k in children[nid]]
        if any(r and r <= values for r in kid_roles) and any(r and not r & values for r in kid_roles):
            return name
    return None


def _check_stale_forwards(a: Audit, record: _Backward) -> None:
    """Item 7: the loss runs through a forward whose module an optimizer stepped after that forward."""
    stale = []
    for nid in record.nodes:
        fwd = a._outputs.get(nid)
        if fwd is None:
            continue
        for p in a.modules[fwd.module].parameters():
            step = a._stepped_at.get(id(p))
            if step is not None and step[0] > fwd.step:
                stale.append(f"{fwd.module}'s parameters were stepped by {step[2]} at {step[1]} after its forward "
                             f"#{fwd.index} at {fwd.where}")
                break
    if stale:
        a._add(7, "an optimizer stepped parameters between the forward a loss uses and that loss's backward",
               f"backward #{record.index}: " + "; ".join(dict.fromkeys(stale)),
               "run forward -> loss -> zero_grad -> backward -> step for one loss at a time, and recompute every "
               "network output after a step (or sum the losses and step once). The backward otherwise fails with "
               "'modified by an inplace operation', or, with retain_graph=True, computes gradients of the old "
               "weights", record.where)


def _shared_nodes(later: _Backward, earlier: _Backward) -> set[int]:
    """Graph nodes two backward calls both run through, parameters' leaves excepted."""
    common = later.nodes.keys() & earlier.nodes.keys()
    return {i for i in common if type(later.nodes[i]).__name__ != "AccumulateGrad"}


def _describe_outputs(a: Audit, node_ids: Iterable[int], only: set[str] | None = None) -> str:
    found = [a._outputs[i] for i in node_ids if i in a._outputs]
    names = sorted({f"{f.module} forward #{f.index} at {f.where}" for f in found
                    if only is None or f.module in only})
    return f" (outputs of {'; '.join(names)})" if names else ""


def _some(a: Audit, modules: set[str]) -> str:
    names = [a._names[pid] for pid, owners in a._owners.items() if owners[0] in modules and pid in a._names]
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def _cut_of(a: Audit, module: str) -> str:
    """Where ``module``'s outputs were cut from the graph: the likeliest culprits (not .detach()) first."""
    cuts = sorted(reversed(a._cuts.get(module, [])), key=lambda c: c.how == ".detach()")[:3]
    if not cuts:
        return ""
    how = "; ".join(f"{c.how} at {c.where}" for c in cuts)
    return (f"; {module}'s output (forward #{cuts[0].forward.index} at {cuts[0].forward.where}) was cut from the "
            f"graph by {how}")


# -- optimizer steps ---------------------------------------------------------------------------------
_NO_GRADIENT_FIX = ("the loss graph is cut before these parameters: .item(), .numpy(), argmax, a ratio built from "
                    "sampled actions or indices, a stray .detach(), torch.tensor(...) of network outputs. Recompute "
                    "dist.log_prob(stored_action) from the current network inside the loss, ratio = "
                    "(new_log_prob - old_log_prob).exp(); call zero_grad() before backward(), not between "
                    "backward() and step()")


def _pre_step(a: Audit, opt: torch.optim.Optimizer) -> None:
    if a.stop_after is not None and a._steps >= a.stop_after:
        a.stopped = f"stopped after {a._steps} optimizer steps (--steps)"
        raise StopAudit(a.stopped)  # (again at every later step: a bare except in the code may swallow one)
    where = _caller()
    params = [p for g in opt.param_groups for p in g["params"] if p.requires_grad]
    name = next((n for n, o in a.optimizers.items() if o is opt), None)
    if name is None:
        earlier = [n for n, o in a.optimizers.items()
                   if type(o) is type(opt) and {id(p) for g in o.param_groups for p in g["params"]} ==
                   {id(p) for p in params}]
        name = a.add_optimizer(_user_name(opt) or f"{type(opt).__name__}#{len(a.optimizers) + 1}", opt)
        if earlier and any(id(p) in a._stepped_at for p in params):
            a._add(8, "an optimizer created anew for parameters another one already trained",
                   f"{name} ({type(opt).__name__}) first steps at {where} the very parameters {earlier[-1]} stepped "
                   f"before: its state (Adam's moment estimates, step counts) starts from zero again",
                   "create each optimizer once, before the training loop, and reuse it in every update", where)
    since = a._backwards[a._last_backward.get(id(opt), 0):]
    a._last_backward[id(opt)] = len(a._backwards)
    reached = set().union(*(b.modules for b in since))
    ids = {id(p) for p in params}
    starving = [m for m in a.modules if m not in reached
                and any(id(p) in ids for p in a.modules[m].parameters() if p.requires_grad)]
    covered: set[int] = set()
    for module in starving:
        mine = [p for p in a.modules[module].parameters() if p.requires_grad]
        covered |= {id(p) for p in mine}
        last = since[-1] if since else None
        what = (f"the last one, backward #{last.index}, reaches "
                f"{', '.join(sorted(last.modules)) or 'no audited parameter'}" if last else "no backward ran")
        stale = any(p.grad is not None and bool(torch.any(p.grad)) for p in mine)
        title = (f"{module} is stepped again with the gradient of an earlier loss" if stale else
                 f"{module} gets no gradient")
        fix = ("call zero_grad() before each backward, and step once after the backward calls of one update "
               "(or sum the losses)") if stale else _NO_GRADIENT_FIX
        a._add(4, title, f"{name} steps {module} at {where}, but no loss since its previous step reaches "
                         f"{module}'s parameters ({what}){'' if stale else _cut_of(a, module)}",
               fix, last.where if last else where)
    a._steps += 1
    missing = [a._named(p) for p in params if p.grad is None and id(p) not in covered]
    if missing:
        a._groups.add(Finding(4, "parameters that should learn got no gradient",
                              f"no gradient before {name}'s step: {', '.join(missing[:4])}", _NO_GRADIENT_FIX, where),
                      a._steps)
    for p in params:  # all-zero is judged over the whole audit: one clipped minibatch may be all-zero
        counts = a._nonzero_steps.setdefault(id(p), [p, 0, 0])
        counts[1] += int(p.grad is not None)
        counts[2] += int(p.grad is not None and not p.grad.is_sparse and bool(torch.any(p.grad)))
    dense = [p for p in params if p.grad is not None and not p.grad.is_sparse]
    if dense:  # (parameters may sit on several devices: one float per gradient)
        norm = sum(float(torch.linalg.vector_norm(p.grad)) ** 2 for p in dense) ** 0.5
        bad = [a._named(p) for p in dense if not torch.isfinite(p.grad).all()]
        if bad:
            a._groups.add(Finding(5, "non-finite gradients", f"{', '.join(bad[:4])} before {name}'s step",
                                  "find the NaN/inf source in the loss (log of 0, std of a 1-element batch); "
                                  "clip_grad_norm_ does not repair NaN", where), a._steps)
        elif norm > a.explode_threshold:
            a._groups.add(Finding(5, "exploding gradient norm", f"global grad norm {norm:.3g} before {name}'s step",
                                  "clip with torch.nn.utils.clip_grad_norm_(params, 0.5), normalize advantages and "
                                  "observations, lower the learning rate", where), a._steps)
    a._stepped_at.update({id(p): (a._steps, where, name) for p in params})


def _finish(a: Audit) -> None:
    zero = [a._named(p) for p, present, nonzero in a._nonzero_steps.values() if present and not nonzero]
    if zero:
        a._groups.add(Finding(4, "parameters that should learn got no gradient",
                              f"all-zero gradient at every one of {a._steps} optimizer step(s): {', '.join(zero[:4])}",
                              _NO_GRADIENT_FIX), a._steps)


# -- errors ------------------------------------------------------------------------------------------
def _diagnose(a: Audit, err: RuntimeError, record: _Backward | None) -> DoctorError:
    text = str(err)
    explanation = explain(err)
    where = record.where if record else _caller()
    culprit = f"backward #{record.index}: {explanation.cause}" if record else explanation.cause
    if "backward through the graph a second time" in text and record is not None:
        earlier = [b for b in a._backwards[:-1] if _shared_nodes(record, b)]
        if earlier:
            culprit = (f"backward #{record.index} reuses graph freed by backward #{earlier[-1].index} at "
                       f"{earlier[-1].where}{_describe_outputs(a, _shared_nodes(record, earlier[-1]))}")
    elif "modified by an inplace operation" in text:
        shape, version = parse_inplace_error(text)
        # a parameter of this graph, stepped since; the saved tensor may be it or its transpose (Linear: weight.t())
        mine = leaves(record.nodes) if record is not None else set()
        params = [p for p in a._params() if shape is not None and shape in (list(p.shape), list(p.shape)[::-1])
                  and (not mine or id(p) in mine)]
        stepped = [(f"{a._named(p)} {list(p.shape)}", a._stepped_at[id(p)]) for p in params if id(p) in a._stepped_at]
        if stepped:
            (param, (step, line, opt)) = stepped[0]
            culprit = (f"backward #{record.index if record else '?'}: {param} was changed in place by optimizer "
                       f"step #{step} ({opt} at {line}) after the forward this loss uses")
        else:
            culprit = f"a tensor of shape {shape} (now at version {version}) was changed in place"
    if explanation.item is None:
        return DoctorError(explanation.message(text))
    finding = a._add(explanation.item, explanation.title, culprit, explanation.fix, where)
    a._error_finding, a._error_text = finding, text
    return DoctorError(f"{text}\n\nppo_td doctor:\n{finding}")


def _error_line(err: BaseException) -> str:
    if isinstance(err, SyntaxError) and err.filename:
        return _format(err.filename, err.lineno or 0, err.text)
    frames = [f for f in traceback.extract_tb(err.__traceback__) if not _internal(f.filename)]
    return _format(frames[-1].filename, frames[-1].lineno, frames[-1].line) if frames else _caller()


def _record_error(a: Audit, err: BaseException) -> None:
    if isinstance(err, SystemExit) and err.code in (None, 0):
        return  # a script that ends with sys.exit(0) did not fail
    if a._error_finding is not None and isinstance(err, DoctorError):
        a.error = ErrorReport(type(err.__cause__ or err).__name__, a._error_text, _error_line(err), a._error_finding)
        return
    finding = None
    if isinstance(err, RuntimeError):
        explanation = explain(err)
        if explanation.item is not None:
            finding = a._add(explanation.item, explanation.title, explanation.cause, explanation.fix,
                             _error_line(err))
    a.error = ErrorReport(type(err).__name__, str(err), _error_line(err), finding)


class _BackwardWatch(TorchFunctionMode):
    """Sees every ``Tensor.backward`` and ``torch.autograd.backward`` call in the block (torch's public
    function-override mode): audits the graph before it runs, explains the error if it raises. Also notes
    where an audited module's output is cut from the graph (``.item()``, argmax, sampling, ...)."""

    def __init__(self, a: Audit) -> None:
        super().__init__()
        self.audit = a

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _CUTS:
            _guarded(_note_cut, self.audit, func, args)
            return func(*args, **kwargs)
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
        warnings.warn(f"ppo_td doctor: {check.__name__.strip('_')} could not check this call: "
                      f"{type(err).__name__}: {err}", RuntimeWarning, stacklevel=2)
        return None


def _note_cut(a: Audit, func: Any, args: tuple) -> None:
    t = args[0] if args else None
    if not torch.is_tensor(t) or t.grad_fn is None or not a._outputs:
        return
    frame = inspect.currentframe()  # the code that made the call: the first frame outside the doctor and torch
    while frame is not None and frame.f_code.co_filename.startswith((_DOCTOR, *_TORCH)):
        frame = frame.f_back
    if frame is not None and os.path.abspath(frame.f_code.co_filename) in _OWN_KERNELS:
        return
    fwd = below(t.grad_fn, a._outputs)
    if fwd is not None:
        cut, cuts = _Cut(_caller(), _CUTS[func], fwd), a._cuts.setdefault(fwd.module, [])
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
    a = Audit(explode_threshold, stop_after)
    for name, module in _collect("module", actor, "actor"):
        a.add_module(name, module, "policy")
    for name, module in _collect("module", critic, "critic"):
        a.add_module(name, module, "value")
    for key, value in modules.items():
        for name, module in _collect("module", value, key):
            a.add_module(name, module)
    for i, (name, opt) in enumerate(_collect("optimizer", optimizers, "optimizer")):
        a.add_optimizer(name if isinstance(optimizers, Mapping) else (_user_name(opt) or f"optimizers[{i}]"), opt)
    handles = []
    if a.modules:
        handles += [m.register_forward_hook(_forward_hook(a, n)) for n, m in a.modules.items()]
    else:
        discovery = _Discovery(a)
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
        _finish(a)
