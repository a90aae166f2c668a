"""Which expert FFN a trained TASER model sends its inputs to: expert usage per specialized block, split by
questions and passages (TASER App. A, Table A1's learned routers).

    >>> encoder = load_encoder(run.model_path, show_progress=False)
    >>> expert_usage(encoder, questions, passages)     # routing, layer, side, unit, expert, units, share
    >>> token_routing(encoder, questions, side="question")   # Tok-R: which tokens go to which expert
    >>> top_tokens(token_routing(...), n=8)
    >>> usage_summary(usage)          # per block: top expert share per side, question/passage separation
    >>> align_experts(usage)          # experts renumbered per seed (0: the questions' favourite), for averaging
    >>> questions, passages = usage_inputs(dataset, 500, seed=13)   # a seeded sample to count on

How the decisions are read. `TaserLayer` routes at evaluation by the argmax of its router's logits (Eq. 3 without
the Gumbel noise), so a forward hook on each router (`record_routing`) sees exactly the choice the layer makes,
without changing the forward: Seq-R routes one unit per sequence (u = the [CLS] FFN input), Tok-R one per real
token (padding excluded, as in the layer's entropy term). Det-R and TASER_Shared have no router: their choice is
fixed by the input's side (Q-FFN = expert 0 for questions, P-FFN = expert 1 for passages; shared: expert 0), read
by a hook on the experts and counted per sequence. The usage is measured in evaluation mode only: in training mode
the layer samples its choice with Gumbel noise, which a hook on the logits cannot see, so a model in training mode
is refused.

`layer` is the 1-based index of the specialized block in the encoder (with 6 layers and T = 2: 3 and 6). `side` is
"question" or "passage". `units` counts routed units (sequences or tokens) and `share` is their fraction of the
side's units in that block (each block's shares over its experts sum to 1; an expert nobody is routed to has a
row with share 0, so heatmaps keep every expert).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from taser_lib.errors import ConfigError

SIDES = {"query": "question", "passage": "passage"}
USAGE_COLUMNS = ["routing", "layer", "side", "unit", "expert", "units", "share"]


@dataclass
class RoutingRecord:
    """The choices of one specialized block for one batch: `experts[u]` is the expert of routed unit u;
    `token_ids[u]` the unit's token id (Tok-R, when the input ids were seen; else None)."""

    layer: int            # 1-based block index in the encoder
    side: str             # question | passage
    unit: str             # sequence | token
    experts: np.ndarray
    token_ids: np.ndarray | None = None


def _model_of(encoder_or_model):
    """The module that actually runs (a DenseEncoder's bf16 copy at bf16, else the model itself)."""
    running = getattr(encoder_or_model, "running_model", None)
    return running() if callable(running) else encoder_or_model


def _taser_layers(model) -> list[tuple[int, torch.nn.Module]]:
    layers = getattr(model, "taser_layers", None)
    if layers is None:
        raise ConfigError(f"{type(model).__name__} has no specialized TASER blocks: expert usage needs a TaserModel "
                          f"(Det-R, Seq-R, Tok-R or shared)")
    return [(i + 1, layer) for i, layer in zip(model.config.specialized_layers, layers)]


