"""Benchmark 4: one training step of DPR, TASER (Det-R) and TASER_Shared on the same batch.

The batch is the library's own: SQuAD-open training questions, each with its positive and one BM25 hard negative
(`training.retriever.add_bm25_negatives`), tokenised by `RetrieverCollator` at the trainer's default lengths, scored
with in-batch negatives by `retriever_loss` (L_sim, TASER Eq. 2), optimised by AdamW over the trainer's parameter
groups. A step is the trainer's: zero_grad, forward (under bf16 autocast at the trainer's default precision,
`auto`: bf16 on CUDA and on CPUs with native bf16; master weights fp32), backward, gradient clipping, optimizer.step.
Reported: step time (round-robin over the three models), the peak tensor memory of training (parameters and Adam
state, plus a step's peak: activations and the gradients it creates), and the bytes of parameters + gradients +
Adam state held between steps. Every model also steps at fp32 and at bf16 explicitly, in the same round-robin: the
bf16 speed-up per model, and the ops of a bf16 step that still compute in float32 (`float32_ops`, recorded with a
dispatch mode: autocast's float32 list, the optimizer, and what follows from them).

The re-ranking chapter's other two models step in the same round-robin, on the same questions, as their trainers
build them: the cross-attention ranker (`CA`: `CrossEncoderModel` from the checkpoint with mean pooling, as the pages
start it, reading each question with a group of K = 4 passages, its positive, its BM25 negative and two other
questions' passages, scored by `training.cross_encoder.cross_encoder_loss`, one-hot softmax CE over the group), and
ColBERT (`ColbertModel`, MaxSim over normalised token vectors, trained on the bi-encoders' batch by the same
`retriever_loss`). Their FLOPs: the CA's encoder over each pair's real tokens (the score head's few left out); ColBERT's
encoder, its projection of every real token, and the MaxSim products of every question's tokens with every passage's.

How close a step comes to the hardware: its FLOPs (`step_flops`: the encoder's forward over the batch's real tokens,
as `hardware.encoder_flops` counts them, plus the in-batch score matrix; backward twice the forward, the usual
accounting, since the gradients with respect to activations and to weights each repeat the forward's matmuls; AdamW's
few FLOPs per parameter left out) over the fastest step, divided by the matmul peak in the step's precision: the
faster of the fastest burst of square matrix products and the fastest product at the model's own FFN shape (the
batch's passage tokens x hidden times hidden x FFN size), both timed in the same round-robin as the steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from taser_lib.models import build_model, count_parameters, default_checkpoint, load_tokenizer
from taser_lib.models.common import checkpoint_passage_format
from taser_lib.models.precision import autocast
from taser_lib.training.config import RetrieverDataConfig
from taser_lib.training.loop import LoopConfig, parameter_groups, to_device
from taser_lib.training.cross_encoder import CrossEncoderTraining, cross_encoder_loss, tokenize_pairs
from taser_lib.training.reranking import passage_text
from taser_lib.training.retriever import RetrieverCollator, add_bm25_negatives, retriever_loss
from . import inputs
from .core import BenchConfig, PeakMemory, interleaved, paired_ratio, row, spread, timed
from .hardware import encoder_flops, matmul_bursts

NAME = "training"
TITLE = "Training step: DPR vs TASER vs TASER_Shared"
ARCHS = {"DPR": "dpr", "TASER": "taser", "TASER_Shared": "shared"}
RERANKERS = ("CA", "ColBERT")  # the re-ranking chapter's cross-attention ranker and late-interaction student
CA_GROUP = 4                   # passages per question in the CA's group: its positive, its BM25 negative, two others
TARGET_TIME_RATIO = 1.0
TARGET_BYTES_RATIO = 0.6
TARGET_BF16_SPEEDUP = 1.5  # issue 13: a CPU training step in bf16 at least 1.5x faster than in fp32
PRECISIONS = ("fp32", "bf16")
MIB = 2 ** 20


def training_batch(cfg: BenchConfig, questions: int) -> tuple[dict[str, Any], dict[str, int], list]:
    """(collated batch on the device, its shapes, the training examples it holds): `questions` seeded SQuAD-open
    training questions with their first positive and their top BM25 hard negative."""
    squad = inputs.squad(cfg)
    examples = squad.training_examples("train")
    rng = np.random.default_rng(cfg.seed)
    sample = [examples[i] for i in rng.choice(len(examples), min(len(examples), 4 * questions), replace=False)]
    mined = add_bm25_negatives(sample, squad.corpus, n=1, progress=cfg.progress)
    chosen = [e for e in mined if e.hard_negatives][:questions]
    if len(chosen) < questions:
        raise RuntimeError(f"only {len(chosen)} of {len(mined)} sampled questions got a BM25 hard negative")
    data = RetrieverDataConfig()
    # the models are built from the default checkpoint and read passages in its own convention, as in training
    collator = RetrieverCollator(load_tokenizer("default"), data.max_query_length, data.max_passage_length,
                                 passage_format=checkpoint_passage_format(default_checkpoint()) or "pair")
    batch = collator([(e.query.text, [e.positives[0], e.hard_negatives[0]]) for e in chosen])
    shapes = {"questions": questions, "passages": 2 * questions,
              "query_length": int(batch["query"]["input_ids"].shape[1]),
              "passage_length": int(batch["passage"]["input_ids"].shape[1])}
    return to_device(batch, cfg.torch_device), shapes, chosen


def cross_encoder_batch(cfg: BenchConfig, examples: list, k: int = CA_GROUP) -> dict[str, Any]:
    """The CA's batch on the device: each question paired with its positive, its BM25 negative and the positives of
    the next k - 2 questions (the positive first, as `cross_encoder_batches` lays a group out), tokenised as text
    pairs at the CA trainer's default length, with targets 0."""
    tokenizer = load_tokenizer("default")
    queries, passages = [], []
    for i, e in enumerate(examples):
        group = [e.positives[0], e.hard_negatives[0]] + [examples[(i + j) % len(examples)].positives[0]
                                                          for j in range(1, k - 1)]
        queries += [e.query.text] * k
        passages += [passage_text(doc) for doc in group]
    enc = tokenize_pairs(tokenizer, queries, passages, CrossEncoderTraining().max_length)
    batch = dict(tokenizer.pad({"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]},
                               return_tensors="pt"))
    batch["targets"] = torch.zeros(len(examples), dtype=torch.long)
    return to_device(batch, cfg.torch_device)


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of parameters, of their gradients and of the optimizer's state tensors (Adam: two moments)."""
    def size(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    params = sum(size(p) for p in model.parameters())
    grads = sum(size(p.grad) for p in model.parameters() if p.grad is not None)
    adam = sum(size(t) for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t))
    return {"parameters": params, "gradients": grads, "optimizer": adam, "total": params + grads + adam}


def default_precision(cfg: BenchConfig) -> str:
    """The trainer's default precision resolved on the benchmark's device ("fp32" or "bf16")."""
    return LoopConfig(output_dir="").resolved_precision(cfg.device)


def _trainer(arch: str, cfg: BenchConfig, batch: dict[str, Any], precision: str, loss_fn=retriever_loss,
             adamw: dict[str, Any] | None = None, **overrides):
    """(model, optimizer, one training step) set up as the library's trainer does (training.loop.Trainer), with
    the forward at `precision` ("fp32" or "bf16"): `arch` built from the checkpoint with `overrides`, its AdamW
    given `adamw` too (e.g. {"fused": True}; None: torch's default implementation), its step's loss
    `loss_fn(model, batch)`."""
    torch.manual_seed(cfg.seed)
    model = build_model(arch, cfg.model, **overrides).to(cfg.device).train()
    loop = LoopConfig(output_dir="")  # the trainer's defaults: lr, weight decay, clipping
    groups = parameter_groups(model, loop.learning_rate, loop.weight_decay, loop.layerwise_lr_decay)
    optimizer = torch.optim.AdamW([{k: v for k, v in g.items() if k != "names"} for g in groups],
                                  lr=loop.learning_rate, **(adamw or {}))

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, cfg.device):
            loss, _ = loss_fn(model, batch)
        loss.backward()
        if loop.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), loop.max_grad_norm)
        optimizer.step()
        return float(loss.detach())

    return model, optimizer, step


