"""One PPO run over the ranks ``torchrun`` starts (docs/scaling.md): each rank steps its own share of the env
copies, every rank holds the same weights, gradients are averaged every minibatch.

Launched by ``torchrun --nproc-per-node N`` (or any launcher setting torch.distributed's ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``), :func:`launched` returns this process's :class:`Ranks` and
ppo_td's entry points use it without a flag. No launcher, rendezvous or protocol of ppo_td's own: the process group
is torch.distributed's (gloo on the CPU, nccl on CUDA), initialized here unless the program did it already (its
backend and timeout are then kept).

How a run divides over N ranks: ``env.num_envs``, ``frames_per_batch`` and each minibatch are the whole run's; each
rank steps ``num_envs / N`` copies (rank r the copies seeded ``seed + r * num_envs / N`` onward: together the very
copies one process steps) and collects ``frames_per_batch / N`` frames an iteration, cut into ``num_minibatches``
minibatches of ``minibatch_size / N``. The mean of the ranks' gradients is then the gradient of the whole
minibatch's loss, and advantage normalization reads the whole minibatch's mean and standard deviation, so an update
on N ranks equals one process's on the whole batch within float rounding (tests/test_ranks.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist

from ppo_td.config import TrainConfig
from ppo_td.envs import merge_moments, moments_since, running_moments

TIMEOUT = datetime.timedelta(minutes=10)
"""How long a rank waits for the others at a collective when ppo_td starts the process group: longer than an
evaluation during training (run on rank 0 while the others wait), short enough that a rank that hangs ends the run.
A rank that dies ends the others within seconds: torchrun stops them, and gloo's sockets to it close."""


class RankError(RuntimeError):
    """Another rank failed, or a collective failed or timed out; nothing of this iteration is checkpointed (the
    last checkpoint is intact, from before it)."""

    said = False
    """Whether the rank printed it already (a run does, at once: its launcher may stop it before its caller can)."""


