"""The state of one audit: the audited modules and optimizers, the forwards, backward calls and steps seen, the
detectors that judge them, and the findings they made."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ppo_td.doctor.findings import ErrorReport, Finding, Findings, ranges, render
from ppo_td.doctor.lines import FROZEN_WORDS, POLICY_WORDS, VALUE_WORDS, caller, words


class StopAudit(BaseException):  # noqa: N818 - a stop, not an error: it must pass `except Exception`
    """Raised at the optimizer step after ``stop_after`` steps: the audited code has run long enough."""


@dataclass
class Forward:
    """One forward of an audited module whose output carries a graph."""

    module: str
    index: int
    where: str  # the user's outer call that made it (the first line of ``chain``)
    step: int  # optimizer steps done when this forward ran
    node: object  # the output's grad_fn (kept alive so its id stays unique)
    chain: str  # the user's call chain that made it, outer first (lines.call_chain)
    shape: tuple = ()  # the output's shape


@dataclass
class Backward:
    """One ``backward()`` call, looked at before it ran."""

    index: int
    where: str
    nodes: dict[int, object]
    retain_graph: bool
    modules: set[str]  # the audited modules whose parameters this loss reaches
    step: int  # optimizer steps done before it
    params: set[int] = field(default_factory=set)  # ids of the parameters it accumulates into
    tensors: list = field(default_factory=list)  # the tensors backward() was called on (the losses)


@dataclass
class Cut:
    """Where an audited module's output left the graph (``.item()``, argmax, sampling, ``.detach()``, ...)."""

    where: str
    how: str
    forward: Forward


