"""Cross-device in-batch negatives wrap the model's scoring: 2 gloo processes under DDP give the loss and gradients of
1 process on the concatenated batch (each rank: mean over its questions; DDP averages gradients over ranks), for
pooled vectors (dot product) and for ColBERT's token vectors of different lengths per rank (MaxSim)."""

from __future__ import annotations

import gc
import os
import socket
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from taser_lib.losses import contrastive_loss, contrastive_targets
from taser_lib.models import TokenReps, maxsim
from taser_lib.training import distributed as D

WORLD, B_LOCAL, GROUP, DIM_IN, DIM_OUT = 2, 3, 3, 5, 4  # 3 questions per rank, positive + 2 hard negatives each
TOKENS = {0: 4, 1: 6}  # ColBERT: each rank's passages are padded to its own longest (4 and 6 tokens)


class Dot:
    """A dense retriever's compute_similarity (s = 2)."""

    def compute_similarity(self, q, p):
        return 2.0 * q @ p.T


class MaxSim:
    """ColBERT's compute_similarity."""

    def compute_similarity(self, q, p):
        return maxsim(q.vectors, q.mask, p.vectors, p.mask)


def token_batch():
    """Question tokens [6, 3, DIM_IN], passage tokens [18, 6, DIM_IN] with masks; rank r's passages use only the
    first TOKENS[r] positions (its own padding)."""
    g = torch.Generator().manual_seed(12)
    q = torch.randn(WORLD * B_LOCAL, 3, DIM_IN, generator=g)
    p = torch.randn(WORLD * B_LOCAL * GROUP, max(TOKENS.values()), DIM_IN, generator=g)
    q_mask = torch.ones(WORLD * B_LOCAL, 3, dtype=torch.long)
    q_mask[0, 2] = 0
    p_mask = torch.zeros(p.shape[:2], dtype=torch.long)
    n = B_LOCAL * GROUP
    for r, length in TOKENS.items():
        for i in range(r * n, (r + 1) * n):
            p_mask[i, :1 + int(torch.randint(length, (1,), generator=g))] = 1
        p_mask[r * n, :length] = 1  # some passage fills the rank's width
    return q, q_mask, p, p_mask


def token_encode(linear, x, mask):
    return TokenReps(torch.nn.functional.normalize(linear(x), dim=-1), mask)


def global_batch():
    g = torch.Generator().manual_seed(11)
    return torch.randn(WORLD * B_LOCAL, DIM_IN, generator=g), torch.randn(WORLD * B_LOCAL * GROUP, DIM_IN, generator=g)