@dataclasses.dataclass
class Ranks:
    """This process's place among the ranks of one run, and the collectives the run makes."""

    rank: int
    world: int
    local_rank: int = 0
    device: torch.device | None = None
    """Where collectives' tensors go: None where they are (gloo for the CPU's, nccl for a GPU's); a GPU where the
    program's own process group is nccl only."""

    @property
    def main(self) -> bool:
        """Rank 0: it writes the run folder, logs, prints, evaluates and checkpoints."""
        return self.rank == 0

    def describe(self) -> str:
        return f"rank {self.rank} of {self.world}"

    def connect(self) -> Ranks:
        """Join torch.distributed's default process group, initialized here where the program has not: gloo for
        the CPU's tensors and objects, and nccl for CUDA tensors where this machine has CUDA (``"cpu:gloo,cuda:nccl"``:
        each collective runs on its tensors' device), with :data:`TIMEOUT`; kept with its backend and timeout where
        the program initialized it."""
        if not dist.is_initialized():
            cuda = torch.cuda.is_available()
            if cuda and self.local_rank < torch.cuda.device_count():
                torch.cuda.set_device(self.local_rank)  # nccl's communicators are made on first use: CPU runs make none
            dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", timeout=TIMEOUT)
        if dist.get_backend() == "nccl":  # the program's own nccl-only group: every tensor goes through the GPU
            self.device = torch.device("cuda", torch.cuda.current_device())
        return self

    def run_device(self, device: torch.device) -> torch.device:
        """Where this rank's networks run: a CUDA device without an index is this rank's GPU (``LOCAL_RANK``);
        refused where the machine has fewer GPUs than ranks."""
        if device.type != "cuda" or device.index is not None:
            return device
        if self.local_rank >= torch.cuda.device_count():
            raise ValueError(f"{self.describe()} (LOCAL_RANK {self.local_rank}) has no GPU of its own: this machine "
                             f"has {torch.cuda.device_count()}; start at most that many ranks on it "
                             "(torchrun --nproc-per-node), or train on the CPU (device='cpu', --device cpu)")
        return torch.device("cuda", self.local_rank)

    # -- the split ------------------------------------------------------------------------------------------------

    def local_config(self, config: TrainConfig) -> TrainConfig:
        """The config this rank builds its env copies, collector and buffer from: ``num_envs``,
        ``frames_per_batch`` and ``total_frames`` divided by the ranks, the env seed shifted to this rank's
        copies. Refused in one line where the run does not divide."""
        n = self.world
        for name, value in (("env.num_envs", config.env.num_envs), ("frames_per_batch", config.frames_per_batch)):
            if value % n:
                raise ValueError(f"{name}={value} does not divide over {n} ranks: each rank steps an equal share "
                                 f"(num_envs / ranks copies, frames_per_batch / ranks frames); use a multiple of {n}")
        envs = config.env.num_envs // n
        frames = config.frames_per_batch // n
        try:
            return dataclasses.replace(
                config, env=dataclasses.replace(config.env, num_envs=envs), frames_per_batch=frames,
                total_frames=config.num_iterations * frames, seed=config.seed + self.rank * envs)
        except ValueError as err:
            raise ValueError(f"with {n} ranks each rank runs env.num_envs={envs} and frames_per_batch={frames} "
                             f"(the run's divided by the ranks), which does not fit: {err}") from None

    # -- collectives ----------------------------------------------------------------------------------------------

    def broadcast_state(self, modules: Sequence[torch.nn.Module]) -> None:
        """Rank 0's parameters and buffers in every rank's ``modules`` (the same initial weights everywhere)."""
        tensors = [t for m in modules for t in (*m.parameters(), *m.buffers())]
        with self._collective("the initial weights from rank 0"):
            for tensor in {id(t): t for t in tensors}.values():  # a shared trunk once
                moved = self._there(tensor.detach())
                dist.broadcast(moved, src=0)
                if moved is not tensor:
                    with torch.no_grad():
                        tensor.copy_(moved)

    def average_gradients(self, params: Sequence[torch.Tensor], failed: bool = False,
                          mean_of: torch.Tensor | None = None) -> tuple[int, torch.Tensor | None]:
        """Every parameter's gradient replaced by the mean over the ranks: one all-reduce of one flat buffer
        (CleanRL's ``ppo_atari_multigpu.py``), which also counts the ranks whose loss was not finite (``failed``)
        and averages the scalar ``mean_of`` (a minibatch's KL for the KL-adaptive rate) over the ranks. Returns the
        count and that mean (None without one). Parameters without a gradient (unused by the loss: alike on every
        rank, the same code runs) are left so."""
        grads = [q.grad for q in params if q.grad is not None]
        like = grads[0] if grads else torch.zeros(())
        extra = torch.tensor([float(failed)], dtype=like.dtype, device=like.device)
        if mean_of is not None:
            extra = torch.cat([extra, mean_of.detach().reshape(1).to(like.dtype)])
        flat = self._there(torch.cat([*(g.reshape(-1) for g in grads), extra]))
        with self._collective("averaging the gradients"):
            dist.all_reduce(flat)
        flat = flat.to(like.device)
        failures = int(round(float(flat[-len(extra)])))
        mean = flat[-1] / self.world if mean_of is not None else None
        flat = flat[:-len(extra)].div_(self.world)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        return failures, mean

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` summed over the ranks (a new tensor, on ``values``' device)."""
        out = self._there(values.detach().clone())
        with self._collective("summing over the ranks"):
            dist.all_reduce(out)
        return out.to(values.device)

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` averaged over the ranks."""
        return self.sum(values) / self.world

    def gather(self, value: Any, what: str) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        out: list[Any] = [None] * self.world
        with self._collective(what):
            dist.all_gather_object(out, value)
        return out

    def from_main(self, value: Any, what: str) -> Any:
        """Rank 0's ``value`` on every rank (a run folder's name, a decision)."""
        box = [value]
        with self._collective(what):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def merge_statistics(self, env: Any, base: list[dict[str, torch.Tensor]]) -> list[dict[str, Any]]:
        """Each normalizer's statistics (observations, returns) made those of every frame any rank saw: each rank's
        additions since ``base`` (the statistics every rank held alike: the last merged ones) gathered and merged
        (Chan et al.'s parallel update, as worker collectors' are), the same on every rank. Returns the merged
        statistics, the next call's ``base``."""
        transforms = running_moments(env)
        if not transforms:
            return []
        now = [t.moments() for t in transforms]
        added = [moments_since(n, b) for n, b in zip(now, base, strict=True)]
        every = self.gather(added, "merging the normalization statistics")
        merged = []
        for index, (transform, start) in enumerate(zip(transforms, base, strict=True)):
            total = start
            for rank_added in every:  # in rank order: every rank computes the same floats
                total = merge_moments(total, rank_added[index])
            transform.load_moments(total)
            merged.append(total)
        return merged

    def agree_stop(self, stop: Any, complete: bool) -> int:
        """The run's stop decision from every rank's: 0 go on, 1 stop to be continued, 2 stop as complete (the
        largest any rank asked for: a Ctrl-C reaching one rank stops them all at the same iteration)."""
        mine = 0 if stop is None else 2 if complete else 1
        out = self._there(torch.tensor([mine], dtype=torch.int64))
        with self._collective("agreeing whether to stop"):
            dist.all_reduce(out, op=dist.ReduceOp.MAX)
        return int(out.item())

    @contextlib.contextmanager
    def together(self, what: str) -> Iterator[None]:
        """A step every rank takes (rank 0 making the run folder, every rank building its pipeline): where it fails
        on one rank, every rank raises (the failing one its own error, the others a :class:`RankError` quoting it),
        rather than some waiting at the next collective until the timeout."""
        try:
            yield
        except BaseException as err:
            with contextlib.suppress(Exception):
                self.gather(f"{type(err).__name__}: {err}", what)
            raise
        failed = [(r, e) for r, e in enumerate(self.gather(None, what)) if e is not None]
        if failed:
            rank, error = failed[0]
            raise RankError(f"{what}: rank {rank} failed ({error}); every rank stopped")

    def _there(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if self.device is None else tensor.to(self.device)

    @contextlib.contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        try:
            yield
        except (RuntimeError, pickle.PickleError, OSError) as err:  # gloo's and nccl's failures are RuntimeErrors
            first = (str(err).strip().splitlines() or [""])[0][:200]
            raise RankError(f"{self.describe()}: {what} failed ({type(err).__name__}: {first}): another rank "
                            "stopped or did not answer within the process group's timeout. Nothing of this "
                            "iteration is checkpointed") from err


@contextlib.contextmanager
def together(ranks: Ranks | None, what: str) -> Iterator[None]:
    """:meth:`Ranks.together` where there are ranks; nothing for one process."""
    if ranks is None:
        yield
        return
    with ranks.together(what):
        yield


def launched_world() -> int:
    """How many ranks a launcher started this process among (1 when none: ``WORLD_SIZE`` unset), connecting none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def launched() -> Ranks | None:
    """This process's :class:`Ranks` when a launcher started several (``WORLD_SIZE`` > 1 in the environment: torchrun,
    or a process group the program initialized), else None; connected (:meth:`Ranks.connect`)."""
    world = launched_world()
    if world <= 1:
        return None
    rank = dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0") or 0)
    if not dist.is_available():
        raise RuntimeError(f"WORLD_SIZE={world}: this torch build has no torch.distributed; run one process")
    if not dist.is_initialized():
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
        if missing:
            raise RuntimeError(f"WORLD_SIZE={world} without {', '.join(missing)}: start the ranks with torchrun "
                               "(`torchrun --nproc-per-node N -m ppo_td train ...`), which sets them")
    return Ranks(rank=rank, world=world, local_rank=int(os.environ.get("LOCAL_RANK", str(rank)) or rank)).connect()
