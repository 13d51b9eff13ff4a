"""Atomic checkpoints that hold everything needed to evaluate or resume a run."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import torch
from tensordict.nn import TensorDictModule

from ppo_td.collect import make_collector, push_to_workers, shutdown
from ppo_td.config import TrainConfig, from_dict, to_dict
from ppo_td.envs import EnvDescription, build_env, running_moments
from ppo_td.envs.sources.vmas import runnable_here
from ppo_td.models import add_policy_inputs, make_actor_critic
from ppo_td.models.gsde import noise_every
from ppo_td.models.recurrent import is_recurrent
from ppo_td.persist.runfolder import current_umask, remove_stale_temporaries
from ppo_td.persist.snapshot import capture, inexact_reason, restore_snapshot
from ppo_td.training import (
    NonFiniteError,
    Pipeline,
    StopTraining,
    build_pipeline,
    compile_problem,
    compiles,
    make_loss,
    make_train_env,
    run_device,
)
from ppo_td.training.ranks import launched
from ppo_td.training.threads import choose_threads, using_threads

FORMAT = "ppo_td.checkpoint"
REQUIRED = ("config", "env_signature", "actor", "critic", "optimizer", "scheduler", "env_state", "obs_stats",
            "frames", "iteration", "snapshot")
VERSION = 2  # 2: ppo_td 0.2's network layout (PolicyNet / ValueNet) and collector state


def save_checkpoint(path: str | os.PathLike, pipeline: Pipeline, *, frames: int, iteration: int,
                    elapsed: float = 0.0, run_id: str | None = None, ended_early: str = "",
                    evaluation: dict[str, Any] | None = None, ranks: list[dict[str, Any]] | None = None) -> Path:
    """Write a checkpoint of ``pipeline`` to ``path`` atomically (temp file, fsync, rename).

    A crash mid-write leaves any previous file at ``path`` untouched. Holds the
    config, the env signature, actor/critic/optimizer/scheduler state, the env's
    transform state (normalization statistics), the frame/iteration counters and
    the RNG/simulator/collector snapshot that makes a resume exact (:mod:`ppo_td.persist.snapshot`).
    ``ended_early``: why the run ended complete before its budget (a resume then finishes it instead);
    ``evaluation``: the evaluation during training this checkpoint scored (``best.pt``: its return, frames...).
    ``ranks`` (a run over several, from :func:`rank_states`): each rank's own state, so a resume on as many ranks
    continues exactly; the rest of the checkpoint is rank 0's (the weights, optimizer and statistics are alike on
    every rank).
    """
    path = Path(path)
    for part in ("actor", "critic"):
        for name, value in getattr(pipeline, part).state_dict().items():
            if value.is_floating_point() and not torch.isfinite(value).all():
                raise NonFiniteError(f"refusing to write checkpoint {path}: {part}.{name} is not finite; the "
                                     "previous checkpoint is kept")
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "version": VERSION,
        "config": to_dict(pipeline.config),
        "env_signature": pipeline.description.signature(),
        "actor": pipeline.actor.state_dict(),
        "critic": pipeline.critic.state_dict(),
        "optimizer": pipeline.optimizer.state_dict(),
        "scheduler": pipeline.scheduler.state_dict(),
        "env_state": pipeline.env.state_dict(),
        "obs_stats": pipeline.observation_stats(),
        "transform_states": pipeline.transform_states(),
        "value_norm": _value_norm_state(pipeline),
        "selfplay": pipeline.selfplay.state_dict() if pipeline.selfplay is not None else None,
        "frames": frames,
        "iteration": iteration,
        "elapsed": float(elapsed),  # training seconds so far: a resumed run's time goes on from here
        "run_id": run_id,
        "snapshot": capture(pipeline),
        "ended_early": ended_early,
        "evaluation": evaluation,
        "ranks": ranks,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; a checkpoint gets the user's usual mode
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def rank_states(pipeline: Pipeline) -> list[dict[str, Any]] | None:
    """Every rank's own state (its env copies' and collector's snapshot, its env's transforms, its random numbers),
    in rank order, for rank 0's checkpoint; None for one process. A collective: every rank calls it."""
    if pipeline.ranks is None:
        return None
    mine = {"snapshot": capture(pipeline), "env_state": pipeline.env.state_dict(),
            "transform_states": pipeline.transform_states()}
    return pipeline.ranks.gather(mine, "gathering every rank's state for the checkpoint")