@contextmanager
def record_routing(encoder_or_model) -> Iterator[list[RoutingRecord]]:
    """Within the block, every forward pass of the model (a TaserModel, or a DenseEncoder of one) appends one
    `RoutingRecord` per specialized block to the yielded list. The forward itself is unchanged (hooks only)."""
    model = _model_of(encoder_or_model)
    layers = _taser_layers(model)
    records: list[RoutingRecord] = []
    current: dict[str, torch.Tensor | None] = {"ids": None}
    handles = []

    def remember_ids(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        current["ids"] = ids.detach() if isinstance(ids, torch.Tensor) else None

    handles.append(model.embeddings.register_forward_pre_hook(remember_ids, with_kwargs=True))

    routed: dict[int, tuple] = {}  # id(layer) -> the (kind, token mask) of its current forward call

    def remember_routing(module, args, kwargs):
        routed[id(module)] = (kwargs.get("routing_kind"), kwargs.get("routing_mask"))

    def router_hook(index: int, layer):
        def hook(module, args, output):
            if layer.training:
                raise ConfigError("expert usage is read in evaluation mode (model.eval()): in training the routers "
                                  "sample their choice with Gumbel noise")
            choice = output.detach().float().argmax(-1)
            kind, token_mask = routed[id(layer)]
            side = SIDES[kind]
            if layer.strategy.unit == "sequence":
                records.append(RoutingRecord(index, side, "sequence", choice.cpu().numpy()))
                return
            real = (token_mask.bool() if token_mask is not None
                    else torch.ones(choice.shape, dtype=torch.bool, device=choice.device))
            ids = current["ids"]
            token_ids = ids[real].cpu().numpy() if ids is not None and ids.shape == real.shape else None
            records.append(RoutingRecord(index, side, "token", choice[real].cpu().numpy(), token_ids))
        return hook

    def expert_hook(index: int, layer, expert: int):
        def hook(module, args, output):
            records.append(RoutingRecord(index, SIDES[routed[id(layer)][0]], "sequence",
                                         np.full(args[0].shape[0], expert, dtype=np.int64)))
        return hook

    for index, layer in layers:
        handles.append(layer.register_forward_pre_hook(remember_routing, with_kwargs=True))
        if layer.router is not None:
            handles.append(layer.router.register_forward_hook(router_hook(index, layer)))
        else:
            for e, expert in enumerate(layer.experts):
                handles.append(expert.register_forward_hook(expert_hook(index, layer, e)))
    try:
        yield records
    finally:
        for handle in handles:
            handle.remove()


def _encode(encoder, questions: Sequence[str], passages: Sequence) -> None:
    if questions:
        encoder.encode_queries(list(questions))
    if passages:
        encoder.encode_passages(list(passages))


def _check_encoder(encoder) -> None:
    if not hasattr(encoder, "encode_queries") or not hasattr(encoder, "running_model"):
        raise ConfigError(f"expected a DenseEncoder (models.load_encoder / DenseEncoder(model, tokenizer)), got "
                          f"{type(encoder).__name__}")


def usage_table(records: Sequence[RoutingRecord], num_experts: int, routing: str) -> pd.DataFrame:
    """Expert usage (USAGE_COLUMNS) from recorded choices: per block, side and expert, the routed units and their
    share of the side's units in that block."""
    counts: dict[tuple[int, str, str], np.ndarray] = {}
    for r in records:
        key = (r.layer, r.side, r.unit)
        counts.setdefault(key, np.zeros(num_experts, dtype=np.int64))
        counts[key] += np.bincount(r.experts, minlength=num_experts)[:num_experts]
    rows = []
    for (layer, side, unit), c in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] != "question")):
        total = int(c.sum())
        for e in range(num_experts):
            rows.append({"routing": routing, "layer": layer, "side": side, "unit": unit, "expert": e,
                         "units": int(c[e]), "share": float(c[e] / total) if total else float("nan")})
    return pd.DataFrame(rows, columns=USAGE_COLUMNS)


def expert_usage(encoder, questions: Sequence[str], passages: Sequence) -> pd.DataFrame:
    """The fraction of units each specialized block routes to each expert, for `questions` and for `passages`
    (strings, (title, text) tuples or Documents), encoded by `encoder` (a DenseEncoder of a TaserModel, in its own
    passage format, length limits and precision). Columns: routing, layer, side, unit, expert, units, share (module
    docstring). Seq-R counts sequences, Tok-R real tokens, Det-R and shared sequences."""
    _check_encoder(encoder)
    model = encoder.model
    if model.training:
        raise ConfigError("expert usage is read in evaluation mode (model.eval())")
    with record_routing(encoder) as records:
        _encode(encoder, questions, passages)
    return usage_table(records, model.config.num_experts, model.config.routing)


def token_routing(encoder, texts: Sequence, side: str = "question") -> pd.DataFrame:
    """Tok-R: for every token string of `texts` (questions, or passages with side="passage"), how often each
    specialized block routes it to each expert. Columns: layer, side, token, expert, count, share (of that token's
    occurrences in that block). Needs token routing (the other routings choose per sequence)."""
    _check_encoder(encoder)
    if side not in SIDES.values():
        raise ValueError(f"side must be 'question' or 'passage', got {side!r}")
    model = encoder.model
    if model.config.strategy.unit != "token":
        raise ConfigError(f"token_routing needs token-level routing (Tok-R); this model routes "
                          f"{model.config.routing!r}: use expert_usage")
    with record_routing(encoder) as records:
        _encode(encoder, texts if side == "question" else [], texts if side == "passage" else [])
    parts = [pd.DataFrame({"layer": r.layer, "token_id": r.token_ids, "expert": r.experts})
             for r in records if r.token_ids is not None]
    if not parts:
        return pd.DataFrame(columns=["layer", "side", "token", "expert", "count", "share"])
    frame = pd.concat(parts, ignore_index=True)
    counts = frame.groupby(["layer", "token_id", "expert"]).size().rename("count").reset_index()
    counts["share"] = counts["count"] / counts.groupby(["layer", "token_id"])["count"].transform("sum")
    counts["token"] = encoder.tokenizer.convert_ids_to_tokens(counts["token_id"].astype(int).tolist())
    counts["side"] = side
    return counts[["layer", "side", "token", "expert", "count", "share"]]


