"""The one training loop: collect, advantages, epochs x minibatches, step, log."""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.modules import set_recurrent_mode
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.common import AUTO_LOSS_MASK_KEYS

from ppo_td import keys
from ppo_td.collect import WorkerError, batches, gather_statistics, push_to_workers, shutdown
from ppo_td.config import TrainConfig
from ppo_td.envs.info import episode_infos, recorded
from ppo_td.training.callbacks import StopTraining, iteration_hook
from ppo_td.training.evaluation import Evaluation, evaluate_on, evaluation_seed, final_evaluations
from ppo_td.training.objective import (
    FastLoss,
    LeanTerms,
    PPOObjective,
    TeamLoss,
    advantage_sums,
    epoch_metrics,
    explained_variance,
    kl_k3,
    lean_of,
    total_loss,
)
from ppo_td.training.pipeline import Pipeline, build_pipeline, compiler_signal, error_line
from ppo_td.training.ranks import Ranks
from ppo_td.training.schedules import KLAdaptiveLR
from ppo_td.training.threads import using_threads

Callback = Callable[[dict[str, Any], Pipeline], None]
"""A function called after every iteration; objects with hooks are described in :mod:`ppo_td.training.callbacks`."""

# loss-output key -> metric name; averaged over the minibatches of an update
_LOSS_METRICS = {
    "loss_objective": "loss_policy",
    "loss_critic": "loss_value",
    "loss_entropy": "loss_entropy",
    "entropy": "entropy",
    "kl_approx": "kl_k1",
    "kl_approx_k3": "kl_k3",
    "clip_fraction": "clip_fraction",
    "value_clip_fraction": "value_clip_fraction",
    "loss_mirror": "loss_mirror",
}


class NonFiniteError(RuntimeError):
    """A loss, gradient or parameter became NaN/inf; the update stopped there (nothing non-finite is kept)."""


HISTORY_WINDOW = 1_000
"""Iterations and episodes a :class:`TrainResult` keeps in memory (the newest); the run folder has them all."""


class Recent(list):
    """A list that keeps only its newest ``window`` items (between ``window`` and ``2 * window`` of them: it
    trims in one step when it reaches twice the window, so appends stay cheap). A run of days keeps bounded
    memory; the whole history is on disk (``metrics.csv``, ``episodes.csv``)."""

    def __init__(self, items: Any = (), window: int = HISTORY_WINDOW) -> None:
        super().__init__(items)
        self.window = window
        self._trim()

    def append(self, item: Any) -> None:
        super().append(item)
        self._trim()

    def extend(self, items: Any) -> None:
        super().extend(items)
        self._trim()

    def _trim(self) -> None:
        if len(self) >= 2 * self.window:
            del self[: len(self) - self.window]


@dataclass
class TrainResult:
    """What :func:`train` returns: the trained modules, the newest metric rows and episodes (up to
    :data:`HISTORY_WINDOW` of each, see :class:`Recent`) and the evaluation returns.
    """

    actor: TensorDictModule
    critic: TensorDictModule
    pipeline: Pipeline
    history: list[dict[str, Any]] = field(default_factory=Recent)
    episodes: list[dict[str, float]] = field(default_factory=Recent)
    eval_returns: list[float] = field(default_factory=list)
    """Returns of the final deterministic evaluation episodes (the policy's mode) that ended."""
    eval_returns_sampled: list[float] = field(default_factory=list)
    """Returns of the final evaluation episodes with actions sampled from the policy, as in training, that ended."""
    evaluation: Evaluation | None = None
    """The final deterministic evaluation whole: with its episodes cut at the step cap, if any."""
    evaluation_sampled: Evaluation | None = None
    """The final sampled evaluation whole."""
    stopped: bool = False
    """True when training stopped before its budget to be continued (a callback's :class:`StopTraining`, an
    interrupt): no final evaluation runs, and the run folder's checkpoint resumes it."""
    ended_early: str = ""
    """Why a callback ended the run as complete before its budget (``StopTraining(complete=True)``, e.g. an
    evaluation reaching ``eval_stop_return``); "" otherwise. The final evaluation runs then."""
    best: Any = None
    """With ``eval_every``: the best evaluation during training and its policy (:class:`ppo_td.experiment.Best`);
    None without evaluations."""

    def record_evaluations(self, deterministic: Evaluation, sampled: Evaluation) -> None:
        """Keep the final evaluations (and their ended episodes' returns in ``eval_returns*``)."""
        self.evaluation, self.evaluation_sampled = deterministic, sampled
        self.eval_returns, self.eval_returns_sampled = deterministic.returns, sampled.returns


