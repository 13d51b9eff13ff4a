"""Collection in local worker processes or on Ray, on TorchRL's own collectors.

``collector.backend='process'`` builds TorchRL's ``MultiSyncCollector`` and ``'ray'`` its
``RayCollector``. Each worker steps ``env.num_envs / num_workers`` env copies and the
batch keeps the in-process ``[env, time]`` layout, so GAE and truncation handling are
unchanged. After each batch :func:`gather_statistics` merges the workers' normalization
statistics into the learner's; after each update :func:`push_to_workers` sends the new
policy weights and those statistics to all workers; a worker that dies becomes a
:class:`WorkerError` naming it and the cause.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import EnvBase, TransformedEnv

from ppo_td.collect.failures import WorkerError, check_alive, reported_failures, watched
from ppo_td.config import EnvConfig, TrainConfig
from ppo_td.envs import indexed_running_moments, make_env, merge_moments, moments_since
from ppo_td.models.gsde import ExplorationNoise, gsde_head, noise_every
from ppo_td.models.recurrent import MemorySpec, collection_policy, memory_spec, memory_transforms


@dataclasses.dataclass(frozen=True)
class WorkerEnv:
    """Picklable env factory run inside worker ``index``: its share of the copies, seeded apart.

    It also seeds the worker's torch RNG, so action sampling differs between workers
    and repeats from run to run.
    """

    config: EnvConfig
    seed: int
    gamma: float
    index: int
    memory: MemorySpec = ()
    """The recurrent states the policy carries (the env adds InitTracker and their primer)."""
    noise: tuple[tuple[int, int], int] | None = None
    """A gSDE policy's noise matrices: their shape and the steps between draws (the env adds ExplorationNoise)."""

    def __call__(self) -> TransformedEnv:
        torch.manual_seed(self.seed)
        env = make_env(self.config, seed=self.seed, gamma=self.gamma)
        for transform in memory_transforms(self.memory):
            env.append_transform(transform)
        if self.noise is not None:
            env.append_transform(ExplorationNoise(*self.noise))
        return env


def worker_envs(config: TrainConfig, memory: MemorySpec = (),
                noise: tuple[tuple[int, int], int] | None = None) -> list[WorkerEnv]:
    """One factory per worker; worker i's copies get seeds ``seed + i * copies_per_worker + k``, as in-process."""
    n = config.collector.workers
    per = config.env.num_envs // n
    env_config = dataclasses.replace(config.env, num_envs=per)
    return [WorkerEnv(env_config, config.seed + i * per, config.loss.gamma, i, memory, noise) for i in range(n)]


class ReportingCollector(Collector):
    """The collector inside a worker process: writes the exception that ends it to a report file."""

    def __init__(self, *args: Any, report_dir: str, **kwargs: Any) -> None:
        self.report_path = Path(report_dir) / f"worker-{kwargs.get('worker_idx')}.txt"
        super().__init__(*args, **kwargs)

    def iterator(self) -> Iterator[TensorDictBase]:
        try:
            yield from super().iterator()
        except Exception as err:
            self.report_path.write_text(f"{type(err).__name__}: {err}")
            raise


@dataclasses.dataclass
class WorkerCollector:
    """ppo_td's handle on a TorchRL worker collector and what ppo_td keeps beside it.

    ``collector`` is TorchRL's ``MultiSyncCollector`` or ``RayCollector``, used through its
    public API; the rest is what ppo_td needs to name a failed worker and to clean up:
    the workers' report folder and weight-sync scheme (processes), whether ppo_td joined a
    Ray cluster, and each Ray worker's actor and process id (kept: TorchRL empties its list on failure).
    """

    collector: Any
    backend: str
    report_dir: str | None = None
    scheme: Any = None
    ray_connected: bool = False
    actors: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    """Ray only: each worker's (actor id, process id), to name the worker a Ray error comes from."""
    mirror: tuple[nn.Module, nn.Module] | None = None
    """A learner on a GPU: (its policy, the CPU copy the workers were given, built by the same factory on the CPU:
    its distribution's bounds too). Each push copies the learner's weights into the copy (one host transfer), then
    TorchRL sends the copy's to the workers."""

    def ray_worker(self, err: Any) -> int | None:
        """Index of the Ray worker ``err`` (a ``RayActorError`` or ``RayTaskError``) comes from, if known."""
        actor_id, pid = getattr(err, "actor_id", None), getattr(err, "pid", None)
        for index, (known_id, known_pid) in enumerate(self.actors):
            if (actor_id is not None and actor_id == known_id) or (actor_id is None and pid == known_pid):
                return index
        return None

    @property
    def num_workers(self) -> int:
        return self.collector.num_workers

    def __iter__(self) -> Iterator[TensorDictBase]:
        return iter(self.collector)

    def report(self, worker: int) -> str | None:
        """What worker ``worker`` wrote before it died (its exception), if anything."""
        path = Path(self.report_dir) / f"worker-{worker}.txt" if self.report_dir else None
        return path.read_text() if path is not None and path.exists() else None

    def update_policy_weights_(self) -> None:
        if self.mirror is not None:
            source, copy_ = self.mirror
            copy_.load_state_dict(source.state_dict())
        self.collector.update_policy_weights_()

    def shutdown(self) -> None:
        """Stop the workers; never raises (a dead worker must not hide the first error)."""
        try:
            self.collector.shutdown()
        except Exception:  # noqa: BLE001 - best effort: the workers may already be gone
            pass
        # TorchRL 0.14's MultiCollector.shutdown leaves the weight-sync scheme open; its __del__ then starts a
        # queue thread during garbage collection, which deadlocked the process here. ppo_td made it: close it.
        if self.scheme is not None:
            try:
                self.scheme.shutdown()
            except Exception:  # noqa: BLE001
                pass
        if self.report_dir is not None:
            shutil.rmtree(self.report_dir, ignore_errors=True)
        if self.ray_connected:
            import ray

            ray.shutdown()  # disconnects this driver from the cluster; the cluster keeps running


