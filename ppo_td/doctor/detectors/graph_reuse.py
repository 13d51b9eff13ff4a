"""Item 1: a backward runs through graph an earlier ``retain_graph=True`` backward used, after an optimizer step
or next to fresh outputs of the same module: rollout data or values computed once, reused by a later loss."""

from __future__ import annotations

from ppo_td.doctor.audit import Audit, Backward, shared_nodes
from ppo_td.doctor.detectors import Detector


class GraphReuse(Detector):
    KINDS = {1: ('rollout data carries an autograd graph', 14)}

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        forwards: dict[str, set[int]] = {}  # module -> its forwards in this graph
        for nid in record.nodes:
            if nid in a._outputs:
                forwards.setdefault(a._outputs[nid].module, set()).add(a._outputs[nid].index)
        for earlier in (b for b in a._backwards if b.retain_graph):  # only a retained graph can be run again
            shared = shared_nodes(record, earlier)
            if not shared:
                continue
            reused = [a._outputs[i] for i in shared if i in a._outputs]
            # two losses on one forward before a step are the same as their sum (retain_graph is right there); a
            # step in between, or the same module's fresh outputs next to the reused ones (a rollout's log-probs
            # with their graph in the ratio), is the mistake
            if earlier.step < a._steps or any(len(forwards.get(f.module, ())) > 1 for f in reused):
                a.add(1, "a graph reused by a later loss: rollout data or values computed once carry an autograd "
                      "graph",
                      f"backward #{record.index} runs through {len(shared)} graph node(s) already used by backward "
                      f"#{earlier.index} at {earlier.where}{a.describe_outputs(shared)}",
                      "collect rollouts under torch.no_grad() (or .detach() actions, log-probs, values and "
                      "advantages when storing them); recompute log-probs and values from stored observations in "
                      "each minibatch loss. retain_graph=True only hides this: gradients flow into stale outputs",
                      record.where, made=min(reused, key=lambda f: f.index).chain if reused else "")


DETECTOR = GraphReuse
