"""Benchmark 1: passage encoding, `DenseEncoder.encode_passages` vs sentence-transformers' `SentenceTransformer.encode`.

Same packaged model (its own mean pooling and L2 normalisation on both sides), same SQuAD-open passages given to
both in the model's own convention (one "title text" string for the packaged default), same batch size and maximum
length. All contenders are timed round-robin (core.interleaved) after one untimed warm-up call each on a small slice.
Ours runs at the library's `auto` precision (`taser_lib.speed.precision`: bf16 on CUDA, and on a CPU with native
bf16 where a cached probe measured it faster; else fp32); sentence-transformers at its default float32. When auto means bf16, ours at fp32 runs too: the bf16 gain, and the minimum cosine of our
bf16 vectors to our fp32 ones. On the CPU our fp32 encoder forced to PyTorch's stock kernels and to oneDNN's fused
linears shows what fusing does on this machine (`taser_lib.speed.fused`; ours at auto runs what its trial on
the encoder's own batches chose, and the bench keeps that trial beside its own paired measurement). On the CPU our
int8 encoder for indexing (`taser_lib.speed.quantized`) runs too: its speed-up over sentence-transformers and over
ours at auto, and the minimum cosine of its vectors to our fp32 ones (its R@K is the precision benchmark's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from taser_lib.models import DenseEncoder, default_checkpoint
from taser_lib.models.encoding import passage_string
from taser_lib.speed.fused import model_shape, stored_trial
from taser_lib.speed.quantized import TORCH_ENGINES, int8_encoder, int8_engine_probe
from . import inputs
from .core import BenchConfig, interleaved, paired_ratio, rate, row

NAME = "encoding"
TITLE = "Passage encoding vs sentence-transformers"
TARGET_SPEEDUP = 2.2  # issue 13 (bf16 on this CPU); issue 9's fp32 target was 1.3
MIN_COSINE = 0.999
INT8_TARGET_SPEEDUP = 2.0  # issue 25's moonshot: int8 encoding for indexing, at R@20 within 0.5 points of fp32
PRECISION = "auto"


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [n, d] arrays."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(1)


def sentence_transformer(cfg: BenchConfig, max_length: int):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_checkpoint()), device=cfg.device, local_files_only=True)
    model.max_seq_length = max_length
    return model


def missed_by(value: float, target: float) -> str:
    """How far a ">=" target was missed, as a note ("" when met)."""
    return "" if value >= target else f"{target - value:.2f} short of {target:g} ({value / target:.0%} of it)"


def run(cfg: BenchConfig) -> dict[str, Any]:
    n, batch, max_length, repeats = cfg.pick(2000, 16), cfg.pick(64, 8), 256, cfg.pick(5, 1)
    passages = inputs.passages(cfg, n)
    ours = inputs.encoder(cfg, batch_size=batch, max_passage_length=max_length, precision=PRECISION)
    ours.show_progress = False  # a progress bar inside a timed call would time the terminal too
    precision = ours.resolved_precision
    theirs = sentence_transformer(cfg, max_length)
    # sentence-transformers gets what our encoder reads, in the model's own convention: one "title text" string for
    # a model trained on single strings ("concat", the packaged default), the (title, text) pair otherwise
    their_passages = ([passage_string(t, x) for t, x in passages] if ours.passage_format == "concat"
                      else passages)

    def variant(**kw) -> DenseEncoder:
        return DenseEncoder(ours.model, ours.tokenizer, batch_size=batch, max_passage_length=max_length,
                            device=cfg.device, show_progress=False, **kw)

    fns = {
        "taser_lib": lambda: ours.encode_passages(passages),
        "sentence_transformers": lambda: theirs.encode(their_passages, batch_size=batch, convert_to_numpy=True,
                                                       show_progress_bar=False),
    }
    fp32 = variant(precision="fp32") if precision != "fp32" else ours
    if precision != "fp32":
        fns["taser_lib_fp32"] = lambda: fp32.encode_passages(passages)
    if cfg.device == "cpu":  # what oneDNN's fused linears do here: our fp32 encoder forced to each kernel choice
        stock = variant(precision="fp32", fuse_cpu_linears=False)
        fused = variant(precision="fp32", fuse_cpu_linears=True)
        fns["taser_lib_fp32_stock_kernels"] = lambda: stock.encode_passages(passages)
        fns["taser_lib_fp32_fused_kernels"] = lambda: fused.encode_passages(passages)
        int8 = int8_encoder(fp32)  # for indexing only (taser_lib.speed.quantized); never the book's verdicts
        int8.show_progress = False
        fns["taser_lib_int8"] = lambda: int8.encode_passages(passages)
        int8.encode_passages(passages[:batch])  # also builds ONNX Runtime's session, where that is the engine
        if int8.engine not in TORCH_ENGINES:  # beside it, PyTorch's own int8 linears on its fastest engine here
            int8_torch = int8_encoder(fp32, engine=int8_engine_probe().fastest(TORCH_ENGINES))
            int8_torch.show_progress = False
            fns["taser_lib_int8_torch"] = lambda: int8_torch.encode_passages(passages)
            int8_torch.encode_passages(passages[:batch])
    ours.encode_passages(passages[:batch])  # warm-up on a small slice: a full untimed round would double the time
    fp32.encode_passages(passages[:batch])
    theirs.encode(their_passages[:batch], batch_size=batch, show_progress_bar=False)
    times, out = interleaved(fns, repeats, cfg.device, warmup=0)
    cos = cosines(out["taser_lib"], np.asarray(out["sentence_transformers"], dtype=np.float32))
    ours_fp32 = out.get("taser_lib_fp32", out["taser_lib"])
    cos_fp32 = cosines(out["taser_lib"], ours_fp32)
    speedup = paired_ratio(times["sentence_transformers"], times["taser_lib"])
    fp32_name = "taser_lib_fp32" if "taser_lib_fp32" in times else "taser_lib"
    fused_gain = (paired_ratio(times["taser_lib_fp32_stock_kernels"], times["taser_lib_fp32_fused_kernels"])
                  if "taser_lib_fp32_stock_kernels" in times else None)
    # what auto ran: the trial on the first timed round's batches (the warm-up slice is one batch, too few for one)
    trial = stored_trial(precision, model_shape(ours.running_model())) if cfg.device == "cpu" else None
    auto_fused = bool(trial and trial.choice)
    bf16_gain = paired_ratio(times["taser_lib_fp32"], times["taser_lib"]) if "taser_lib_fp32" in times else None
    fp32_speedup = paired_ratio(times["sentence_transformers"], times[fp32_name])
    extra = [row("speed-up of fused CPU linears over stock kernels (fp32)", fused_gain["median"], "x")] \
        if fused_gain else []
    if bf16_gain:
        extra.append(row("speed-up of bf16 over our fp32", bf16_gain["median"], "x"))
    int8_speedup = int8_over_auto = cos_int8 = None
    if "taser_lib_int8" in times:
        int8_speedup = paired_ratio(times["sentence_transformers"], times["taser_lib_int8"])
        int8_over_auto = paired_ratio(times["taser_lib"], times["taser_lib_int8"])
        cos_int8 = cosines(out["taser_lib_int8"], ours_fp32)
        extra += [row("int8 (indexing) speed-up over sentence-transformers", int8_speedup["median"], "x",
                      target=INT8_TARGET_SPEEDUP),
                  row("int8 (indexing) speed-up over ours at auto", int8_over_auto["median"], "x"),
                  row("min cosine(our int8, our fp32)", float(cos_int8.min()))]
    int8_torch_speedup = cos_int8_torch = None
    if "taser_lib_int8_torch" in times:
        int8_torch_speedup = paired_ratio(times["sentence_transformers"], times["taser_lib_int8_torch"])
        cos_int8_torch = cosines(out["taser_lib_int8_torch"], ours_fp32)
        extra += [row(f"int8 on PyTorch ({int8_torch.engine}) speed-up over sentence-transformers",
                      int8_torch_speedup["median"], "x"),
                  row(f"min cosine(int8 on PyTorch ({int8_torch.engine}), our fp32)", float(cos_int8_torch.min()))]
    lengths = [len(x) for x in ours.tokenize_passages(passages)["input_ids"]]
    pooling = (ours.model.config.pooling, ours.model.config.normalize)
    short = missed_by(speedup["median"], TARGET_SPEEDUP)
    notes = ["speed-up = median over rounds of (their seconds / our seconds), rounds timed back to back",
             f"both read passages as the model was trained ({ours.passage_format}): "
             + ("one string, [CLS] title text [SEP]" if ours.passage_format == "concat"
                else "(title, text) pairs, [CLS] title [SEP] text [SEP]"),
             f"ours at precision {PRECISION!r}, here {precision}; sentence-transformers at float32",
             f"our fp32 encoder alone: {fp32_speedup['median']:.2f}x sentence-transformers",
             f"ours at auto runs {'fused oneDNN' if auto_fused else 'stock PyTorch'} linears here "
             + (f"(taser_lib.speed.fused: its trial on the encoder's own batches measured fused {trial.speedup:.2f}x "
                "stock)" if trial else "(no trial: stock kernels)")]
    if precision == "bf16":
        notes.append("bf16 encoding runs a bfloat16 copy of the model: every op, LayerNorm, softmax and pooling "
                     "included, computes in bf16 (no float32 fallback); the vectors are returned as float32")
    else:
        notes.append("auto resolved to fp32 (no native bf16 on this device): the bf16 target cannot apply")
    if int8_speedup:
        how = ("run by ONNX Runtime (fused attention and layer norms; taser_lib.speed.onnx_int8) with every weight "
               "matrix product at int8" if int8.engine not in TORCH_ENGINES else
               f"with every linear dynamically quantised, packed for PyTorch's {int8.engine} engine")
        notes.append(f"int8 = our fp32 encoder {how} (taser_lib.speed.quantized: the engine its probe measured "
                     "fastest here), for indexing a corpus only; its recall "
                     f"against fp32 is the precision benchmark's; target {INT8_TARGET_SPEEDUP:g}x sentence-"
                     "transformers (the moonshot of issue 25)")
    if short:
        notes.append(f"speed-up target missed: {short}")
    return {
        "rows": [
            row("speed-up over sentence-transformers", speedup["median"], "x", target=TARGET_SPEEDUP),
            row("min cosine(ours, theirs)", float(cos.min()), target=MIN_COSINE, op=">"),
            row("min cosine(ours, our fp32)", float(cos_fp32.min()), target=MIN_COSINE, op=">="),
            row("taser_lib passages/s", rate(n, times["taser_lib"])["median"], "1/s"),
            row("sentence-transformers passages/s", rate(n, times["sentence_transformers"])["median"], "1/s"),
            *extra,
        ],
        "measured": {
            "seconds": times,
            "passages_per_second": {k: rate(n, v) for k, v in times.items()},
            "speedup": speedup,
            "fp32_speedup": fp32_speedup,
            "bf16_over_fp32": bf16_gain,
            "fused_over_stock": fused_gain,
            "int8_speedup": int8_speedup,
            "int8_over_auto": int8_over_auto,
            "cosine_int8_to_fp32": ({"min": float(cos_int8.min()), "mean": float(cos_int8.mean())}
                                    if cos_int8 is not None else None),
            "int8_engine": int8_engine_probe().as_dict() if int8_speedup else None,
            "int8_torch_speedup": int8_torch_speedup,
            "cosine_int8_torch_to_fp32": ({"min": float(cos_int8_torch.min()), "mean": float(cos_int8_torch.mean())}
                                          if cos_int8_torch is not None else None),
            "fused_at_auto": auto_fused,
            "fusion_trial": trial.as_dict() if trial else None,
            "cosine": {"min": float(cos.min()), "mean": float(cos.mean())},
            "cosine_to_fp32": {"min": float(cos_fp32.min()), "mean": float(cos_fp32.mean())},
            "precision": precision,
            "tokens": {"total": int(sum(lengths)), "mean": float(np.mean(lengths)), "max": int(max(lengths))},
        },
        "sizes": {"passages": n, "batch_size": batch, "max_length": max_length, "repeats": repeats,
                  "precision": precision,
                  "pooling": {"taser_lib": list(pooling),
                              "sentence_transformers": [type(m).__name__ for m in list(theirs)[1:]]}},
        "notes": notes,
    }