def make_worker_collector(config: TrainConfig, actor: TensorDictModule, total_frames: int,
                          critic: TensorDictModule | None = None,
                          learner: tuple[TensorDictModule, TensorDictModule | None] | None = None) -> WorkerCollector:
    """TorchRL's MultiSyncCollector ('process') or RayCollector ('ray') over :func:`worker_envs`. A recurrent
    ``actor`` (and ``critic``, where it has a state of its own) steps in the workers with its states carried by
    their envs. ``learner``: the learner's actor and critic (on a GPU) when ``actor`` and ``critic`` are CPU copies
    of them (built by the same factory): each push copies the learner's weights into the copies first
    (:attr:`WorkerCollector.mirror`)."""
    c = config.collector
    head = gsde_head(actor)
    noise = None if head is None else (head.noise_shape, noise_every(config))
    envs, policy = worker_envs(config, memory_spec(actor, critic), noise), collection_policy(actor, critic)
    pair = (collection_policy(*learner), policy) if learner is not None else None
    if pair is None and any(q.device.type != "cpu" for q in policy.parameters()):
        raise ValueError("the workers act on the CPU: give make_worker_collector CPU copies of the actor and critic, "
                         "with the learner's as learner= (ppo_td.collect.make_collector does)")
    if config.env.env_id.startswith("__main__:"):
        raise ValueError(f"env {config.env.env_id}: a factory defined in the script or notebook that trains cannot be "
                         "imported by worker processes; move it to a module (e.g. my_envs.py next to the script) "
                         "or use collector.backend='inprocess'")
    common = dict(frames_per_batch=config.frames_per_batch, total_frames=total_frames, sync=True)
    if c.backend == "process":
        from torchrl.weight_update import SharedMemWeightSyncScheme

        report_dir = tempfile.mkdtemp(prefix="ppo_td-workers-")
        scheme = SharedMemWeightSyncScheme()  # TorchRL's default for a CPU policy, held here to be closed
        try:
            collector = Collector(
                envs, policy, num_collectors=c.workers, cat_results=0, use_buffers=True,  # [env, time]
                num_threads=torch.get_num_threads(),  # keep the learner's threads (TorchRL would lower them)
                collector_class=functools.partial(ReportingCollector, report_dir=report_dir),
                weight_sync_schemes={"policy": scheme}, auto_register_policy_transforms=False,
                init_fn=_ignore_sigint, **common)
        except Exception as err:
            scheme.shutdown()
            shutil.rmtree(report_dir, ignore_errors=True)
            raise _start_failure(err) from err
        return WorkerCollector(collector, "process", report_dir=report_dir, scheme=scheme, mirror=pair)
    if c.backend != "ray":
        raise ValueError(f"collector.backend={c.backend!r} has no worker collector; use 'process' or 'ray'")
    init, connected = _ray_init_config(config)  # connected: ppo_td joined a cluster, it leaves it at shutdown
    try:
        collector = Collector(
            envs, policy, backend="ray", postproc=_env_time,
            backend_options=dict(
                ray_init_config=init,
                remote_configs={"num_cpus": c.cpus_per_worker, "num_gpus": 0},  # TorchRL's default asks for a GPU
                collector_kwargs={"auto_register_policy_transforms": False}),
            **common)
        # the workers up first (started, their imports done: the slow part on a busy machine), then the weights:
        # TorchRL's weight-sync rendezvous waits 60 s for every worker, which a worker still starting may miss
        actors = _actor_identities(collector.remote_collectors)
        collector.update_policy_weights_()  # registers the learner's weights as the source
    except Exception as err:
        if "collector" in locals():
            try:
                collector.shutdown()  # its actors must not outlive a failed start
            except Exception:  # noqa: BLE001 - best effort; the start failure is the error to report
                pass
        if connected:
            import ray

            ray.shutdown()
        raise _start_failure(err) from err
    return WorkerCollector(collector, "ray", ray_connected=connected, actors=actors, mirror=pair)


RAY_START_TIMEOUT = 300
"""Seconds the Ray workers have to start (a new process each, importing torch and TorchRL: seconds on an idle
machine, a minute or more beside other CPU-bound jobs); past it the start fails with a WorkerError."""