def step_flops(config, batch: dict[str, Any]) -> dict[str, int]:
    """FLOPs of one training step on `batch` (module docstring): the forward over the questions' and passages' real
    tokens and the in-batch scores, and the whole step (forward + backward, three forwards). A DPR's two towers and
    a TASER's one expert per layer cost the same."""
    lengths = {side: [int(n) for n in batch[side]["attention_mask"].sum(dim=1).tolist()] for side in ("query", "passage")}
    scores = 2 * len(lengths["query"]) * len(lengths["passage"]) * config.hidden_size
    forward = encoder_flops(config, lengths["query"]) + encoder_flops(config, lengths["passage"]) + scores
    return {"forward": forward, "step": 3 * forward, "real_tokens": sum(map(sum, lengths.values()))}


def cross_encoder_step_flops(config, batch: dict[str, Any]) -> dict[str, int]:
    """FLOPs of a CA training step: the encoder over each (question, passage) pair's real tokens, three times."""
    lengths = [int(n) for n in batch["attention_mask"].sum(dim=1).tolist()]
    forward = encoder_flops(config, lengths)
    return {"forward": forward, "step": 3 * forward, "real_tokens": sum(lengths)}


def colbert_step_flops(config, batch: dict[str, Any]) -> dict[str, int]:
    """FLOPs of a ColBERT training step on the bi-encoders' batch: the encoder over every real token, the
    projection of each to `config.dim`, and MaxSim's products of every question token with every passage token of
    the batch (in-batch negatives), three times."""
    lengths = {side: [int(n) for n in batch[side]["attention_mask"].sum(dim=1).tolist()] for side in ("query", "passage")}
    tokens = sum(map(sum, lengths.values()))
    projection = 2 * tokens * config.hidden_size * config.dim
    maxsim = 2 * sum(lengths["query"]) * sum(lengths["passage"]) * config.dim
    forward = (encoder_flops(config, lengths["query"]) + encoder_flops(config, lengths["passage"]) + projection
               + maxsim)
    return {"forward": forward, "step": 3 * forward, "real_tokens": tokens}


