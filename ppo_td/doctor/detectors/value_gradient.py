"""Item 2: a value target that is not detached; a loss that reaches a value network other than through a
regression (the advantage is not detached). A policy loss that reaches value networks but no policy: item 4."""

from __future__ import annotations

from collections.abc import Iterator

from ppo_td.doctor.audit import Audit, Backward
from ppo_td.doctor.detectors import Detector
from ppo_td.doctor.graph import (
    DISTANCE_LOSS_NODES,
    LINEAR_NODES,
    REGRESSION_NODES,
    derived,
    graph,
    outside,
    reach,
)

NO_GRADIENT_FIX = ("the loss graph is cut before these parameters: .item(), .numpy(), argmax, a ratio built from "
                   "sampled actions or indices, a stray .detach(), torch.tensor(...) of network outputs. Recompute "
                   "dist.log_prob(stored_action) from the current network inside the loss, ratio = "
                   "(new_log_prob - old_log_prob).exp(); call zero_grad() before backward(), not between "
                   "backward() and step()")


class ValueGradient(Detector):
    KINDS = {2: ('gradient from the policy loss reaches a value network', 8)}

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        owner = a.exclusive_owner()
        values = {n for n in a.modules if a.role(n) == "value"}
        roles = reach(record.nodes, children, owner)
        for name, sides in distances(record, children):
            common = set.intersection(*(roles.get(id(k), set()) & values for k in sides))
            if common and not derived(sides[0], sides[1]):
                a.add(2, "the value target carries gradient into the value network",
                      f"{name}: both the prediction and the target depend on {', '.join(sorted(common))} "
                      f"({a.some_params(common)}){a.describe_outputs(record.nodes.keys(), only=common)}",
                      "compute returns / TD targets under torch.no_grad() or .detach() them: the value loss "
                      "is a regression onto a fixed target", record.where,
                      made=_first_forward(a, {**graph([sides[0]])[0], **graph([sides[1]])[0]}, sorted(common)))
        # paths to value-network parameters that pass through no squared/absolute/Huber error; a role guessed from
        # the output shape counts only where a policy term multiplies the value term
        free = outside(roots, REGRESSION_NODES)
        unregressed = {owner[id(var)] for n in free.values() if (var := getattr(n, "variable", None)) is not None
                       and id(var) in owner} & values
        named = {n for n in unregressed if not a.role_is_guessed(n)}
        node = _mixing_node(record, children, roles, unregressed) if unregressed else None
        leaked = sorted(unregressed if node else named)
        if not leaked:
            return
        through = f" ({node} multiplies a policy term with a value term)" if node else ""
        forwards = a.describe_outputs(record.nodes.keys(), only=set(leaked))
        a.add(2, "the policy loss puts gradient on value-network parameters: the advantage is not detached",
              f"backward #{record.index} reaches {', '.join(leaked)} ({a.some_params(set(leaked))}) other than "
              f"through a regression onto a target{through}{forwards}",
              "detach the advantage before it weights the policy term: advantages = (returns - values).detach(), "
              "or compute advantages/GAE under torch.no_grad()", record.where, made=_first_forward(a, free, leaked))
        policies = a.policies()
        if policies and not record.modules & set(policies):
            for name in policies:
                a.add(4, f"{name} gets no gradient from the policy loss",
                      f"backward #{record.index} reaches {', '.join(sorted(record.modules))} but no parameter of "
                      f"{name}{a.cut_of(name)}", NO_GRADIENT_FIX, record.where)


def _first_forward(a: Audit, nodes: dict[int, object], modules: list[str]) -> str:
    """The call chain of the earliest forward of ``modules`` among ``nodes`` (the values the advantage was made of)."""
    found = [f for i in nodes if (f := a._outputs.get(i)) is not None and f.module in modules]
    first = min(found, key=lambda f: (f.step, f.index), default=None)
    return first.chain if first else ""


def distances(record: Backward, children: dict) -> Iterator[tuple[str, list]]:
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


def _mixing_node(record: Backward, children: dict, roles: dict, values: set[str]) -> str | None:
    for nid, node in record.nodes.items():
        name = type(node).__name__
        if name.startswith(LINEAR_NODES) or len(children[nid]) < 2:
            continue
        kid_roles = [roles.get(id(k), set()) for k in children[nid]]
        if any(r and r <= values for r in kid_roles) and any(r and not r & values for r in kid_roles):
            return name
    return None


DETECTOR = ValueGradient
