"""Walks of an autograd graph, before its backward runs: what it reaches, and by which paths."""

from __future__ import annotations

from collections.abc import Iterable

# Nodes that only add, stack or reshape: mixing policy and value terms through them is fine.
LINEAR_NODES = ("AddBackward", "SubBackward", "CatBackward", "StackBackward", "SumBackward", "MeanBackward",
                "NegBackward", "ViewBackward", "UnsqueezeBackward", "SqueezeBackward", "ExpandBackward")
# Losses that measure a distance between two terms: a regression (value loss) when one side is a fixed target.
DISTANCE_LOSS_NODES = ("MseLossBackward", "SmoothL1LossBackward", "L1LossBackward", "HuberLossBackward")
# Nodes through which a value network's output enters a regression loss (squared, absolute, Huber error).
REGRESSION_NODES = ("PowBackward", "MseLossBackward", "SmoothL1LossBackward", "L1LossBackward", "HuberLossBackward",
                    "AbsBackward")


def graph(roots: Iterable[object]) -> tuple[dict[int, object], dict[int, list[object]]]:
    """All nodes under ``roots`` and each node's children (iterative: graphs can be deep)."""
    nodes: dict[int, object] = {}
    children: dict[int, list[object]] = {}
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        kids = [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        children[id(node)] = kids
        stack.extend(kids)
    return nodes, children


def leaves(nodes: dict[int, object]) -> set[int]:
    """Ids of the tensors (parameters) whose gradient the graph accumulates."""
    return {id(v) for n in nodes.values() if (v := getattr(n, "variable", None)) is not None}


def reach(nodes: dict[int, object], children: dict[int, list[object]], owner: dict[int, str]) -> dict[int, set]:
    """For each node, the owners (module names) of the parameters below it; ``owner`` maps parameter ids."""
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
            found = {owner[id(var)]} if var is not None and id(var) in owner else set()
            for k in children[nid]:
                found |= memo.get(id(k), set())
            memo[nid] = found
    return memo


def outside(roots: Iterable[object], stop: tuple[str, ...]) -> dict[int, object]:
    """The nodes reachable from ``roots`` by paths that pass through no node named ``stop``, by id."""
    seen: dict[int, object] = {}
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen or type(node).__name__.startswith(stop):
            continue
        seen[id(node)] = node
        stack.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)
    return seen


def below(node: object, wanted: dict[int, object], limit: int = 256) -> object | None:
    """The first node of ``wanted`` (by id) at or below ``node``, looking at no more than ``limit`` nodes."""
    seen: set[int] = set()
    stack = [node]
    while stack and len(seen) < limit:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        if id(n) in wanted:
            return wanted[id(n)]
        seen.add(id(n))
        stack.extend(k for k, _ in getattr(n, "next_functions", ()) if k is not None)
    return None


def derived(a: object, b: object) -> bool:
    """True if one node lies below the other (``x - x.mean()``), i.e. not two independent outputs."""
    below_a, _ = graph([a])
    below_b, _ = graph([b])
    return id(b) in below_a or id(a) in below_b


def path(roots: Iterable[object], target: object) -> list[object]:
    """The nodes from a root down to ``target`` (both included; breadth first, so a shortest path), or []."""
    parents: dict[int, object | None] = {id(r): None for r in roots if r is not None}
    queue = [r for r in roots if r is not None]
    nodes = {id(r): r for r in queue}
    while queue:
        node = queue.pop(0)
        if node is target:
            found = [node]
            while (parent := parents[id(found[-1])]) is not None:
                found.append(parent)
            return found[::-1]
        for kid, _ in getattr(node, "next_functions", ()):
            if kid is not None and id(kid) not in parents:
                parents[id(kid)], nodes[id(kid)] = node, kid
                queue.append(kid)
    return []