def ffn_product(cfg: BenchConfig, tokens: int, hidden: int, intermediate: int, dtype: torch.dtype):
    """(a call timing one product of the model's FFN shape, [tokens, hidden] x [hidden, intermediate], its FLOPs)."""
    g = torch.Generator().manual_seed(cfg.seed)
    a = torch.randn(tokens, hidden, generator=g).to(cfg.device, dtype)
    b = torch.randn(hidden, intermediate, generator=g).to(cfg.device, dtype)
    return (lambda: timed(lambda: torch.mm(a, b), cfg.device)[0]), 2 * tokens * hidden * intermediate


def peak_rates(cfg: BenchConfig, batch: dict[str, Any], config) -> tuple[dict[str, Any], dict[str, Any]]:
    """({name: a call to time in the round-robin}, {precision: a function of the calls' records -> FLOP/s}) for the
    square matmul peak and the FFN product in fp32 and bf16 (each round records its fastest burst)."""
    size, inner, bursts = cfg.pick(4096 if cfg.device == "cuda" else 1024, 256), cfg.pick(4, 1), cfg.pick(5, 1)
    tokens = int(batch["passage"]["attention_mask"].numel())
    calls, best = {}, {}
    for precision in PRECISIONS:
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        run_bursts, burst_flops = matmul_bursts(cfg, size, inner, bursts, dtype)
        ffn, ffn_flops_one = ffn_product(cfg, tokens, config.hidden_size, config.intermediate_size, dtype)
        square: list[float] = []
        shape: list[float] = []
        calls[f"mm {precision}"] = lambda run=run_bursts, out=square: out.append(min(run()))
        calls[f"ffn mm {precision}"] = lambda f=ffn, out=shape: out.append(min(f() for _ in range(bursts)))
        best[precision] = {"square": (square, burst_flops), "ffn": (shape, ffn_flops_one)}
    sizes = {"matmul_size": size, "products_per_burst": inner, "bursts_per_round": bursts, "ffn_tokens": tokens}
    return calls, {"best": best, "sizes": sizes}


_NOT_COMPUTE = ("copy", "view", "clone", "detach", "empty", "zeros", "ones", "fill", "expand", "slice", "select",
                "t.default", "transpose", "permute", "reshape", "unsqueeze", "squeeze", "split", "_to_copy", "lift",
                "alias", "as_strided", "new_", "unbind", "index", "cat", "stack", "embedding_dense", "_foreach")