def _value_norm_state(pipeline: Pipeline) -> dict[str, torch.Tensor] | None:
    """The value-normalization statistics (``loss.normalize_values``) the critic's units depend on, or None."""
    value_norm = getattr(pipeline.advantage, "value_norm", None)
    return None if value_norm is None else {k: v.cpu() for k, v in value_norm.state_dict().items()}


BEST = "best.pt"
"""The run folder's checkpoint of the best evaluation during training (``eval_every``)."""


def checkpoint_in(path: str | os.PathLike, which: str = "last") -> Path:
    """The checkpoint file ``path`` names: itself (a file), or a run folder's ``checkpoint.pt`` (``which='last'``,
    where training stopped) or ``best.pt`` (``which='best'``, the best evaluation during training).

    Raises:
        ValueError: an unknown ``which``, or ``'best'`` of a run that has no ``best.pt`` (naming why).
    """
    path = Path(path)
    if which not in ("last", "best"):
        raise ValueError(f"which={which!r}: give 'last' (checkpoint.pt, where training stopped) or 'best' (best.pt, "
                         "the best evaluation during training)")
    if which == "best":
        folder = path if path.is_dir() else path.parent
        if not (folder / BEST).is_file():
            raise ValueError(f"{folder} has no {BEST}: a run keeps its best policy when it evaluates during training "
                             "(eval_every=N frames, --eval-every N); use which='last' for its last checkpoint")
        return folder / BEST
    return path / "checkpoint.pt" if path.is_dir() else path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a checkpoint file; clear errors for missing, corrupt or foreign files."""
    path = checkpoint_in(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: pass a checkpoint file or a run folder with checkpoint.pt")
    with path.open("rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"  # torch.save writes zip archives: a CSV, a JSON, a text file is none
    if not zipped:
        raise ValueError(f"{path} is not a checkpoint (not a file torch.save wrote): pass a run folder or its "
                         "checkpoint.pt (checkpoints/iter_*.pt for an earlier one)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any file: torch's unpickler fails in many ways on foreign bytes
        # (KeyError, IndexError, UnpicklingError, BadZipFile, EOFError ...): its first line, not torch's advice
        first = (str(err).strip().splitlines() or [""])[0][:160]
        raise ValueError(
            f"checkpoint {path} is unreadable (truncated or corrupt: {type(err).__name__}: {first}). "
            "Use an earlier checkpoint of the run, or train again."
        ) from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a ppo_td checkpoint (no '{FORMAT}' marker).")
    if state.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has format version {state.get('version')}; this ppo_td reads {VERSION}.")
    missing = [key for key in REQUIRED if key not in state]
    if missing:
        raise ValueError(f"checkpoint {path} lacks {missing}: it is damaged or was not written by ppo_td's "
                         "save_checkpoint. Use an earlier checkpoint of the run (checkpoints/iter_*.pt)")
    return state


def checkpoint_config(state: dict[str, Any]) -> TrainConfig:
    """The :class:`TrainConfig` a checkpoint was trained with."""
    return from_dict(state["config"])


def check_compatible(state: dict[str, Any], description: EnvDescription) -> None:
    """Refuse a checkpoint whose observation shape or action space differ from the env's ``description``."""
    saved, current = state["env_signature"], description.signature()
    if saved != current:
        raise ValueError(
            f"checkpoint does not fit this environment: it was trained with {saved} "
            f"(env {state['config']['env']['env_id']}), the environment has {current}. "
            "Evaluate it on the env it was trained on."
        )


