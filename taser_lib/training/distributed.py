"""torch.distributed helpers: start from torchrun's environment, ask rank and world size (1 process works too),
and gather in-batch negatives across devices with gradients flowing back.

Cross-device in-batch negatives wrap the model's scoring and do not replace it (`gathered_similarity`): the
passage representations of all ranks are gathered (pooled vectors, or ColBERT's token vectors padded to the
longest rank's length with their masks) and the model's own `compute_similarity` scores the local questions
against all of them; `losses.contrastive_loss` then takes the scores.

Loss-scaling convention: every rank scores its *local* questions against the passages of all ranks and averages
over its local questions.
`all_gather_with_grad`'s backward sums, into each rank's local slice, the gradients that every rank's loss sends to
it; DDP then averages parameter gradients over ranks. Together the parameter gradient equals that of one process
computing the mean loss over the concatenated global batch (all ranks holding the same number of questions).
With gradient accumulation, divide each micro-batch loss by the number of micro-batches as usual.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch
import torch.distributed as dist

from ..losses import contrastive_targets
from ..models.common import Reps, TokenReps


def is_distributed() -> bool:
    """True inside an initialised process group."""
    return dist.is_available() and dist.is_initialized()


def get_rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def get_local_rank() -> int:
    """This process's index on its node (torchrun's LOCAL_RANK); 0 outside torchrun."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main_process() -> bool:
    return get_rank() == 0


def init_distributed(backend: str | None = None, timeout_s: float = 1800.0) -> bool:
    """Join the process group described by torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
    LOCAL_RANK). Returns True when running distributed, False for a single process (WORLD_SIZE unset or 1).

    The backend defaults to NCCL when CUDA is available (and binds this process to GPU LOCAL_RANK), else gloo.
    Calling it again inside an initialised group is a no-op.
    """
    if is_distributed():
        return True
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return False
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(f"WORLD_SIZE={world_size} but {missing} unset: start multi-process runs with torchrun")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(get_local_rank())
    dist.init_process_group(backend=backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=timeout_s))
    return True


def destroy_distributed() -> None:
    """Leave the process group once every rank got here (rank 0 hosts the rendezvous store the others still use)."""
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj` (picklable), in rank order; `[obj]` for a single process."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    """Mean of a tensor over ranks, without gradient (for logging losses and metrics)."""
    if not is_distributed():
        return t.detach()
    out = t.detach().clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out / get_world_size()


class _GatherWithGrad(torch.autograd.Function):
    """all_gather forward; backward sums every rank's gradient of the gathered tensor and keeps the local slice.

    (torch.distributed.nn.functional.all_gather does the same but is deprecated in favour of a private API; an
    all_reduce of the small [world * n, d] gradient works on every backend.)
    """

    @staticmethod
    def forward(ctx, t: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        t = t.contiguous()
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t)
        ctx.n = t.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        start = dist.get_rank() * ctx.n
        return grad[start:start + ctx.n]


def all_gather_with_grad(t: torch.Tensor) -> torch.Tensor:
    """Concatenate `t` from all ranks along dim 0 (rank order); gradients flow back to each rank's local slice.

    The backward sums over ranks the gradients that each rank's loss sends to a slice (see the module docstring
    for what that means for loss scaling). All ranks must pass the same shape. Returns `t` itself for a single
    process.
    """
    if not is_distributed():
        return t
    return _GatherWithGrad.apply(t)


def _check_same_count(n: int, what: str) -> None:
    counts = all_gather_objects(n)
    if len(set(counts)) != 1:
        raise ValueError(f"{what} differ in size across ranks ({counts}): use equal per-rank batches (drop_last)")


def gather_reps(reps: Reps) -> Reps:
    """The representations of all ranks in rank order, gradients flowing back to each rank's own rows: a `[n, d]`
    tensor, or `TokenReps` padded to the longest rank's token count (padding is masked out of MaxSim). All ranks
    must hold the same number of rows. Returns `reps` itself for a single process."""
    if not is_distributed():
        return reps
    _check_same_count(len(reps), "passage batches")
    if isinstance(reps, TokenReps):
        length = max(all_gather_objects(reps.vectors.shape[1]))
        padded = reps.pad_to(length)
        masks = [torch.empty_like(padded.mask) for _ in range(get_world_size())]
        dist.all_gather(masks, padded.mask.contiguous())
        return TokenReps(all_gather_with_grad(padded.vectors), torch.cat(masks))
    return all_gather_with_grad(reps)


def gathered_similarity(model: Any, q_reps: Reps, p_reps: Reps) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-device in-batch scores: `(scores, targets)` for `losses.contrastive_loss`.

    `q_reps` (b questions) stay local; `p_reps` (b * (1 + h) passages: each question's positive then its h hard
    negatives) are gathered from all ranks (`gather_reps`) and scored by `model.compute_similarity` (the unwrapped
    model: it holds no parameters, so calling it outside DistributedDataParallel's forward is safe);
    `targets[i]` is the column of local question i's positive among all ranks' passages.
    """
    n_q, n_p = len(q_reps), len(p_reps)
    if n_q == 0 or n_p % n_q != 0:
        raise ValueError(f"the passages must hold (1 + h) per question: {n_p} passages for {n_q} questions")
    scores = model.compute_similarity(q_reps, gather_reps(p_reps))
    targets = contrastive_targets(n_q, n_p // n_q, offset=get_rank() * n_p, device=scores.device)
    return scores, targets