def train(config: TrainConfig, *, callbacks: Sequence[Callback] = (), threads: int | None = None,
          **parts: Any) -> TrainResult:
    """Train PPO with ``config``. Any part may be passed in to replace the default.

    Args:
        config: the run's :class:`TrainConfig` (see :mod:`ppo_td.presets`).
        callbacks: called as ``callback(metrics, pipeline)`` after every iteration.
        threads: torch threads while it trains (None: chosen as ``ppo-td train`` chooses, see
            :mod:`ppo_td.training.threads`; a count set before with ``torch.set_num_threads`` is kept).
        **parts: ``env``, ``actor``, ``critic``, ``collector``, ``buffer``,
            ``advantage``, ``loss``, ``optimizer`` (see :func:`build_pipeline`).

    Returns:
        :class:`TrainResult` with the actor, critic, metric history, episodes and
        the returns of ``config.eval_episodes`` deterministic and as many sampled evaluation episodes.

    Example:
        >>> result = train(get_preset("cartpole"))
        >>> sum(result.eval_returns) / len(result.eval_returns)
    """
    pipeline = build_pipeline(config, threads=threads, **parts)
    return run(pipeline, callbacks=callbacks)


def run(pipeline: Pipeline, callbacks: Sequence[Callback] = (), frames: int = 0, iteration: int = 0,
        elapsed: float = 0.0, evaluate_at_end: bool = True) -> TrainResult:
    """Run the loop on a built :class:`Pipeline`.

    ``frames``, ``iteration`` and ``elapsed`` (training seconds so far) continue a resumed run: the
    ``time`` metric goes on from ``elapsed``. ``evaluate_at_end=False`` leaves the final evaluation to the
    caller (the CLI checkpoints first, so a failing evaluation loses nothing). Runs with the pipeline's torch
    threads (:attr:`Pipeline.threads`) and puts back the count it found.
    """
    with using_threads(pipeline.threads):
        return _run(pipeline, callbacks, frames, iteration, elapsed, evaluate_at_end)