def load_weights(module: torch.nn.Module, state: dict[str, Any], name: str) -> None:
    """Load the checkpoint's ``name`` ("actor" or "critic") into ``module``; a network of another shape (a
    recurrent checkpoint into a feed-forward model, other widths) is refused naming the two models."""
    try:
        module.load_state_dict(state[name])
    except RuntimeError as err:
        renamed = _from_multiagent_mlp(state[name], set(module.state_dict()))
        if renamed is not None:
            module.load_state_dict(renamed)
            return
        model = state["config"]["model"]
        saved = (f"model.recurrent={model.get('recurrent', 'none')!r}, "
                 f"model.hidden_sizes={tuple(model['hidden_sizes'])}, "
                 f"model.recurrent_size={model.get('recurrent_size', '-')}")
        here = "a recurrent" if is_recurrent(module) else "a feed-forward"
        raise ValueError(f"the checkpoint's {name} does not fit this {name} ({here} network): the checkpoint was "
                         f"trained with {saved}. Build the model from the checkpoint's config "
                         f"(ppo_td.persist.checkpoint_config), or train a new one. ({str(err).splitlines()[0]})"
                         ) from None


def _from_multiagent_mlp(saved: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor] | None:
    """A multi-agent network saved by ppo_td before its shared-parameter networks were its own: TorchRL's
    ``MultiAgentMLP`` kept the shared weights under ``params.<layer>``, ``SharedMLP``/``TeamMLP`` keep the same
    tensors under ``net.<layer>``. The saved entries renamed, or None when the renaming does not give the module's."""
    renamed = {re.sub(r"(^|\.)params\.(\d+)\.", r"\1net.\2.", key): value for key, value in saved.items()}
    return renamed if set(renamed) == expected and set(saved) != expected else None


def restore(pipeline: Pipeline, state: dict[str, Any]) -> bool:
    """Load a checkpoint's weights, optimizer, schedule, env state, self-play pool and snapshot into a built
    pipeline.

    Returns True when the run continues exactly (see :mod:`ppo_td.persist.snapshot`). A run over ranks loads its
    rank's own state from a checkpoint of as many ranks; on another count of ranks (:func:`ranks_changed` says why)
    the weights, optimizer, schedule and normalizer statistics go on and the episodes start fresh.
    """
    check_compatible(state, pipeline.description)
    saved = state.get("ranks")
    if ranks_changed(pipeline, state):
        state = {**state, "env_state": _fitting(pipeline.env.state_dict(), state["env_state"])}
    elif saved:
        state = {**state, **saved[pipeline.ranks.rank]}
    value_norm = getattr(pipeline.advantage, "value_norm", None)
    if (value_norm is None) != (state.get("value_norm") is None):  # the critic's outputs are in the statistics' units
        raise ValueError(f"the checkpoint was trained with loss.normalize_values={state.get('value_norm') is not None} "
                         f"and this pipeline has {value_norm is not None}: its critic's outputs would be read in other "
                         "units. Build the pipeline from the checkpoint's config (ppo_td.persist.checkpoint_config)")
    load_weights(pipeline.actor, state, "actor")
    load_weights(pipeline.critic, state, "critic")
    pipeline.optimizer.load_state_dict(state["optimizer"])
    pipeline.scheduler.load_state_dict(state["scheduler"])
    # a transform's own state (torch's extra state: the gSDE noise schedule) that a checkpoint from before it had
    # is missing there: this env's fresh one stands in (that resume starts fresh episodes anyway)
    fresh = {k: v for k, v in pipeline.env.state_dict().items() if k.endswith("_extra_state")}
    pipeline.env.load_state_dict({**fresh, **state["env_state"]})
    if value_norm is not None:
        value_norm.load_state_dict(state["value_norm"])
    if pipeline.selfplay is not None:  # self-play's pool as it was (a checkpoint without one: the pool starts anew)
        if state.get("selfplay") is None:
            raise ValueError("the checkpoint has no self-play pool and this pipeline plays env.opponent='self': build "
                             "the pipeline from the checkpoint's config (ppo_td.persist.checkpoint_config)")
        pipeline.selfplay.load_state_dict(state["selfplay"])
    if ranks_changed(pipeline, state):
        exact = False  # the snapshot is of another split of the env copies: fresh episodes
    else:
        exact = restore_snapshot(pipeline, state["snapshot"])
    if pipeline.ranks is not None:  # every rank holds the checkpoint's statistics: each counts its additions from them
        pipeline.synced = [t.moments() for t in running_moments(pipeline.env)]
    push_to_workers(pipeline.collector, pipeline.env)  # worker collectors: the restored weights and statistics
    return exact


