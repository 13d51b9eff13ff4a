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

On a multi-agent env with several agent groups (teams, e.g. VMAS or MPE ``simple_tag``'s adversaries and agent),
:class:`TeamSelfPlay` is ML-Agents' self-play for teams (its ``GhostTrainer``): one group learns at a time, the
groups taking turns every ``env.team_change`` frames; every other group plays, batch by batch, its own latest
policy (probability ``env.latest_ratio``) or one of its own past snapshots (taken every ``env.snapshot_frames``
frames while it learned, the newest ``env.pool_size`` kept). Only the learning group's loss is computed: the
others' steps came from the weights they played, so they take no optimizer step. The same fields and defaults as
the turn-based pool; what differs: a team game has no seats for scripted anchors (``env.anchors`` is refused), and
one draw serves a whole batch (its copies step together).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from ppo_td import keys
from ppo_td.collect.fast import InProcessCollector
from ppo_td.config import TrainConfig
from ppo_td.envs.games import OpponentPool, make_opponent
from ppo_td.models.multiagent import team_members
from ppo_td.training.objective import TeamAdvantage, TeamLoss


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

    def playing(self) -> contextlib.AbstractContextManager[None]:
        """What a batch is collected inside: nothing here (the opponents play inside the games' steps)."""
        return contextlib.nullcontext()

    def metrics(self) -> dict[str, float]:
        """The iteration's self-play metrics: none here."""
        return {}

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


class TeamSelfPlay:
    """Team self-play on several agent groups (see the module): the learning group, each group's pool of past
    snapshots, and each batch's draws.

    Raises:
        ValueError: what it cannot run with, in one line (one group, anchors, a loss other than ppo_td's team loss;
            ranks and a collector with copies of the actor: :meth:`check_collector`).
    """

    def __init__(self, config: TrainConfig, actor: torch.nn.Module, loss: Any, groups: list[str],
                 advantage: Any = None) -> None:
        env_config = config.env
        why = None
        if len(groups) < 2:
            why = "the env has one agent group: there is no other team to play"
        elif env_config.anchors:
            why = f"env.anchors {list(env_config.anchors)} play turn-based games' seats, not a team's agents"
        elif not isinstance(loss, TeamLoss):
            why = (f"the loss is a {type(loss).__name__}; one group learns at a time through ppo_td's team loss "
                   "(ppo_td.training.objective.TeamLoss, the default for agent groups)")
        if why is not None:
            raise ValueError(f"env.opponent='self' (team self-play): {why}; leave env.opponent at 'random' to train "
                             "every group at once")
        self.config, self.groups, self.loss = env_config, list(groups), loss
        self.advantage = advantage if isinstance(advantage, TeamAdvantage) else None
        """The groups' advantage estimator, told the learning group too (the others' value statistics stay)."""
        members = team_members(actor, groups, keys.ACTION)
        self.parameters = {g: list(member.parameters()) for g, member in members.items()}
        """Each group's actor parameters, in their order (a snapshot is a copy of them)."""
        self.pools: dict[str, list[list[torch.Tensor]]] = {g: [] for g in groups}
        """Each group's past snapshots, oldest first (at most ``env.pool_size``)."""
        self.rng = np.random.default_rng([config.seed, 0x7EA5])
        """The draws of the opponents (a stream of its own: the run's other random numbers are unchanged)."""
        self.learning = self.groups[0]
        self.played: dict[str, int] = {}
        """What each other group played in the last batch: the index of its snapshot in its pool, -1 its latest."""
        self.next_at = 0
        self.after_update(0)

    def _learning_at(self, frames: int) -> str:
        return self.groups[(frames // self.config.team_change) % len(self.groups)]

    @contextlib.contextmanager
    def playing(self) -> Iterator[None]:
        """Collect a batch with each other group's drawn weights in its actor; its own come back however the
        collection ends (an error, Ctrl-C)."""
        own: dict[str, list[torch.Tensor]] = {}
        self._tell_learning()  # (a loss or estimator used elsewhere since: this batch's group again)
        try:
            with torch.no_grad():
                for group in self.groups:
                    if group == self.learning:
                        continue
                    pool = self.pools[group]
                    latest = not pool or self.rng.random() < self.config.latest_ratio
                    index = -1 if latest else int(self.rng.integers(len(pool)))
                    self.played[group] = index
                    if index >= 0:
                        own[group] = [p.detach().clone() for p in self.parameters[group]]
                        for param, weight in zip(self.parameters[group], pool[index], strict=True):
                            param.copy_(weight)
            yield
        finally:
            with torch.no_grad():
                for group, weights in own.items():
                    for param, weight in zip(self.parameters[group], weights, strict=True):
                        param.copy_(weight)

    def metrics(self) -> dict[str, float]:
        """The iteration's learning group (its index in the groups' order) and what each other group played (its
        snapshot's index in its pool, -1 its latest policy)."""
        return {"selfplay_learning": float(self.groups.index(self.learning)),
                **{f"selfplay_played/{g}": float(i) for g, i in self.played.items()}}

    def after_update(self, frames: int) -> None:
        """A snapshot of the learning group at each ``snapshot_frames`` boundary crossed (at the start, of every
        group); then the group that learns from the next batch on."""
        if frames == 0 and not any(self.pools.values()):
            for group in self.groups:
                self._snapshot(group)
            self.next_at = self.config.snapshot_frames
        elif frames >= self.next_at:
            self._snapshot(self.learning)
            self.next_at = (frames // self.config.snapshot_frames + 1) * self.config.snapshot_frames
        self.learning = self._learning_at(frames)
        self.played = {}
        self._tell_learning()

    def _snapshot(self, group: str) -> None:
        weights = [p.detach().clone() for p in self.parameters[group]]
        self.pools[group] = [*self.pools[group], weights][-self.config.pool_size:]

    def state_dict(self) -> dict[str, Any]:
        """The pools, the learning group, the next snapshot's frame and the draws' generator (for the checkpoint)."""
        return {"pools": {g: [list(w) for w in pool] for g, pool in self.pools.items()}, "learning": self.learning,
                "next_at": self.next_at, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Self-play as the checkpoint had it."""
        if set(state.get("pools", {})) != set(self.groups):
            raise ValueError(f"the checkpoint's team self-play holds the groups {sorted(state.get('pools', {}))}, "
                             f"this run has {sorted(self.groups)}")
        self.pools = {g: [[t.clone() for t in w] for w in state["pools"][g]] for g in self.groups}
        self.learning, self.next_at = state["learning"], int(state["next_at"])
        self.rng.bit_generator.state = state["rng"]
        self.played = {}
        self._tell_learning()

    def _tell_learning(self) -> None:
        """The loss (and the advantage estimator) compute the learning group's terms only."""
        self.loss.learning = (self.learning,)
        if self.advantage is not None:
            self.advantage.learning = (self.learning,)

    def check_collector(self, collector: Any) -> None:
        """Refuse a collector whose policy is not the actor itself (worker processes or copies): the opponents'
        weights would not reach it, and the others would play their latest policy while the metrics say otherwise.

        Raises:
            ValueError: naming the collector.
        """
        from torchrl.collectors import Collector

        if not isinstance(collector, InProcessCollector) and type(collector) is not Collector:
            raise ValueError(f"env.opponent='self' (team self-play) swaps the other groups' weights in the actor the "
                             f"collector calls; a {type(collector).__name__} collects with copies of it: let ppo_td "
                             "build the collector (collector.backend='inprocess'), or leave env.opponent at 'random'")