def _run(pipeline: Pipeline, callbacks: Sequence[Callback], frames: int, iteration: int, elapsed: float,
         evaluate_at_end: bool) -> TrainResult:
    p, cfg = pipeline, pipeline.config
    result = TrainResult(actor=p.actor, critic=p.critic, pipeline=p)
    each_iteration = [hook for hook in map(iteration_hook, callbacks) if hook is not None]
    start = last = time.perf_counter()
    start_frames = frames
    try:
        playing = p.selfplay.playing if p.selfplay is not None else contextlib.nullcontext
        for batch in batches(p.collector, playing):  # a dead worker surfaces as WorkerError
            collected = time.perf_counter()
            gather_statistics(p.collector, p.env)  # worker collectors: their normalization data, merged
            if p.ranks is not None:  # every rank's, merged: every rank normalizes alike
                p.synced = p.ranks.merge_statistics(p.env, p.synced)
            if p.device.type != "cpu" or batch.device not in (None, torch.device("cpu")):  # GAE and the update
                # run on the networks' device: a batch collected elsewhere (the CPU, a VMAS GPU) moves there once
                batch = batch.to(p.device)  # blocking: the CPU batch is released at once (a non-blocking MPS copy
                # of a freed source can read garbage)
            iteration += 1
            frames += batch.numel() * p.world  # the whole run's: every rank collects as many
            estimating = time.perf_counter()
            with torch.no_grad():
                p.advantage(batch)  # on [env, time], before flattening
            if p.device.type == "cuda":  # the estimator's kernels, done: its seconds, not the update's
                torch.cuda.synchronize(p.device)
            advantaged = time.perf_counter()  # (its seconds apart: SB3 counts its GAE and value pass in collection)
            metrics: dict[str, Any] = {"iteration": iteration, "frames": frames,
                                       "lr": p.optimizer.param_groups[0]["lr"]}
            metrics.update(_episode_stats(batch, iteration, frames, result.episodes, p.description.group,
                                          p.groups, p.config.env.info_keys, p.ranks))
            if p.groups:  # several agent groups: each group's own, and their mean (team self-play: the learning one's)
                explained = {f"explained_variance/{g}": explained_variance(batch, g) for g in p.groups
                             if (g, keys.VALUE_TARGET) in batch.keys(True)}
                metrics["explained_variance"] = sum(explained.values()) / len(explained)
                metrics.update(explained)
            else:
                metrics["explained_variance"] = explained_variance(batch, p.description.group)
            try:
                metrics.update(update(p, batch))
            except NonFiniteError as err:
                raise NonFiniteError(f"iteration {iteration} ({frames} frames): {err}") from err
            if p.ranks is not None:  # the loss diagnostics and explained variance: the mean of the ranks' values
                averaged = [k for k, v in metrics.items() if k.startswith(_RANK_MEANS) and isinstance(v, float)]
                means = p.ranks.mean(torch.tensor([metrics[k] for k in averaged], dtype=torch.float64))
                metrics.update(zip(averaged, means.tolist(), strict=True))
            p.scheduler.step()
            if p.selfplay is not None:  # the opponents: the updated policy, a snapshot at its frames
                metrics.update(p.selfplay.metrics())
                p.selfplay.after_update(frames)
            now = time.perf_counter()
            metrics.update(time=elapsed + now - start, sps=(frames - start_frames) / (now - start),
                           collect_seconds=collected - last, collect_sps=batch.numel() / (collected - last),
                           update_seconds=now - collected, advantage_seconds=advantaged - estimating)
            stop = _call(each_iteration, metrics, p)
            if p.ranks is not None:  # one decision for every rank: any rank's stop (a signal, a callback) ends all
                stop = _agreed(p, stop)
            # kept without the episode list (result.episodes has them): one row per iteration, bounded
            result.history.append({k: v for k, v in metrics.items() if k != "ended_episodes"})
            if stop is not None:
                result.stopped, result.ended_early = not stop.complete, _why(stop) if stop.complete else ""
                break
            last = time.perf_counter()
            push_to_workers(p.collector, p.env)  # worker collectors: new weights and merged statistics
            if frames >= cfg.num_iterations * cfg.frames_per_batch:
                break  # the plan is done (a collector over an env ppo_td cannot rebuild has one batch more)
        if cfg.eval_episodes and evaluate_at_end and not p.rebuildable and not result.stopped and p.main:
            result.record_evaluations(  # a TorchRL env ppo_td cannot rebuild: evaluated on itself, before it is closed
                *(evaluate_on(p.actor, p.env, cfg.eval_episodes, seed=evaluation_seed(cfg.seed), sampled=sampled,
                              max_steps=cfg.eval_max_steps) for sampled in (False, True)))
    except WorkerError as err:
        err.frames, err.iteration = frames, iteration  # the last completed iteration: intact in the pipeline
        err.elapsed = result.history[-1]["time"] if result.history else elapsed  # its training seconds
        raise
    finally:
        shutdown(p.collector)
    if cfg.eval_episodes and not result.stopped and evaluate_at_end and p.rebuildable and p.main:  # rank 0's
        result.record_evaluations(*final_evaluations(p))
    return result


def _call(hooks: Sequence[Callback], metrics: dict[str, Any], p: Pipeline) -> StopTraining | None:
    """Call each hook with the iteration's row; a :class:`StopTraining` from one is returned (the first), after the
    others are called too (so the row is logged and checkpointed)."""
    stop = None
    for hook in hooks:
        try:
            hook(metrics, p)
        except StopTraining as err:
            stop = stop or err
    return stop


_RANK_MEANS = (*_LOSS_METRICS.values(), "explained_variance")
"""Metrics each rank computes on its own part of the batch, reported as their mean over the ranks. ``grad_norm`` is not
among them: it is the norm of the averaged gradient, the same on every rank."""