def encoder():
    torch.manual_seed(0)
    return torch.nn.Linear(DIM_IN, DIM_OUT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage(out_dir: str, rank: int, name: str) -> None:
    """Record how far a worker got, so that a hung run says where it hung."""
    with open(os.path.join(out_dir, f"rank{rank}.stages"), "a") as f:
        f.write(f"{time.monotonic():.1f} {name}\n")


def stages_reached(out_dir: Path) -> str:
    files = {r: out_dir / f"rank{r}.stages" for r in range(WORLD)}
    return "; ".join(f"rank {r}: " + (f.read_text().strip().replace("\n", ", ") if f.is_file() else "no stage")
                     for r, f in files.items())


def worker(rank: int, port: int, out_dir: str) -> None:
    """One rank: its results go to out_dir, then the process ends at once (`_exit_now`, called by `_work` itself).
    Python's own exit (the final garbage collection of an interpreter holding torch) took 15 to over 100 s in these
    workers while the machine was busy (py-spy: both ranks in gc_collect_main, running, after "left the process
    group"), which was the "gloo hang"; the work itself takes well under a second. Ending with os._exit after
    `_work` returned was not enough: on 2026-11-30 a fresh clone's run still hung for 100 s after both ranks had left
    the process group, in what remained (releasing `_work`'s frame, its DDP modules and tensors, then flushing). So
    the collector is off in these short-lived workers, `_work` ends the process before its frame is released, and
    the last stage, "exiting", shows whether a hang comes before os._exit. An exception still reaches
    torch.multiprocessing (the process group is left in `finally`; `_exit_now` is not reached)."""
    gc.disable()
    _work(rank, port, out_dir)


def _exit_now(out_dir: str, rank: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    stage(out_dir, rank, "exiting")
    os._exit(0)


def _work(rank: int, port: int, out_dir: str) -> None:
    stage(out_dir, rank, "started")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(WORLD))
    torch.set_num_threads(1)
    assert D.init_distributed(backend="gloo", timeout_s=60)
    stage(out_dir, rank, "joined the process group")
    try:
        assert (D.get_rank(), D.get_world_size(), D.is_main_process()) == (rank, WORLD, rank == 0)
        model = torch.nn.parallel.DistributedDataParallel(encoder())
        q_all, p_all = global_batch()
        q = q_all[rank * B_LOCAL:(rank + 1) * B_LOCAL]
        p = p_all[rank * B_LOCAL * GROUP:(rank + 1) * B_LOCAL * GROUP]
        scores, targets = D.gathered_similarity(Dot(), model(q), model(p))
        assert scores.shape == (B_LOCAL, WORLD * B_LOCAL * GROUP)
        assert targets.tolist() == [rank * B_LOCAL * GROUP + i * GROUP for i in range(B_LOCAL)]
        loss = contrastive_loss(scores, targets)
        loss.backward()
        gathered = D.all_gather_objects(rank)
        # ColBERT: token vectors padded per rank, gathered with their masks, scored by MaxSim
        colbert = torch.nn.parallel.DistributedDataParallel(encoder())
        tq, tq_mask, tp, tp_mask = token_batch()
        n, width = B_LOCAL * GROUP, TOKENS[rank]
        mine = slice(rank * B_LOCAL, (rank + 1) * B_LOCAL)
        local_q = token_encode(colbert, tq[mine], tq_mask[mine])
        local_p = token_encode(colbert, tp[rank * n:(rank + 1) * n, :width], tp_mask[rank * n:(rank + 1) * n, :width])
        all_p = D.gather_reps(local_p)
        assert all_p.vectors.shape == (WORLD * n, max(TOKENS.values()), DIM_OUT)
        token_loss = contrastive_loss(*D.gathered_similarity(MaxSim(), local_q, local_p))
        token_loss.backward()
        torch.save({"loss": D.all_reduce_mean(loss), "local_loss": loss.detach(), "gathered": gathered,
                    "grads": {k: v.grad for k, v in model.module.named_parameters()},
                    "token_loss": D.all_reduce_mean(token_loss),
                    "token_grads": {k: v.grad for k, v in colbert.module.named_parameters()}},
                   os.path.join(out_dir, f"rank{rank}.pt"))
        stage(out_dir, rank, "saved its results")
    finally:
        D.destroy_distributed()
    stage(out_dir, rank, "left the process group")
    _exit_now(out_dir, rank)   # before this frame's DDP modules and tensors are released (`worker`)


def test_two_gloo_processes_match_one_process_on_the_concatenated_batch(tmp_path):
    ctx = mp.start_processes(worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + 120
    try:
        while not ctx.join(timeout=1):  # raises if a worker failed
            assert time.monotonic() < deadline, (f"the 2 gloo workers did not finish within 120 s (now "
                                                 f"{time.monotonic():.1f}); {stages_reached(tmp_path)}")
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]

    model = encoder()
    q_all, p_all = global_batch()
    loss = contrastive_loss(2.0 * model(q_all) @ model(p_all).T, contrastive_targets(WORLD * B_LOCAL, GROUP))
    loss.backward()
    colbert = encoder()
    tq, tq_mask, tp, tp_mask = token_batch()
    q_reps, p_reps = token_encode(colbert, tq, tq_mask), token_encode(colbert, tp, tp_mask)
    token_loss = contrastive_loss(MaxSim().compute_similarity(q_reps, p_reps),
                                  contrastive_targets(WORLD * B_LOCAL, GROUP))
    token_loss.backward()

    assert results[0]["gathered"] == [0, 1]
    assert results[0]["local_loss"].item() != results[1]["local_loss"].item()  # the ranks saw different questions
    for res in results:
        assert torch.allclose(res["loss"], loss.detach(), atol=1e-6)
        assert torch.allclose(res["token_loss"], token_loss.detach(), atol=1e-6)
        for name, param in model.named_parameters():
            assert torch.allclose(res["grads"][name], param.grad, atol=1e-6), name
        for name, param in colbert.named_parameters():
            assert torch.allclose(res["token_grads"][name], param.grad, atol=1e-6), name


def test_single_process_fallbacks():
    assert not D.is_distributed()
    assert (D.get_rank(), D.get_world_size(), D.is_main_process()) == (0, 1, True)
    assert not D.init_distributed()  # WORLD_SIZE unset: nothing to join
    t = torch.randn(3, 2, requires_grad=True)
    assert D.all_gather_with_grad(t) is t
    assert D.all_gather_objects("x") == ["x"]
    g = torch.Generator().manual_seed(1)
    q, p = torch.randn(2, 4, generator=g), torch.randn(6, 4, generator=g)
    assert D.gather_reps(p) is p
    scores, targets = D.gathered_similarity(Dot(), q, p)
    torch.testing.assert_close(scores, 2.0 * q @ p.T)
    assert targets.tolist() == [0, 3]
    # world size 1: the wrapped loss is the single-process loss, by hand
    by_hand = -(torch.log_softmax(2.0 * q @ p.T, 1)[[0, 1], [0, 3]]).mean()
    torch.testing.assert_close(contrastive_loss(scores, targets), by_hand)
    tokens = TokenReps(torch.randn(6, 5, 4, generator=g), torch.ones(6, 5, dtype=torch.long))
    assert D.gather_reps(tokens) is tokens
    with pytest.raises(ValueError, match="per question"):
        D.gathered_similarity(Dot(), q, p[:5])