def _actor_identities(handles: list[Any]) -> list[tuple[str, int]]:
    """Each Ray actor's (actor id, process id), asked of the actor itself (Ray's public runtime context)."""
    import ray

    def own_id(_actor: Any) -> tuple[str, int]:
        return ray.get_runtime_context().get_actor_id(), os.getpid()

    return ray.get([handle.__ray_call__.remote(own_id) for handle in handles], timeout=RAY_START_TIMEOUT)


def _start_failure(err: Exception) -> WorkerError:
    message = str(err).split("\n\nWorker traceback:")[0]  # TorchRL appends the worker's whole traceback
    return WorkerError(None, f"the workers could not start: {type(err).__name__}: {message}\n"
                       "Workers are new processes: an env registered at run time must come from an importable "
                       "module; give its id as 'module:EnvId' (Gymnasium's form) so every worker imports it first.")


def _ignore_sigint() -> None:
    """Worker processes share the terminal's process group: Ctrl-C is the learner's to handle
    (it checkpoints and stops), so the workers must not die of it first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _env_time(batch: TensorDictBase) -> TensorDictBase:
    """RayCollector stacks workers as ``[worker, env, time]``: merge the first two into ``[env, time]``."""
    batch = batch.reshape(-1, batch.shape[-1])
    batch.refine_names(None, "time")
    return batch


def _ray_init_config(config: TrainConfig) -> tuple[dict[str, Any], bool]:
    """``ray.init`` arguments for TorchRL, and whether ppo_td connected to a cluster itself; for a cluster,
    connect now and check it has the CPUs (no endless wait)."""
    try:
        import ray
    except ImportError as err:
        raise ImportError("collector.backend='ray' needs Ray: pip install 'ppo_td[distributed]'") from err
    c = config.collector
    need = c.workers * c.cpus_per_worker
    if c.ray_address == "local" and not ray.is_initialized():
        # the local instance advertises a CPU slot for every worker, or the actors would wait forever
        return {"num_cpus": max(os.cpu_count() or 1, math.ceil(need)), "include_dashboard": False,
                "log_to_driver": False}, False
    connected = not ray.is_initialized()
    if connected:
        ray.init(address=c.ray_address, log_to_driver=False)
    free = ray.available_resources().get("CPU", 0.0)
    if free < need:
        if connected:
            ray.shutdown()
        raise ValueError(f"the Ray cluster has {free:g} free CPUs; {c.workers} workers x "
                         f"collector.cpus_per_worker={c.cpus_per_worker:g} need {need:g}. Use fewer workers, "
                         "a smaller cpus_per_worker, or add nodes")
    return {}, connected


def is_multi_worker(collector: Any) -> bool:
    """True for the worker collectors :func:`make_worker_collector` builds."""
    return isinstance(collector, WorkerCollector)


def gather_statistics(collector: Any, env: EnvBase) -> None:
    """Fold every worker's new normalization data into ``env``'s statistics (the learner's copy).

    Call it while the workers are idle (right after a batch). Each worker's statistics are
    the last synced ones plus its own observations since; :func:`~ppo_td.envs.moments_since`
    recovers those and :func:`~ppo_td.envs.merge_moments` adds them all, so the result
    equals the statistics of every observation any worker saw. A no-op in-process.
    """
    if not is_multi_worker(collector):
        return
    with reported_failures(collector):
        check_alive(collector)
        transforms = indexed_running_moments(env)
        read = [watched(collector, "reading the workers' statistics",
                        lambda index=index: collector.collector.map_fn(f"env.transform[{index}].moments"))
                for index, _ in transforms]
    for (_, transform), per_worker in zip(transforms, read, strict=True):  # all read first: no partial merge
        base = transform.moments()
        merged = base
        for worker_moments in per_worker:
            merged = merge_moments(merged, moments_since(worker_moments, base))
        transform.load_moments(merged)


def push_to_workers(collector: Any, env: EnvBase) -> None:
    """Send the learner's policy weights and ``env``'s normalization statistics to every worker.

    Call it after an update, before the next collection. A no-op in-process.
    """
    if not is_multi_worker(collector):
        return
    with reported_failures(collector):
        check_alive(collector)
        for index, transform in indexed_running_moments(env):
            moments = transform.moments()
            watched(collector, "sending the statistics", lambda index=index, moments=moments:
                    collector.collector.map_fn(f"env.transform[{index}].load_moments",
                                               [(moments,)] * collector.num_workers))
        watched(collector, "pushing the policy weights", collector.update_policy_weights_)


def batches(collector: Any, around: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext
            ) -> Iterator[TensorDictBase]:
    """Iterate ``collector``; a worker death or failure is raised as :class:`WorkerError`. Each batch is collected
    inside ``around()`` (team self-play's opponents play only there: their weights come back however it ends)."""
    iterator = iter(collector)
    while True:
        with reported_failures(collector):
            try:
                with around():
                    batch = next(iterator)
            except StopIteration:
                return
        yield batch


def shutdown(collector: Any) -> None:
    """Stop a collector; for worker collectors never raise (a dead worker must not hide the first error)."""
    collector.shutdown()
