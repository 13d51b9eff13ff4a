"""Item 7: the loss runs through a forward whose module an optimizer stepped after that forward."""

from __future__ import annotations

from ppo_td.doctor.audit import Audit, Backward, describe_forwards
from ppo_td.doctor.detectors import Detector


class StaleForward(Detector):
    KINDS = {7: ('optimizer step between a forward and its backward', 3)}

    def backward(self, a: Audit, record: Backward, roots: list, children: dict) -> None:
        stale: dict[tuple[str, str, str], list] = {}  # (module, optimizer, step line) -> the stale forwards
        for nid in record.nodes:
            fwd = a._outputs.get(nid)
            if fwd is None:
                continue
            for p in a.modules[fwd.module].parameters():
                step = a._stepped_at.get(id(p))
                if step is not None and step[0] > fwd.step:
                    stale.setdefault((fwd.module, step[2], step[1]), []).append(fwd)
                    break
        if not stale:
            return
        culprit = "; ".join(f"{module}'s parameters were stepped by {opt} at {line} after its "
                            f"{describe_forwards(forwards)}" for (module, opt, line), forwards in stale.items())
        first = min((f for forwards in stale.values() for f in forwards), key=lambda f: f.index)
        a.add(7, "an optimizer stepped parameters between the forward a loss uses and that loss's backward",
              f"backward #{record.index}: {culprit}",
              "run forward -> loss -> zero_grad -> backward -> step for one loss at a time, and recompute every "
              "network output after a step (or sum the losses and step once). The backward otherwise fails with "
              "'modified by an inplace operation', or, with retain_graph=True, computes gradients of the old "
              "weights", record.where, made=first.chain)


DETECTOR = StaleForward