def top_tokens(routing: pd.DataFrame, n: int = 8, min_count: int = 3) -> pd.DataFrame:
    """Per block and expert, the `n` tokens (seen at least `min_count` times) most often routed there, by share then
    count, as one text per row: the vocabulary each Tok-R expert specialises in. Columns: layer, side, expert,
    tokens."""
    frequent = routing[routing.groupby(["layer", "token"])["count"].transform("sum") >= min_count]
    rows = []
    for (layer, side, expert), group in frequent.groupby(["layer", "side", "expert"], sort=True):
        best = group.sort_values(["share", "count"], ascending=False).head(n)
        rows.append({"layer": layer, "side": side, "expert": expert,
                     "tokens": ", ".join(f"{t} ({s:.0%})" for t, s in zip(best["token"], best["share"]))})
    return pd.DataFrame(rows, columns=["layer", "side", "expert", "tokens"])


def usage_inputs(dataset, n: int | None, seed: int = 0) -> tuple[list[str], list]:
    """What expert usage is counted on: a seeded sample of at most `n` of `dataset`'s question texts and at most
    `n` of its corpus passages (None: all), each in id order (so the sample does not depend on dict order)."""
    rng = np.random.default_rng(seed)

    def sample(ids: list[str]) -> list[str]:
        if n is None or n >= len(ids):
            return ids
        return sorted(ids[i] for i in rng.choice(len(ids), n, replace=False))

    questions = [getattr(dataset.queries[q], "text", dataset.queries[q]) for q in sample(sorted(dataset.queries))]
    passages = [dataset.corpus[d] for d in sample(sorted(dataset.corpus))]
    return questions, passages


def usage_summary(usage: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per group of `by` and specialized block, what the routing amounts to: `top_question` / `top_passage`, the
    share of each side's units that go to its most used expert (1: that side collapses onto one expert; 1/I:
    even use), and `separation`, the total-variation distance between the questions' and the passages' expert
    distributions (1: questions and passages never share an expert, as under Det-R; 0: both sides use the experts
    alike). With a `seed` column each seed is summarised on its own and the numbers averaged over seeds (a router's
    expert numbers mean nothing across seeds)."""
    by = list(by)
    missing = [c for c in [*by, "layer", "side", "expert", "share"] if c not in usage.columns]
    if missing:
        raise KeyError(f"usage_summary: no column(s) {missing}; the frame has {list(usage.columns)}")
    runs = [*by, *(["seed"] if "seed" in usage.columns and "seed" not in by else []), "layer"]
    shares = usage.groupby([*runs, "side", "expert"], sort=False)["share"].mean().unstack("side")
    rows = []
    for key, block in shares.groupby(level=runs, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        q = block.get("question", pd.Series(dtype=float)).to_numpy(dtype=float)
        p = block.get("passage", pd.Series(dtype=float)).to_numpy(dtype=float)
        rows.append({**dict(zip(runs, key)),
                     "top_question": float(np.nanmax(q)) if len(q) else float("nan"),
                     "top_passage": float(np.nanmax(p)) if len(p) else float("nan"),
                     "separation": float(0.5 * np.abs(q - p).sum()) if len(q) and len(p) else float("nan")})
    columns = ["top_question", "top_passage", "separation"]
    per_run = pd.DataFrame(rows, columns=[*runs, *columns])
    # each seed's numbers first (its experts are its own), then their mean
    return per_run.groupby([*by, "layer"], sort=False)[columns].mean().reset_index()


def align_experts(usage: pd.DataFrame, by: Sequence[str] = ("model", "seed")) -> pd.DataFrame:
    """`usage` with its experts renumbered per group of `by` and block: 0 is the expert the questions use most,
    then down by the questions' share (ties: by the passages' share). A router's expert numbers mean nothing across
    seeds (two seeds may learn the same split with the experts swapped), so shares are averaged over seeds only
    after this alignment. Det-R's Q-FFN stays expert 0."""
    by = [c for c in by if c in usage.columns]
    out = usage.copy()
    for _, block in usage.groupby([*by, "layer"], sort=False):
        shares = block.pivot_table(index="expert", columns="side", values="share", aggfunc="mean")
        keys = [c for c in ("question", "passage") if c in shares.columns]
        order = shares.sort_values(keys, ascending=False, kind="stable").index.tolist()
        out.loc[block.index, "expert"] = block["expert"].map({e: i for i, e in enumerate(order)})
    return out