def float32_ops(step) -> dict[str, int]:
    """{op: calls} of the ops one call of `step` runs with a float32 tensor among its floating-point inputs
    (layout and copy ops left out), recorded with a dispatch mode below autocast."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: dict[str, int] = {}

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func.overloadpacket.__name__)
            tensors = [a for a in (*args, *(kwargs or {}).values()) if torch.is_tensor(a) and a.is_floating_point()]
            tensors += [t for a in args if isinstance(a, (list, tuple)) for t in a if torch.is_tensor(t)]
            if any(t.dtype == torch.float32 for t in tensors) and not any(x in name for x in _NOT_COMPUTE):
                counts[name] = counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with Record():
        step()
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def run(cfg: BenchConfig) -> dict[str, Any]:
    questions, repeats = cfg.pick(16, 2), cfg.pick(9, 1)
    batch, shapes, examples = training_batch(cfg, questions)
    pairs = cross_encoder_batch(cfg, examples)
    default = default_precision(cfg)
    every = {(name, p): _trainer(arch, cfg, batch, p) for name, arch in ARCHS.items() for p in PRECISIONS}
    trainers = {name: every[name, default] for name in ARCHS}  # the trainer's default precision
    rerankers = {("CA", p): _trainer("cross-encoder", cfg, pairs, p, cross_encoder_loss(), pooling="mean")
                 for p in PRECISIONS}
    rerankers |= {("ColBERT", p): _trainer("colbert", cfg, batch, p) for p in PRECISIONS}
    steps = {f"{name} {p}": t[2] for (name, p), t in (every | rerankers).items()}
    for step in steps.values():  # first step allocates Adam's state
        step()
    peak, method = {}, None
    for name, (model, optimizer, step) in trainers.items():
        optimizer.zero_grad(set_to_none=True)  # the step's own gradients count in its peak, not the last step's
        with PeakMemory(cfg.device) as memory:
            step()
        peak[name], method = memory.peak_bytes, memory.method
    fp32_in_bf16 = float32_ops(every["DPR", "bf16"][2])
    config = trainers["DPR"][0].config
    peak_calls, peaks = peak_rates(cfg, batch, config)
    for call in peak_calls.values():  # warm-up, as the steps' first call above
        call()
    all_times, losses = interleaved({**steps, **peak_calls}, repeats, cfg.device, warmup=0)
    for key in peak_calls:
        del all_times[key], losses[key]
    flops = step_flops(config, batch)
    reranker_flops = {"CA": cross_encoder_step_flops(rerankers["CA", default][0].config, pairs),
                      "ColBERT": colbert_step_flops(rerankers["ColBERT", default][0].config, batch)}
    # the fastest burst of any round (contention only slows a run down), in FLOP/s
    rate = {p: {kind: flop / min(seconds[1:] or seconds) for kind, (seconds, flop) in by_kind.items()}
            for p, by_kind in peaks["best"].items()}  # the first record is the warm-up's
    # the limit is the faster of the two products: the machine's square peak, or the model's own shape
    fraction = {f"{name} {p}": flops["step"] / min(all_times[f"{name} {p}"]) / max(rate[p].values())
                for name in ARCHS for p in PRECISIONS}
    fraction |= {f"{name} {p}": reranker_flops[name]["step"] / min(all_times[f"{name} {p}"]) / max(rate[p].values())
                 for name in RERANKERS for p in PRECISIONS}
    reranker_times = {name: all_times[f"{name} {default}"] for name in RERANKERS}
    reranker_speedup = {name: paired_ratio(all_times[f"{name} fp32"], all_times[f"{name} bf16"])
                        for name in RERANKERS}
    times = {name: all_times[f"{name} {default}"] for name in ARCHS}
    bf16_speedup = {name: paired_ratio(all_times[f"{name} fp32"], all_times[f"{name} bf16"]) for name in ARCHS}
    held = {name: state_bytes(model, optimizer) for name, (model, optimizer, _) in trainers.items()}
    # Training's whole tensor memory: parameters and Adam state held throughout, plus the step's peak (activations
    # and the gradients it creates).
    total = {name: held[name]["parameters"] + held[name]["optimizer"] + peak[name] for name in ARCHS}
    params = {name: count_parameters(model) for name, (model, _, _) in trainers.items()}
    time_ratio = {name: paired_ratio(times[name], times["DPR"]) for name in ("TASER", "TASER_Shared")}
    bytes_ratio = {name: held[name]["total"] / held["DPR"]["total"] for name in ("TASER", "TASER_Shared")}
    matmuls_fp32 = sorted(op for op in fp32_in_bf16 if op in ("mm", "addmm", "bmm", "baddbmm", "linear", "matmul"))
    return {
        "rows": [
            row("TASER / DPR step time", time_ratio["TASER"]["median"], "x", target=TARGET_TIME_RATIO, op="<="),
            row("TASER / DPR params+grads+Adam bytes", bytes_ratio["TASER"], "x", target=TARGET_BYTES_RATIO,
                op="<="),
            row("DPR bf16 step speed-up over fp32", bf16_speedup["DPR"]["median"], "x", target=TARGET_BF16_SPEEDUP),
            row("TASER bf16 step speed-up over fp32", bf16_speedup["TASER"]["median"], "x"),
            row("TASER_Shared bf16 step speed-up over fp32", bf16_speedup["TASER_Shared"]["median"], "x"),
            row("TASER_Shared / DPR step time", time_ratio["TASER_Shared"]["median"], "x"),
            *[row(f"{name} step time ({default})", spread(times[name])["median"], "s") for name in ARCHS],
            *[row(f"{name} peak training memory ({default})", total[name] / MIB, "MiB") for name in ARCHS],
            *[row(f"{name} step, fraction of the {p} matmul peak", fraction[f"{name} {p}"])
              for name in ARCHS for p in PRECISIONS],
            *[row(f"{name} step time ({default})", spread(reranker_times[name])["median"], "s") for name in RERANKERS],
            *[row(f"{name} bf16 step speed-up over fp32", reranker_speedup[name]["median"], "x")
              for name in RERANKERS],
            *[row(f"{name} step, fraction of the {p} matmul peak", fraction[f"{name} {p}"])
              for name in RERANKERS for p in PRECISIONS],
            *[row(f"{p} matmul peak ({kind})", rate[p][kind] / 1e9, "GFLOP/s")
              for p in PRECISIONS for kind in ("square", "ffn")],
            row("training step FLOPs (forward + backward)", flops["step"] / 1e9, "GFLOP"),
        ],
        "measured": {"step_seconds": times, "step_seconds_spread": {k: spread(v) for k, v in times.items()},
                     "step_seconds_by_precision": all_times,
                     "bf16_speedup": bf16_speedup, "default_precision": default,
                     "float32_ops_in_bf16_step": fp32_in_bf16,
                     "step_time_ratio_to_dpr": time_ratio, "state_bytes": held, "bytes_ratio_to_dpr": bytes_ratio,
                     "parameters": params, "peak_step_bytes": peak, "peak_training_bytes": total,
                     "peak_memory_method": method,
                     "step_flops": flops, "matmul_flop_per_s": rate, "fraction_of_peak": fraction,
                     "rerankers": {"step_seconds": reranker_times, "bf16_speedup": reranker_speedup,
                                   "step_flops": reranker_flops, "ca_group": CA_GROUP,
                                   "ca_pair_length": int(pairs["input_ids"].shape[1])},
                     "last_loss": losses},
        "sizes": {**shapes, "hard_negatives": 1, "repeats": repeats, "precision": default, "peak": peaks["sizes"]},
        "notes": ["step time ratio = median over rounds of (model's seconds / DPR's seconds), timed back to back",
                  f"the TASER / DPR rows, memory and bytes use the trainer's default precision, here {default} "
                  "(LoopConfig.precision = auto)",
                  "bf16 speed-up = median over rounds of (fp32 step seconds / bf16 step seconds), same model and batch",
                  "ops of a DPR bf16 step computing in float32 (autocast's float32 list, the loss, AdamW on the fp32 "
                  "master weights): " + ", ".join(f"{op} x{n}" for op, n in list(fp32_in_bf16.items())[:12])
                  + ("; matmuls left in float32: " + ", ".join(matmuls_fp32) if matmuls_fp32 else
                     "; no matmul runs in float32"),
                  f"peak step memory: {method}; tensors the step allocates (activations, its gradients), live at "
                  "once; peak training memory adds the parameters and Adam state held throughout",
                  "bytes held = parameters + gradients + AdamW's two moments, all fp32 (master weights stay fp32)",
                  "optimizer: torch.optim.AdamW as the trainer builds it (torch's default implementation)",
                  "fraction of peak = step FLOPs (forward over real tokens + in-batch scores, backward twice the "
                  "forward) / fastest step, over the matmul peak in the step's precision: the faster of square "
                  "products and products at the model's FFN shape, timed in the same round-robin",
                  f"CA: the cross-encoder from the checkpoint (mean pooling), each question with a group of "
                  f"{CA_GROUP} passages (its positive, its BM25 negative, two other questions' positives), one-hot "
                  "softmax CE; ColBERT: MaxSim over normalised token vectors on the bi-encoders' batch, L_sim; "
                  "their FLOPs as the module docstring counts them"],
    }