def _agreed(p: Pipeline, stop: StopTraining | None) -> StopTraining | None:
    """The stop every rank takes: the largest any rank asked for (continue < stop to be resumed < stop as done)."""
    decided = p.ranks.agree_stop(stop, stop is not None and stop.complete)
    if decided == 0:
        return None
    if stop is not None and stop.complete == (decided == 2):
        return stop
    return StopTraining("another rank ended the run" if decided == 2 else "", complete=decided == 2)


def _why(stop: StopTraining) -> str:
    return stop.reason or "a callback ended the run (StopTraining(complete=True))"


def update(p: Pipeline, batch: TensorDictBase) -> dict[str, float]:
    """PPO update on one batch: ``update_epochs`` passes of ``num_minibatches`` minibatches.

    Stops after an epoch whose mean k3 approx-KL exceeds ``optim.target_kl`` (if set). With ``optim.desired_kl``
    the learning rate adapts to each minibatch's k3 approx-KL before its step, or to each epoch's mean after it
    (``optim.kl_lr_every``; over ranks, the KL of the whole minibatch or batch).
    Returns the update's metrics averaged over its minibatches.
    """
    opt = p.config.optim
    adaptive = p.scheduler if isinstance(p.scheduler, KLAdaptiveLR) else None
    each_minibatch = adaptive is not None and opt.kl_lr_every == "minibatch"
    each_epoch = adaptive is not None and opt.kl_lr_every == "epoch"
    params = p.parameters
    p.buffer.empty()
    data = _loss_data(p, batch)
    if p.sequence_length is None:
        with _storage_quiet():
            p.buffer.extend(data.reshape(-1))
        size = p.config.minibatch_size // p.world  # over ranks: each holds its share of every minibatch
    else:  # each env's row cut into sequences; minibatches of whole sequences, replayed in recurrent mode
        with _storage_quiet():
            p.buffer.extend(sequences(data, p.sequence_length))
        size = p.config.num_sequences // p.world // opt.num_minibatches
    replay = set_recurrent_mode(p.sequence_length is not None)
    # ppo_td's own loss: the loss terms only, each minibatch; their diagnostics together (epoch_metrics) once an
    # update, or once an epoch where target_kl reads them (not when the loss object's forward was replaced: the
    # replacement runs)
    lean = lean_of(p.loss)
    records: list[dict[str, torch.Tensor]] = []
    pending: list[tuple[LeanTerms, torch.Tensor]] = []
    epochs = 0
    minibatches: Sequence[TensorDictBase] = ()
    once = False
    for _ in range(opt.update_epochs):
        # one draw per epoch: a fresh permutation of the whole batch, cut into minibatches (the same minibatches as
        # num_minibatches draws, at a quarter of the buffer overhead); optim.shuffle='update': one draw an update,
        # its minibatches taken again by every epoch (rsl_rl's)
        if not minibatches or (opt.shuffle == "epoch" and not once):
            drawn = p.buffer.sample()
            # one minibatch: the draw itself, not a split of it (TensorDict.split costs about 0.2 ms even for one)
            minibatches = (drawn,) if drawn.shape[0] <= size else drawn.split(size)
            # an epoch of one minibatch (RL Zoo's MountainCarContinuous and CartPole entries) that is the whole batch
            # in a new order: nothing it computes depends on the order (means over its samples, its advantages'
            # normalization) but the float order of their sums, so it is drawn once an update (each draw 0.15-0.2 ms,
            # a tenth of such an update on 8-frame batches); a buffer that draws otherwise draws every epoch
            once = len(minibatches) == 1 and drawn.shape[0] == len(p.buffer) and _reorders_only(p.buffer)
        _sum_advantages(p, minibatches)
        if epochs == 0:  # every minibatch of the update has the same entries, and the loss the same settings
            lean_here = lean is not None and lean.applies(minibatches[0])
            terms_of = _compiled_or_eager(p, lean, minibatches[0], params) if lean_here and p.compiled \
                else lean.terms if lean_here else None
        for minibatch in minibatches:
            terms: LeanTerms | None = None
            try:
                with replay:
                    if terms_of is not None:
                        loss, terms = terms_of(minibatch)
                    else:
                        losses = p.loss(minibatch)
                        loss = total_loss(losses)
            except RuntimeError:  # e.g. a distribution refusing NaN parameters: name the overflowed parameter
                _check_parameters(p, params, epochs)
                raise
            _drop_gradients(p)
            finite = math.isfinite(loss.item())  # a float: a third of torch.isfinite's cost on a scalar
            if not finite and p.ranks is None:
                _non_finite_loss(p, params, epochs, terms.losses if terms is not None else losses)
            kl = _minibatch_kl(terms, None if terms is not None else losses) if each_minibatch else None
            loss.backward()
            if p.ranks is not None:  # the mean gradient of the whole minibatch; a rank's non-finite loss stops all
                failed, kl = p.ranks.average_gradients(params, failed=not finite, mean_of=kl)
                if not finite:
                    _non_finite_loss(p, params, epochs, terms.losses if terms is not None else losses)
                if failed:
                    raise NonFiniteError(f"non-finite loss in epoch {epochs + 1} on {failed} of {p.world} ranks")
            grad_norm = _clip_gradients(p, params, opt.max_grad_norm)
            if not math.isfinite(grad_norm):
                _check_parameters(p, params, epochs)
                raise NonFiniteError(f"non-finite gradient norm {float(grad_norm)} in epoch {epochs + 1}; "
                                     "the optimizer step was not taken")
            if kl is not None:  # rsl_rl's order: the rate this minibatch's KL gives takes this step
                adaptive.adapt(float(kl))
            p.optimizer.step()
            if terms is not None:
                pending.append((terms, grad_norm))
                continue
            outputs = dict(losses.items())  # one pass over the TensorDict, not a lookup per metric
            record = {name: outputs[key].detach() for key, name in _LOSS_METRICS.items() if key in outputs}
            record["grad_norm"] = grad_norm
            for group, out in (outputs["groups"].items() if "groups" in outputs else ()):  # several groups' own
                record.update({f"{name}/{group}": out.get(key) for key, name in _LOSS_METRICS.items()
                               if key in out.keys()})
            records.append(record)
        epochs += 1
        if opt.target_kl is not None or each_epoch:
            records += _lean_records(p, pending)
            pending = []
            epoch_kl = torch.stack([_kl_of(r) for r in records[-len(minibatches):]]).mean()
            if p.ranks is not None:  # the whole batch's: every rank stops at the same epoch, adapts alike
                epoch_kl = p.ranks.mean(epoch_kl)
            if each_epoch:
                adaptive.adapt(float(epoch_kl))
            if opt.target_kl is not None and epoch_kl > opt.target_kl:
                break
    records += _lean_records(p, pending)
    if p.config.cudagraphs:  # the last backward's gradients are a CUDA graph's memory, which its next replay rewrites
        _drop_gradients(p)
    _check_parameters(p, params, epochs - 1)  # the last step's parameters; earlier ones fed a finite loss
    out = {name: float(torch.stack([r[name] for r in records]).float().mean()) for name in records[0]}
    out["epochs"] = epochs
    return out


