"""Self-play (``env.opponent='self'``): the learner plays a turn-based game's other seats with its own policy, the
latest or a past snapshot.

A pool (:class:`~ppo_td.envs.games.OpponentPool`) is given to every env copy (Gymnasium's ``VectorEnv.call``, the
copies' ``set_opponent``); each game draws its opponent from it: the latest policy with probability
``env.latest_ratio``, else one of the kept snapshots or ``env.anchors`` uniformly (ML-Agents' self-play, whose
defaults these are: a snapshot every 20,000 of the learner's steps, a window of 10, half the games against the
latest). Snapshots are taken after the update that crosses each ``env.snapshot_frames`` boundary, the first at the
start; the latest policy is the learner's weights after each update. An opponent samples its move from its policy
(as the learner does in training), with random numbers drawn from its env copy's generator (a seeded run plays the
same games). The pool is saved in the checkpoint and comes back on resume.

ML-Agents swaps its opponent every ``swap_steps``; here each game draws one (a game is short and copies play many
at once).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from ppo_td.config import TrainConfig
from ppo_td.envs.games import OpponentPool, make_opponent


class PolicyOpponent:
    """A turn-based game's seat played by a copy of the learner's actor: the observation (``observation`` and the
    ``action_mask``, as the game gives them) read into the actor's inputs, the move sampled from its policy's
    probabilities (TorchRL's ``get_dist``; a categorical policy, as every turn-based game's Discrete action has)."""

    def __init__(self, actor: torch.nn.Module, spec: Any, keys: list[str]) -> None:
        self.actor, self.spec, self.keys = actor, spec, keys

    def act(self, observation: Any, seat: str, rng: np.random.Generator) -> int:
        entries = observation if isinstance(observation, dict) else {"observation": observation}
        td = TensorDict({k: torch.as_tensor(np.asarray(entries[k])).to(self.spec[k].dtype).unsqueeze(0)
                         for k in self.keys}, batch_size=[1])
        with torch.no_grad():
            probs = self.actor.get_dist(td).probs.reshape(-1).double().numpy()  # the masked policy's
        return int(rng.choice(probs.size, p=probs / probs.sum()))  # drawn from the game's generator, not torch's


class SelfPlay:
    """The pool of the learner's snapshots and the env copies it is given to (see the module).

    Raises:
        ValueError: what self-play cannot run with, in one line (the env's copies out of reach, observation
            normalization, a recurrent or gSDE actor).
    """

    def __init__(self, config: TrainConfig, actor: torch.nn.Module, built: Any, env: Any) -> None:
        env_config = config.env
        vector = getattr(built, "vector", None)
        why = None
        if vector is None:
            why = "its env copies are out of reach (pass the env as a factory or id, not built)"
        elif config.collector.backend != "inprocess" or (config.collector.num_workers or 1) > 1:
            why = f"collector.backend={config.collector.backend!r} steps copies in other processes"
        elif env_config.normalize_observations:
            why = "env.normalize_observations standardizes the learner's observations, not its opponents'"
        elif config.model.recurrent != "none" or config.model.exploration != "gaussian":
            why = "a recurrent or gSDE policy carries state its opponents' moves would not"
        if why is not None:
            raise ValueError(f"env.opponent='self' (self-play): {why}; leave env.opponent at 'random' or a fixed "
                             "opponent")
        spec = env.observation_spec
        self.keys = [k for k in actor.in_keys if isinstance(k, str) and k in spec.keys()]
        missing = [k for k in actor.in_keys if k not in self.keys and k != "step_count"]
        if missing:
            raise ValueError(f"env.opponent='self' (self-play): the actor reads {missing}, which a game's observation "
                             "does not give its opponents")
        self.config, self.actor, self.vector, self.spec = env_config, actor, vector, spec
        self.latest = self._opponent()
        self.snapshots: list[PolicyOpponent] = []
        n = built.description.action_nvec[0] if built.description.action_nvec else None
        self.anchors = [make_opponent(name, n) for name in env_config.anchors]
        self.next_at = 0
        self.pool = OpponentPool(self.latest, latest_ratio=env_config.latest_ratio)
        self.after_update(0)

    def _opponent(self) -> PolicyOpponent:
        twin = copy.deepcopy(self.actor).eval()
        for p in twin.parameters():
            p.requires_grad_(False)
        return PolicyOpponent(twin, self.spec, self.keys)

    def after_update(self, frames: int) -> None:
        """The latest opponent takes the learner's weights; a snapshot joins the pool at each ``snapshot_frames``
        boundary crossed (the oldest leaves past ``pool_size``); every copy gets the pool."""
        self.latest.actor.load_state_dict(self.actor.state_dict())
        if frames >= self.next_at:
            snapshot = self._opponent()
            self.snapshots = [*self.snapshots, snapshot][-self.config.pool_size:]
            self.next_at = (frames // self.config.snapshot_frames + 1) * self.config.snapshot_frames
        self.pool.others = [*self.snapshots, *self.anchors]
        self.vector.call("set_opponent", self.pool)

    def state_dict(self) -> dict[str, Any]:
        """The snapshots' weights and the next snapshot's frame (for the checkpoint)."""
        return {"snapshots": [s.actor.state_dict() for s in self.snapshots], "next_at": self.next_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The pool as the checkpoint had it."""
        self.snapshots = []
        for weights in state["snapshots"]:
            snapshot = self._opponent()
            snapshot.actor.load_state_dict(weights)
            self.snapshots.append(snapshot)
        self.next_at = int(state["next_at"])
        self.latest.actor.load_state_dict(self.actor.state_dict())
        self.pool.others = [*self.snapshots, *self.anchors]
        self.vector.call("set_opponent", self.pool)