def ranks_changed(pipeline: Pipeline, state: dict[str, Any]) -> str:
    """Why the checkpoint's split of the run over ranks is not this pipeline's ("" when it is the same)."""
    saved = len(state.get("ranks") or ()) or 1
    if saved == pipeline.world:
        return ""
    return (f"the run was checkpointed on {saved} rank{'s' if saved > 1 else ''} and continues on {pipeline.world}: "
            "each rank's env copies and random numbers belong to the split they were saved with; the weights, "
            "optimizer, schedule and normalization statistics go on, the episodes start fresh")


def _fitting(fresh: dict[str, torch.Tensor], saved: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The saved env state where it fits this env; a per-copy entry of another count of copies (a return scaler's
    running returns) this env's fresh one."""
    return {k: saved[k] if k in saved and saved[k].shape == v.shape else v for k, v in fresh.items()}


def load_actor(path: str | os.PathLike) -> tuple[TrainConfig, TensorDictModule, dict[str, Any] | None]:
    """Config, trained actor and observation statistics of a checkpoint, checked against a fresh env.

    Pass the statistics to :func:`ppo_td.evaluation.evaluate` (``obs_stats``); :func:`load_for_evaluation` adds
    the states of the user's transforms.
    """
    return load_for_evaluation(path)[:3]


class ForEvaluation(NamedTuple):
    """What :func:`load_for_evaluation` returns: what :func:`ppo_td.training.evaluate` takes."""

    config: TrainConfig
    actor: TensorDictModule
    obs_stats: dict[str, Any] | None
    transform_states: list[dict[str, Any]]
    """``state_dict()`` of each of the user's transforms evaluation applies (``env.transforms``), in order."""


def load_for_evaluation(path: str | os.PathLike) -> ForEvaluation:
    """Config, trained actor, observation statistics and the user's transforms' states of a checkpoint, checked
    against a fresh env (built with ``env.transforms``, without ``env.train_transforms``)."""
    state = load_checkpoint(path)
    config = checkpoint_config(state)
    built = build_env(dataclasses.replace(runnable_here(config.env), num_envs=1))
    try:
        check_compatible(state, built.description)
        actor, _ = make_actor_critic(built.description, config.model)
    finally:
        built.close()
    load_weights(actor, state, "actor")
    return ForEvaluation(config, actor, state["obs_stats"], state.get("transform_states", []))


class Resumed(NamedTuple):
    """What :func:`resume_pipeline` returns."""

    pipeline: Pipeline
    frames: int
    iteration: int
    exact: bool
    """True when the run continues with the very batches the uninterrupted run would have collected; False when it
    continues from the last completed iteration with fresh episodes (see :mod:`ppo_td.persist.snapshot`)."""
    elapsed: float = 0.0
    """Training seconds before the checkpoint (pass to :func:`ppo_td.training.run` as ``elapsed``)."""
    why: str = ""
    """Why the resume is not exact ("" when it is)."""

    def describe(self) -> str:
        """One line for the user: where the run continues and whether exactly."""
        how = ("exactly: the same batches as an uninterrupted run" if self.exact else
               f"from the last completed iteration with fresh episodes: {self.why}")
        return f"at iteration {self.iteration} ({self.frames} frames), {how}"


def resume_pipeline(path: str | os.PathLike, collector: dict[str, Any] | None = None,
                    device: str | None = None, threads: int | None = None) -> Resumed:
    """Rebuild a run's pipeline from its checkpoint, ready to continue: a :class:`Resumed`.

    ``collector`` changes where collection runs (``CollectorConfig`` fields such as
    ``backend`` or ``num_workers``) and ``device`` where the networks run (a GPU run resumed on a
    machine without one), ``threads`` torch's threads (chosen as a new run chooses them when None); everything
    else comes from the checkpoint. Pass the
    result to :func:`ppo_td.training.run` with ``frames`` and ``iteration``.
    """
    state = load_checkpoint(path)
    config = checkpoint_config(state)
    changes: dict[str, Any] = {}
    if collector:
        changes["collector"] = dataclasses.replace(config.collector, **collector)
    if device is not None:
        changes["device"] = device
    config = dataclasses.replace(config, **changes)  # together: a GPU run moving to workers also moves to the CPU
    budget = config.num_iterations * config.frames_per_batch
    if state["frames"] >= budget:
        raise ValueError(f"{path} is at {state['frames']} of {budget} frames: the run is complete, nothing to resume")
    if state.get("ended_early"):
        raise ValueError(f"{path}: the run is complete ({state['ended_early']}), nothing to resume")
    ranks = launched()  # on the ranks torchrun started: this rank's share of the env copies and collector
    local = config if ranks is None else ranks.local_config(config)
    env = make_train_env(local)
    check_compatible(state, env.description)
    where = run_device(config, env.description, env.env.device)
    where = ranks.run_device(where) if ranks is not None else where
    graphless = config.cudagraphs and where.type != "cuda"  # CUDA graphs are CUDA's: a run moved off it goes on
    if graphless:  # without them (a move is not exact anyway: inexact_reason), and says so
        config = dataclasses.replace(config, cudagraphs=False)
        local = config if ranks is None else ranks.local_config(config)
    actor, critic = make_actor_critic(env.description, config.model, device=where)
    # a recurrent model's states, a gSDE actor's noise matrices (the snapshot restores them), before the collector
    # plans its steps
    add_policy_inputs(env.env, actor, critic, noise_every(config))
    threads = choose_threads(threads, env.description)
    # compile='auto' goes on as the run started (recorded in its snapshot) where it goes on in one process on the same
    # kind of device; else (a checkpoint from before that too) resolved here; for the collector the pipeline is given
    one = not config.env.multiagent and env.description.group is None and not env.description.teams
    loss = make_loss(actor, critic, config.loss) if one else None
    snapshot = _own_snapshot(state, ranks)
    if (config.compile == "auto" and loss is not None and ranks is None and snapshot.get("compiled") is not None
            and snapshot.get("device", "cpu") == where.type):
        compiled = snapshot["compiled"]
    else:
        compiled = (compiles(config, where, ranks, loss, is_recurrent(actor) or is_recurrent(critic))
                    if loss is not None else config.compile is True)
    lost = compiled and config.compile == "auto" and compile_problem()  # compiled, and torch.compile fails here
    compiled = compiled and not lost
    with using_threads(threads):  # worker processes take the count in force when they start
        collector_ = make_collector(env, actor, dataclasses.replace(local, compile=compiled),
                                    done_frames=state["frames"] // (ranks.world if ranks else 1), critic=critic,
                                    device=where)
    try:
        pipeline = build_pipeline(config, env=env, actor=actor, critic=critic, collector=collector_, loss=loss,
                                  threads=threads, ranks=ranks)
        pipeline.compiled = compiled  # (the run's own choice, where build_pipeline would choose anew)
        exact = restore(pipeline, state)
    except BaseException:
        shutdown(collector_)  # worker processes or a Ray instance may already be running
        raise
    why = "" if exact else ranks_changed(pipeline, state) or inexact_reason(pipeline, _own(pipeline, state))
    if exact and lost:
        exact, why = False, (f"the run compiled its update and torch.compile fails here ({lost}): it goes on eager, "
                             "within float rounding of compiled, not bit for bit")
    if graphless:  # (compiled without graphs: within float rounding of the replayed graphs, not bit for bit)
        dropped = f"it goes on without CUDA graphs (cudagraphs=False) on {where.type}"
        exact, why = False, f"{why}; {dropped}" if why else dropped
    resumed = Resumed(pipeline, state["frames"], state["iteration"], exact, float(state.get("elapsed", 0.0)), why)
    logging.getLogger("ppo_td").info("resumed %s", resumed.describe())
    return resumed


def _own(pipeline: Pipeline, state: dict[str, Any]) -> dict[str, Any]:
    """This rank's snapshot in the checkpoint (rank 0's for one process)."""
    return _own_snapshot(state, pipeline.ranks)


def _own_snapshot(state: dict[str, Any], ranks: Any) -> dict[str, Any]:
    saved = state.get("ranks")
    return saved[ranks.rank]["snapshot"] if saved and ranks is not None else state["snapshot"]


def _iteration_of(path: Path) -> int:
    """The iteration number of ``checkpoints/iter_N.pt`` (any number of digits)."""
    return int(path.stem.partition("_")[2])


class Checkpointer:
    """Training callback: checkpoint every ``every`` iterations, keep the last ``keep``, stop on request.

    Writes ``<run_dir>/checkpoints/iter_NNNNNN.pt`` and points ``<run_dir>/checkpoint.pt``
    at the newest (a hard link swapped in atomically). After :meth:`request_stop`
    (e.g. from a SIGINT handler) the next iteration end writes a checkpoint and
    raises :class:`~ppo_td.training.StopTraining`.
    """

    def __init__(self, run_dir: str | os.PathLike, every: int, keep: int, run_id: str | None = None,
                 write: bool = True) -> None:
        if every < 0 or keep < 1:
            raise ValueError(f"checkpoint every={every} must be >= 0 (0: only at the end) and keep={keep} >= 1")
        self.run_dir, self.every, self.keep, self.run_id = Path(run_dir), every, keep, run_id
        self.write = write
        """False on the ranks other than 0 of a run over several: each gives its own state to rank 0's checkpoints
        (:func:`rank_states`), and writes nothing."""
        self.stop_requested = False
        for folder in (self.run_dir, self.run_dir / "checkpoints") if write else ():  # left by a run killed mid-write
            remove_stale_temporaries(folder)

    def request_stop(self) -> None:
        self.stop_requested = True

    def __call__(self, metrics: dict[str, Any], pipeline: Pipeline) -> None:
        due = self.every and metrics["iteration"] % self.every == 0
        if due or self.stop_requested:
            self.save(pipeline, metrics["frames"], metrics["iteration"], metrics["time"])
        if self.stop_requested:
            raise StopTraining

    def save(self, pipeline: Pipeline, frames: int, iteration: int, elapsed: float = 0.0,
             ended_early: str = "") -> Path:
        """``checkpoints/iter_N.pt``, and ``checkpoint.pt`` pointed at it; the oldest beyond ``keep`` removed. Over
        ranks, every rank calls it (their states go into rank 0's file)."""
        folder = self.run_dir / "checkpoints"
        ranks = rank_states(pipeline)
        if not self.write:
            return self.run_dir / "checkpoint.pt"
        path = save_checkpoint(folder / f"iter_{iteration:06d}.pt", pipeline, frames=frames, iteration=iteration,
                               elapsed=elapsed, run_id=self.run_id, ended_early=ended_early, ranks=ranks)
        link = folder / f".latest.{os.getpid()}.tmp"
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, self.run_dir / "checkpoint.pt")
        numbered = [p for p in folder.glob("iter_*.pt") if p.stem.partition("_")[2].isdigit()]
        for old in sorted(numbered, key=_iteration_of)[: -self.keep]:  # by number: iter_1000000 is newer
            old.unlink()
        return path

    def save_best(self, pipeline: Pipeline, metrics: dict[str, Any], evaluation: dict[str, Any]) -> Path:
        """``best.pt``: a checkpoint of the iteration whose evaluation scored best so far (``evaluation``: its
        numbers, kept in the file), replacing the one before atomically."""
        return save_checkpoint(self.run_dir / BEST, pipeline, frames=int(metrics["frames"]),
                               iteration=int(metrics["iteration"]), elapsed=float(metrics["time"]),
                               run_id=self.run_id, evaluation=evaluation)