class Audit:
    """State of one audit; read :attr:`findings`, :attr:`error` or :meth:`report` after the ``with`` block."""

    def __init__(self, explode_threshold: float = 1e3, stop_after: int | None = None,
                 detectors: Iterable[type] = ()) -> None:
        self.explode_threshold = explode_threshold
        self.stop_after = stop_after
        self.modules: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.error: ErrorReport | None = None
        self.stopped = ""  # why the audit stopped the code early (stop_after, a time limit), if it did
        self._roles: dict[str, str] = {}  # given roles; others are inferred (see role())
        self._output_roles: dict[str, str] = {}
        self._groups = Findings()
        self._backwards: list[Backward] = []
        self._outputs: dict[int, Forward] = {}
        self._forwards: dict[str, int] = {}
        self._steps = 0
        self._stepped_at: dict[int, tuple[int, str, str]] = {}  # param id -> (step, line, optimizer)
        self._cuts: dict[str, list[Cut]] = {}  # module -> where its outputs were cut from the graph (newest last)
        self._owners: dict[int, list[str]] = {}
        self._names: dict[int, str] = {}  # param id -> "module.parameter"
        self._by_id: dict[int, str] = {}  # module id -> its name
        self._error_finding: Finding | None = None
        self._error_text = ""
        self._grad_norms: dict[int, float] = {}  # param id -> its gradient's norm, at the step under way
        self.explained: set[int] = set()  # parameters whose missing gradient a detector explained already
        self.notes: set[tuple[str, str]] = set()  # (detector, module): causes found, for other detectors to defer to
        self.in_loss = 0  # TorchRL loss modules running now (their own terms are judged by the loss's outputs)
        self.called: nn.Module | None = None  # the module whose forward the detectors are shown (``forward``)
        self.detectors = [cls() for cls in detectors]  # (ppo_td.doctor.detectors.registered(), from audit())
        self.watched: dict[Any, list] = {}  # torch function -> the detectors that watch its calls
        for d in self.detectors:
            for func in d.calls:
                self.watched.setdefault(func, []).append(d)
        self.watched_without_grad = frozenset().union(*(d.calls_without_grad for d in self.detectors))

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
        found = words(name)
        if found & VALUE_WORDS:
            return "value"
        if found & POLICY_WORDS:
            return "policy"
        return self._output_roles.get(name, "policy")

    def role_is_guessed(self, name: str) -> bool:
        """True when the role comes from the output shape only: a policy with one output (a Bernoulli logit, a
        1-D Gaussian mean) looks like a value network, so such a guess never decides a finding alone."""
        return name not in self._roles and not words(name) & (VALUE_WORDS | POLICY_WORDS)

    def check_ratio(self, log_ratio: torch.Tensor, tolerance: float = 1e-4) -> None:
        """Check the first minibatch's log(pi_new / pi_old): before any step it must be 0 (item 6)."""
        ratio = next((d for d in self.detectors if hasattr(d, "check_first")), None)  # the ratio's detector
        if ratio is not None:
            ratio.check_first(self, log_ratio, tolerance, caller())

    def check_rollout(self, data: Mapping[str, Any]) -> None:
        """Report rollout entries that carry an autograd graph (item 1): they must be recorded without one."""
        items = data.items(True, True) if hasattr(data, "batch_size") else data.items()
        carrying = [str(k) for k, v in items if torch.is_tensor(v) and v.requires_grad]
        if carrying:
            self.add(1, "rollout data carries an autograd graph",
                     f"rollout entries {', '.join(carrying[:5])} were recorded with gradients on",
                     "run the policy and critic under torch.no_grad() while collecting (TorchRL collectors do); "
                     "store .detach()ed tensors", caller())

    def detector(self, cls: type) -> Any:
        """This audit's instance of the detector class ``cls``."""
        return next(d for d in self.detectors if type(d) is cls)

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

    def holder_of(self, module: nn.Module) -> str | None:
        """The audited module that holds every parameter of ``module`` (one of its parts, or a view of its
        parameters such as TorchRL's ``actor_network_params``), or None."""
        ids = [id(p) for p in module.parameters()]
        holders = set.intersection(*(set(self._owners.get(i, ())) for i in ids)) if ids else set()
        return min(holders, key=list(self.modules).index) if holders else None

    def alias(self, module: nn.Module, name: str) -> None:
        """Audit ``module``'s forwards as forwards of the audited module ``name``."""
        self._by_id[id(module)] = name

    def name_of(self, module: nn.Module) -> str | None:
        """The name ``module`` is audited under, or None."""
        return self._by_id.get(id(module))

    def add_optimizer(self, name: str, opt: torch.optim.Optimizer) -> str:
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError(f"doctor.audit: {name} is a {type(opt).__name__}, not a torch.optim.Optimizer")
        known = self.optimizer_name(opt)
        if known is not None:
            return known
        unique = _unique(name, self.optimizers)
        self.optimizers[unique] = opt
        return unique

    def optimizer_name(self, opt: torch.optim.Optimizer) -> str | None:
        return next((n for n, o in self.optimizers.items() if o is opt), None)

    # -- for the detectors ------------------------------------------------------------------------
    def add(self, item: int, title: str, culprit: str, fix: str, where: str = "", made: str = "",
            step: int | None = None) -> Finding:
        """Report a finding seen during optimizer step ``step`` (default: the one under way)."""
        finding = Finding(item, title, culprit, fix, where, made=made)
        return self._groups.add(finding, self._steps + 1 if step is None else step)

    def grad_norm(self, param: torch.Tensor) -> float | None:
        """The norm of ``param.grad`` as the current optimizer step is about to use it (None: no dense gradient),
        read once for all detectors: 0 means all-zero, a non-finite norm a non-finite gradient."""
        return self._grad_norms.get(id(param))

    def named(self, param: torch.Tensor) -> str:
        return self._names.get(id(param), f"a parameter of shape {list(param.shape)}")

    def exclusive_owner(self) -> dict[int, str]:
        return {pid: names[0] for pid, names in self._owners.items() if len(names) == 1}

    def optimized(self, name: str) -> bool | None:
        """Whether an optimizer seen so far holds the module's parameters (None: no optimizer seen yet)."""
        if not self.optimizers:
            return None
        ids = {id(p) for p in self.modules[name].parameters()}
        return any(id(p) in ids for o in self.optimizers.values() for g in o.param_groups for p in g["params"])

    def learns(self, name: str) -> bool:
        """A module whose parameters should get gradient: one an optimizer seen so far holds, or one not named
        as a frozen copy (``old_policy``, ``target_net``): its optimizer may not have stepped yet."""
        return bool(self.optimized(name)) or not words(name) & FROZEN_WORDS

    def policies(self) -> list[str]:
        """The audited modules known (not guessed) to be policies that learn."""
        return [n for n in self.modules if self.role(n) == "policy" and not self.role_is_guessed(n)
                and self.learns(n) and any(p.requires_grad for p in self.modules[n].parameters())]

    def params(self) -> list[torch.Tensor]:
        found = {}
        for module in self.modules.values():
            found.update({id(p): p for p in module.parameters() if p.requires_grad})
        for opt in self.optimizers.values():
            found.update({id(p): p for g in opt.param_groups for p in g["params"] if p.requires_grad})
        return list(found.values())

    def forward_below_node(self, node: object | None) -> Forward | None:
        """The audited forward at or below a graph node, or None."""
        from ppo_td.doctor.graph import below

        return below(node, self._outputs) if node is not None and self._outputs else None

    def describe_outputs(self, node_ids: Iterable[int], only: set[str] | None = None) -> str:
        """`` (outputs of actor forward #1-#64 at file:26; ...)``: the audited forwards among ``node_ids``, the
        repeats of one line collapsed."""
        found = [self._outputs[i] for i in node_ids if i in self._outputs]
        return _forwards_text([f for f in found if only is None or f.module in only])

    def some_params(self, modules: set[str]) -> str:
        names = [self._names[pid] for pid, owners in self._owners.items()
                 if owners[0] in modules and pid in self._names]
        return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")

    def cut_of(self, module: str) -> str:
        """Where ``module``'s outputs were cut from the graph: the likeliest culprits (not .detach()) first."""
        cuts = sorted(reversed(self._cuts.get(module, [])), key=lambda c: c.how == ".detach()")[:3]
        if not cuts:
            return ""
        how = "; ".join(f"{c.how} at {c.where}" for c in cuts)
        return (f"; {module}'s output (forward #{cuts[0].forward.index} at {cuts[0].forward.where}) was cut from the "
                f"graph by {how}")


def _forwards_text(found: list[Forward]) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for f in found:
        groups.setdefault((f.module, f.where), []).append(f.index)
    if not groups:
        return ""
    parts = []
    for (module, where), indices in sorted(groups.items()):
        many = len(set(indices)) > 1
        parts.append(f"{len(set(indices))} {module} forwards #{ranges(indices)} at {where}" if many
                     else f"{module} forward #{indices[0]} at {where}")
    return f" (outputs of {'; '.join(parts)})"


def describe_forwards(found: list[Forward]) -> str:
    """The forwards ``found``, the repeats of one line collapsed (``64 actor forwards #1-64 at file:26``)."""
    return _forwards_text(found)[len(" (outputs of "):-1] if found else ""


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    """``name``, or ``name#2``, ``name#3``, ... if it is taken."""
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}#{n}", n + 1
    return unique


def shared_nodes(later: Backward, earlier: Backward) -> set[int]:
    """Graph nodes two backward calls both run through, parameters' leaves excepted."""
    common = later.nodes.keys() & earlier.nodes.keys()
    return {i for i in common if type(later.nodes[i]).__name__ != "AccumulateGrad"}