def _drop_gradients(p: Pipeline) -> None:
    """Every optimized parameter's ``.grad`` set to None: ``zero_grad(set_to_none=True)`` without its profiler wrapper
    (3 us instead of 20 a minibatch). With cudagraphs required, not only faster: a replayed backward's gradients are
    the graph's memory, which accumulating into (or zeroing in place) would double or corrupt."""
    for group in p.optimizer.param_groups:
        for param in group["params"]:
            param.grad = None


def _reorders_only(buffer: Any) -> bool:
    """Whether each of ``buffer``'s draws of its whole content is that content in a new order: sampled without
    replacement (ppo_td's buffer, :func:`~ppo_td.training.pipeline.make_buffer`), no transform (a user's buffer may
    resample with replacement, weigh its items or augment them at each draw)."""
    return type(buffer.sampler) is SamplerWithoutReplacement and not len(buffer.transform)


def _compiled_or_eager(p: Pipeline, lean: FastLoss, minibatch: TensorDictBase, params: list[torch.Tensor]) -> Any:
    """The compiled loss terms; with ``compile='auto'``, its first minibatch tried first, forward and backward (both
    compile then), the gradients and random numbers put back as they were: where compiling fails, the run goes on
    eager from here (``p.compiled`` False, so its checkpoints say so), said in one line, instead of stopping. A
    compiler that a signal stopped (a terminal's Ctrl-C reaches it too) is said as such, not as a failure of compiling:
    torch keeps the cut kernel as failed for the process, so the run goes on eager there too."""
    compiled = lean.compiled_terms(p.device, cudagraphs=p.config.cudagraphs)
    if p.config.compile != "auto" or lean.compile_tried:
        return compiled
    lean.compile_tried = True
    rng = torch.get_rng_state()
    try:
        compiled(minibatch)[0].backward()
    except Exception as err:  # noqa: BLE001 (whichever way compiling fails, eager computes the same within rounding)
        stopped = compiler_signal(err)
        if stopped is None:
            logging.getLogger("ppo_td").warning("compile='auto': compiling the loss failed (%s); the run goes on "
                                                "eager (compile=False silences this)", error_line(err))
        else:  # (torch keeps the cut kernel as failed in this process: compiling again fails the same way)
            logging.getLogger("ppo_td").warning(
                "compile='auto': %s stopped the C++ compiler while it compiled the loss (a terminal's Ctrl-C reaches "
                "it too); the run goes on eager, and so does its resume (a new run compiles)",
                signal.Signals(stopped).name)
        p.compiled = False
        return lean.terms
    finally:
        torch.set_rng_state(rng)
        for param in params:
            param.grad = None
    return compiled


