"""Cross-device in-batch negatives: 2 gloo processes under DDP give the loss and gradients of 1 process on the
concatenated batch (each rank: mean over its questions; DDP averages gradients over ranks)."""

from __future__ import annotations

import os
import socket
import time

import torch
import torch.multiprocessing as mp

from taser_lib.losses import contrastive_loss
from taser_lib.training import distributed as D

WORLD, B_LOCAL, GROUP, DIM_IN, DIM_OUT = 2, 3, 3, 5, 4  # 3 questions per rank, positive + 2 hard negatives each


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


def worker(rank: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(WORLD))
    torch.set_num_threads(1)
    assert D.init_distributed(backend="gloo", timeout_s=60)
    try:
        assert (D.get_rank(), D.get_world_size(), D.is_main_process()) == (rank, WORLD, rank == 0)
        model = torch.nn.parallel.DistributedDataParallel(encoder())
        q_all, p_all = global_batch()
        q = q_all[rank * B_LOCAL:(rank + 1) * B_LOCAL]
        p = p_all[rank * B_LOCAL * GROUP:(rank + 1) * B_LOCAL * GROUP]
        loss = D.cross_device_contrastive_loss(model(q), model(p), scale=2.0)
        loss.backward()
        gathered = D.all_gather_objects(rank)
        torch.save({"loss": D.all_reduce_mean(loss), "local_loss": loss.detach(), "gathered": gathered,
                    "grads": {k: v.grad for k, v in model.module.named_parameters()}},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        D.destroy_distributed()


def test_two_gloo_processes_match_one_process_on_the_concatenated_batch(tmp_path):
    ctx = mp.start_processes(worker, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + 120
    try:
        while not ctx.join(timeout=1):  # raises if a worker failed
            assert time.monotonic() < deadline, "the 2 gloo workers did not finish within 120 s"
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]

    model = encoder()
    q_all, p_all = global_batch()
    loss = contrastive_loss(model(q_all), model(p_all), scale=2.0)
    loss.backward()

    assert results[0]["gathered"] == [0, 1]
    assert results[0]["local_loss"].item() != results[1]["local_loss"].item()  # the ranks saw different questions
    for res in results:
        assert torch.allclose(res["loss"], loss.detach(), atol=1e-6)
        for name, param in model.named_parameters():
            assert torch.allclose(res["grads"][name], param.grad, atol=1e-6), name


def test_single_process_fallbacks():
    assert not D.is_distributed()
    assert (D.get_rank(), D.get_world_size(), D.is_main_process()) == (0, 1, True)
    assert not D.init_distributed()  # WORLD_SIZE unset: nothing to join
    t = torch.randn(3, 2, requires_grad=True)
    assert D.all_gather_with_grad(t) is t
    assert D.all_gather_objects("x") == ["x"]
    g = torch.Generator().manual_seed(1)
    q, p = torch.randn(2, 4, generator=g), torch.randn(6, 4, generator=g)
    assert torch.allclose(D.cross_device_contrastive_loss(q, p), contrastive_loss(q, p))
    _, all_p, targets = D.gather_in_batch(q, p)
    assert all_p is p and targets.tolist() == [0, 3]