def _minibatch_kl(terms: LeanTerms | None, losses: Any) -> torch.Tensor:
    """A minibatch's k3 approx-KL (detached) from its loss terms (ppo_td's lean path) or its loss outputs."""
    if terms is not None:
        log_weight = terms.log_weight.detach()
        return kl_k3(log_weight.exp().mean(), (-log_weight).mean())
    if "kl_approx_k3" not in losses.keys():
        raise ValueError(_NO_K3)
    return losses.get("kl_approx_k3").detach()


def _kl_of(record: dict[str, torch.Tensor]) -> torch.Tensor:
    if "kl_k3" not in record:
        raise ValueError(_NO_K3)
    return record["kl_k3"]


_NO_K3 = ("optim.target_kl and optim.desired_kl read each minibatch's k3 approx-KL ('kl_approx_k3'), which this "
          "loss does not write: use ppo_td's loss (the default), or write 'kl_approx_k3' from the loss's forward")


def _sum_advantages(p: Pipeline, minibatches: Sequence[TensorDictBase]) -> None:
    """Over ranks, with ppo_td's loss normalizing advantages: every minibatch's advantage sums of this epoch summed
    over the ranks in one all-reduce (not one a minibatch), and handed to the loss minibatch by minibatch."""
    loss = p.loss
    if p.ranks is None or not isinstance(loss, PPOObjective) or not loss.normalize_advantage_per_minibatch:
        return
    key = loss.tensor_keys.advantage
    if not all(key in mb.keys() for mb in minibatches):
        loss.across = p.ranks.sum  # the loss estimates them itself (no advantage yet): summed as it asks
        return
    summed = iter(p.ranks.sum(torch.stack([advantage_sums(mb.get(key)) for mb in minibatches])))
    loss.across = lambda local: next(summed)


def _non_finite_loss(p: Pipeline, params: list[torch.Tensor], epochs: int, losses: Any) -> None:
    _check_parameters(p, params, epochs)  # an earlier step that overflowed them is the cause to name
    raise NonFiniteError(f"non-finite loss in epoch {epochs + 1}: "
                         f"{ {k: float(v.detach()) for k, v in losses.items() if k.startswith('loss_')} }")


def _clip_gradients(p: Pipeline, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Clip the gradient norm to ``max_norm``: of all ``params`` together, or, for several agent groups' loss
    (:class:`~ppo_td.training.objective.TeamLoss`), of each group's on its own (one group's large gradient does not
    shrink another's step); with ``optim.grad_clip_scope='each'``, of each set's actor and critic parameters apart
    (rsl_rl's); returns the norm before clipping (the sets' together)."""
    sets = p.loss.parameter_sets() if isinstance(p.loss, TeamLoss) else [params]
    if p.config.optim.grad_clip_scope == "each":
        actor = {id(t) for t in p.actor.parameters()}
        sets = [part for group in sets for part in ([t for t in group if id(t) in actor],
                                                    [t for t in group if id(t) not in actor]) if part]
    norms = [torch.nn.utils.clip_grad_norm_(group, max_norm) for group in sets]
    return norms[0] if len(norms) == 1 else torch.stack(norms).square().sum().sqrt()


def _lean_records(p: Pipeline, pending: list[tuple[LeanTerms, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
    """The metrics records of minibatches the lean path ran (their diagnostics computed together)."""
    if not pending:
        return []
    outputs = epoch_metrics([t for t, _ in pending], p.loss.clip_epsilon, p.loss.clip_value)
    return [{**{name: out[key] for key, name in _LOSS_METRICS.items() if key in out}, "grad_norm": norm}
            for out, (_, norm) in zip(outputs, pending, strict=True)]


def sequences(batch: TensorDictBase, length: int) -> TensorDictBase:
    """An ``[env, time]`` batch as ``[env * time / length, length]`` sequences, each the consecutive steps of
    one env copy (it stores the recurrent state each step acted from, so each sequence replays from its first)."""
    envs, steps = batch.batch_size
    return batch.rename(None, None).reshape(envs * (steps // length), length)


def _loss_data(p: Pipeline, batch: TensorDictBase) -> TensorDictBase:
    """What the update's minibatches carry, copied into the buffer and out of it every epoch.

    For a ``ClipPPOLoss`` given its advantages: never the next observations (it reads them only to estimate
    advantages the batch lacks, and GAE has written them), which halves an image batch. For ppo_td's own loss
    with the default buffer's sampler: only what the loss reads (its ``in_keys``, the actor's and critic's inputs
    among them, without the next-step ones), the advantage, value target, old value and loss-mask entries; 6
    entries instead of 22 on HalfCheetah. Another loss or sampler may read any other entry: it gets them all.
    """
    loss = p.loss
    if not isinstance(loss, ClipPPOLoss) or loss.tensor_keys.advantage not in batch.keys(True):
        return batch
    if type(loss) is not PPOObjective or type(p.buffer.sampler) is not SamplerWithoutReplacement:
        return batch.exclude(("next", keys.OBSERVATION))
    k = loss.tensor_keys
    mask = loss.loss_mask_key
    masks = (*AUTO_LOSS_MASK_KEYS, *(() if mask in ("auto", None) else (mask,)))  # shifted_valid is always read
    wanted = [key for key in loss.in_keys if not (isinstance(key, tuple) and key[0] == "next")]
    wanted += [k.advantage, k.value_target, k.value, *masks]
    present = batch.keys(True)
    return batch.select(*dict.fromkeys(key for key in wanted if key in present))


def _check_parameters(p: Pipeline, params: list[torch.Tensor], epoch: int) -> None:
    """Raise :class:`NonFiniteError` naming the first non-finite parameter, if any. Checked once per update and
    when a loss or gradient goes non-finite (the step before overflowed the parameters), not per step: a
    non-finite parameter makes the next loss non-finite, so no step goes unnoticed."""
    if _all_finite(params):
        return
    raise NonFiniteError(f"non-finite parameter {_first_non_finite(p)} after an optimizer step in epoch {epoch + 1}; "
                         f"lower optim.lr (now {p.optimizer.param_groups[0]['lr']:.3g}) or optim.max_grad_norm. "
                         "The last checkpoint holds the parameters from before")


def _all_finite(params: list[torch.Tensor]) -> bool:
    """True when no parameter holds a NaN or inf (one synchronization: the largest magnitudes, stacked)."""
    return bool(torch.stack([q.detach().abs().amax() for q in params]).isfinite().all())


def _first_non_finite(p: Pipeline) -> str:
    for prefix, module in (("actor", p.actor), ("critic", p.critic)):
        for name, q in module.named_parameters():
            if not torch.isfinite(q).all():
                return f"{prefix}.{name}"
    return "(not in the actor or critic)"


def _episode_stats(batch: TensorDictBase, iteration: int, frames: int, episodes: list[dict],
                   group: str | None = None, groups: Sequence[str] = (), info_keys: Sequence[str] = (),
                   ranks: Ranks | None = None) -> dict[str, Any]:
    """Mean return/length of the episodes that ended in ``batch``; appends them to ``episodes``. ``group`` (a
    multi-agent env): an episode's return is its reward per agent (the mean of the agents' episode rewards, as
    BenchMARL and TorchRL's MAPPO tutorial report it). ``groups`` (several agent groups): the reward per agent of
    all agents, and each group's own (``episode_return/<group>``, an episode's ``return/<group>``). ``info_keys``
    (``env.info_keys``, and ``is_success`` where the env reported it): each episode's info value at its last step,
    and their mean over the episodes that reported one (NaN where none did). ``ranks`` (a run over several): every
    rank's episodes, in rank order, on every rank.

    The new episodes are also returned under ``ended_episodes`` for callbacks (the run folder's episodes.csv).
    """
    info_keys = recorded(batch, info_keys)  # and is_success, where the env reported it (ppo_td.envs.info)
    ended = _ended(batch, iteration, frames, group, groups, info_keys)
    if ranks is not None:
        ended = [episode for share in ranks.gather(ended, "gathering the episodes") for episode in share]
    if not ended:
        return {"episodes": 0, "episode_return": float("nan"), "episode_length": float("nan"), "ended_episodes": [],
                **{f"episode_return/{g}": float("nan") for g in groups}, **dict.fromkeys(info_keys, float("nan"))}
    episodes.extend(ended)
    return {
        "episodes": len(ended),
        "episode_return": sum(e["return"] for e in ended) / len(ended),
        "episode_length": sum(e["length"] for e in ended) / len(ended),
        "ended_episodes": ended,
        **{f"episode_return/{g}": sum(e[f"return/{g}"] for e in ended) / len(ended) for g in groups
           if f"return/{g}" in ended[0]},
        **{k: _mean_reported([e[k] for e in ended]) for k in info_keys},
    }


def _ended(batch: TensorDictBase, iteration: int, frames: int, group: str | None, groups: Sequence[str],
           info_keys: Sequence[str]) -> list[dict[str, Any]]:
    """The episodes that ended in ``batch``, each a row of episodes.csv (see :func:`_episode_stats`)."""
    done = batch.get(keys.DONE).squeeze(-1)
    per_group = {g: batch.get(("next", g, "episode_reward"), None) for g in groups}
    if groups and all(v is not None for v in per_group.values()):
        returns = torch.cat([v.squeeze(-1) for v in per_group.values()], -1).mean(-1)  # every agent's, [env, time]
        per_group = {g: v.mean(dim=(-2, -1)) for g, v in per_group.items()}
    else:
        returns = batch.get(keys.EPISODE_RETURN if group is None else ("next", group, "episode_reward"), None)
        per_group = {}
        if returns is not None and group is not None:
            returns = returns.mean(dim=(-2, -1))  # [env, time, agents, 1] -> per agent
    lengths = batch.get(keys.EPISODE_LENGTH, None)
    if returns is None or not done.any():
        return []
    infos = episode_infos(batch, done, info_keys)
    ended_returns = returns[done].flatten().tolist()
    ended_lengths = lengths[done].flatten().tolist() if lengths is not None else [float("nan")] * len(ended_returns)
    ended_groups = {g: v[done].flatten().tolist() for g, v in per_group.items()}
    return [{"iteration": iteration, "frames": frames, "return": r, "length": n,
             **{f"return/{g}": v[i] for g, v in ended_groups.items()}, **{k: v[i] for k, v in infos.items()}}
            for i, (r, n) in enumerate(zip(ended_returns, ended_lengths, strict=True))]


def _mean_reported(values: list[float]) -> float:
    """The mean of the values that are not NaN (episodes that reported one); NaN where none did."""
    reported = [v for v in values if not math.isnan(v)]
    return sum(reported) / len(reported) if reported else float("nan")


class _StorageInitFilter(logging.Filter):
    """Drops TorchRL's INFO record of a lazy storage's first allocation (``Initialized LazyTensorStorage with
    torch.Size([...]) shape``): the batch's own size, nothing a user can act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.getMessage().startswith("Initialized Lazy"))


@contextlib.contextmanager
def _storage_quiet():
    """While the buffer is filled: that one TorchRL record dropped; the logger is as it was afterwards."""
    logger, quiet = logging.getLogger("torchrl"), _StorageInitFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
