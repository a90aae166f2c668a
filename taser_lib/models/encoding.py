"""Turn texts into float32 embedding arrays with any bi-encoder, fast.

Inputs are tokenised once, sorted by length so each batch pads only to its own longest input, run under
`torch.inference_mode`, and returned in the caller's order. A titled passage goes in as the model's config says
(`passage_format`, `tokenize_passages`): DPR style as the text pair `[CLS] title [SEP] text [SEP]` ("pair": plain
BERT checkpoints and the models trained from them, as in the papers), or as one string "title text" ("concat":
sentence-transformers checkpoints such as the default, and the models trained from them), so that every checkpoint
reads passages in its own convention, as it keeps its own pooling. Training (`training.retriever.RetrieverCollator`)
tokenises with the same function, so a model is trained and used on the same input.

Queries are cut to `max_query_length` tokens; `covering_length` gives the smallest length that cuts none of a set
of texts (BEIR practice for long queries: `analyses.baselines.query_length`), and `query_length(n)` sets it for
a block.

An encode call runs PyTorch's stock kernels, or, once the optional `taser_lib.speed` is imported (`taser_lib.plugins`;
the `taser` command and the book import it), oneDNN's fused linears on the CPU (bias, GELU and the residual add inside
the matrix multiply) where this machine measured them faster on the encoder's own batches (`speed.fused.KernelChoice`:
a trial on the first batches of a large enough call, kept per machine, dtype and model shape;
`fuse_cpu_linears=True/False` forces either).

`precision` (`fp32 | bf16 | auto`, `taser_lib.models.precision`): at bf16 the encoder runs a bfloat16 copy of the
model (made when an encode call first needs it, and made again only when the weights have changed since), with the
same kernel choice in bfloat16 on the CPU, and returns float32 arrays as always. On a CPU with native bf16 this is
about 1.6x faster than float32 at a minimum cosine to the float32 vectors of about 0.9999 (`taser bench`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn
from ..progress import tqdm
from transformers import PreTrainedTokenizerBase

from ..errors import ConfigError
from ..io import atomic_dir
from ..plugins import speed
from .common import PASSAGE_FORMATS, Kind, Reps, TokenReps, cat_reps, passage_string
from .precision import check_precision, resolve_precision

PassageInput = str | tuple[str, str] | Mapping


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def passage_pair(passage) -> tuple[str, str]:
    """(title, text) from a plain string, a (title, text) tuple, a record with "text" and an optional "title"
    (a BEIR corpus.jsonl line as read by `json.loads`) or an object with .title / .text."""
    if isinstance(passage, str):
        return "", passage
    if isinstance(passage, tuple):
        return passage
    if isinstance(passage, Mapping):
        if not isinstance(passage.get("text"), str):
            raise ConfigError(f"a passage record needs a \"text\" string (and may have a \"title\"); got the keys "
                              f"{sorted(passage)}")
        return passage.get("title") or "", passage["text"]
    return passage.title, passage.text


def tokenize_passages(tokenizer: PreTrainedTokenizerBase, passages: Sequence, max_length: int,
                      passage_format: str = "pair", prompt: str = "", **kwargs):
    """Tokenise passages (strings, (title, text) tuples or objects with .title / .text) in `passage_format`:

    - "pair": a batch with any title goes in as text pairs `[CLS] title [SEP] text [SEP]` (token types 0 then 1;
      only the text truncated, "only_second"; an untitled passage of such a batch has an empty title); a batch
      without titles as `[CLS] text [SEP]`.
    - "concat": every passage as one string `[CLS] title text [SEP]` (`passage_string`), truncated at the end.

    `prompt` is put before the first segment (sentence-transformers prompts). `kwargs` go to the tokenizer
    (padding, return_tensors, ...). The one tokenisation of passages: `DenseEncoder`, the retriever trainer's
    collator and the sentence-transformers export module all call it."""
    if passage_format not in PASSAGE_FORMATS:
        raise ValueError(f"passage_format must be one of {PASSAGE_FORMATS}, got {passage_format!r}")
    pairs = [passage_pair(p) for p in passages]
    if passage_format == "concat" or not any(t for t, _ in pairs):
        texts = [prompt + passage_string(t, x) for t, x in pairs]
        return tokenizer(texts, truncation=True, max_length=max_length, **kwargs)
    titles = [prompt + t for t, _ in pairs]
    texts = [x for _, x in pairs]
    return tokenizer(titles, texts, truncation="only_second", max_length=max_length, **kwargs)


def covering_length(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], limit: int | None = None) -> int:
    """The smallest max_length that truncates none of `texts` (special tokens included), at most `limit`."""
    if not texts:
        raise ValueError("covering_length: no texts")
    longest = max(len(ids) for ids in tokenizer(list(texts), return_attention_mask=False,
                                                 return_token_type_ids=False)["input_ids"])
    return min(longest, limit) if limit else longest


def _weights_key(model: nn.Module) -> tuple:
    """Changes whenever a parameter is replaced, moved or updated in place (optimizer steps bump `_version`)."""
    return tuple((p.data_ptr(), p._version, p.dtype) for p in model.parameters())


def bf16_copy(model: nn.Module) -> nn.Module:
    """A bfloat16 copy of `model` for inference, made without a transient float32 copy of its weights."""
    memo = {id(p): nn.Parameter(p.detach().to(torch.bfloat16), requires_grad=False) for p in model.parameters()}
    clone = copy.deepcopy(model, memo)
    return clone.to(torch.bfloat16).train(model.training)


def model_passage_format(model) -> str:
    """The passage format a model reads (its config's `passage_format`; "pair" for a config without one)."""
    return getattr(getattr(model, "config", None), "passage_format", None) or "pair"


class StockKernels:
    """PyTorch's own kernels for every batch of an encode call: what runs without `taser_lib.speed`, whose
    `KernelChoice` (oneDNN's fused linears where measured faster) takes the same arguments."""

    def __init__(self, setting: bool | None, device, dtype: str, model: nn.Module, n_batches: int):
        if setting:
            raise ConfigError("fuse_cpu_linears=True needs the optional speed package: `import taser_lib.speed` first")

    @contextmanager
    def batch(self, model: nn.Module, b: int, tokens: int) -> Iterator[None]:
        yield


class DenseEncoder:
    """`encode_queries` / `encode_passages` (float32 arrays for a dense index) for a `TaserModel` or `DPRModel`
    and its tokenizer; `represent_queries` / `represent_passages` (the model's own representations, ColBERT's
    token vectors too) for scoring with the model's `compute_similarity`; `encode(sentences, prompt_name)`,
    `encode_query` and `encode_document` as sentence-transformers names them.

    `fuse_cpu_linears`: None (auto) runs oneDNN's fused linears on a CPU where they measured faster on this
    model's own batches (`speed.fused.KernelChoice`, once `taser_lib.speed` is imported; stock kernels without it);
    True or False forces them on or off (stock PyTorch kernels; True needs `taser_lib.speed`). `precision` is
    `fp32 | bf16 | auto` (module docstring); `resolved_precision` says what it means on this device.
    `passage_format` (`pair | concat`, `tokenize_passages`) defaults to the model config's own (pair for a model
    without one)."""

    def __init__(self, model, tokenizer: PreTrainedTokenizerBase, *, max_query_length: int = 64,
                 max_passage_length: int = 256, batch_size: int = 64, device: str | torch.device | None = None,
                 show_progress: bool = True, fuse_cpu_linears: bool | None = None, precision: str = "fp32",
                 passage_format: str | None = None):
        self.device = torch.device(device) if device else default_device()
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_passage_length = max_passage_length
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.fuse_cpu_linears = fuse_cpu_linears
        self.precision = check_precision(precision)
        self.passage_format = passage_format or model_passage_format(model)
        if self.passage_format not in PASSAGE_FORMATS:
            raise ConfigError(f"passage_format must be one of {PASSAGE_FORMATS}, got {self.passage_format!r}")
        self._low: tuple[tuple, nn.Module] | None = None  # (weights key, bf16 copy)

    @property
    def resolved_precision(self) -> str:
        """"fp32" or "bf16": what `precision` means on this encoder's device (`resolve_precision`)."""
        return resolve_precision(self.precision, self.device)

    def running_model(self) -> nn.Module:
        """The module an encode call runs: the model itself at fp32, else its bf16 copy (kept while the model's
        weights stay the same)."""
        if self.resolved_precision == "fp32" or next(self.model.parameters()).dtype == torch.bfloat16:
            self._low = None
            return self.model
        key = _weights_key(self.model)
        if self._low is None or self._low[0] != key:
            self._low = None  # free the stale copy before making the next
            self._low = (key, bf16_copy(self.model))
        self._low[1].train(self.model.training)
        return self._low[1]

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    def tokenize_queries(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        return self.tokenizer(list(texts), truncation=True, max_length=max_length or self.max_query_length,
                              return_token_type_ids=False, return_attention_mask=False)["input_ids"]

    def tokenize_passages(self, passages: Sequence, max_length: int | None = None) -> dict:
        return tokenize_passages(self.tokenizer, passages, max_length or self.max_passage_length,
                                 self.passage_format, return_attention_mask=False)

    def covering_query_length(self, texts: Sequence[str], limit: int | None = None) -> int:
        """The smallest query length that truncates none of `texts`, at most `limit` and at most the model's
        max_position_embeddings (`covering_length`)."""
        most = getattr(self.model.config, "max_position_embeddings", None)
        limit = min(x for x in (limit, most) if x) if (limit or most) else None
        return covering_length(self.tokenizer, texts, limit)

    @contextmanager
    def query_length(self, length: int | None) -> Iterator["DenseEncoder"]:
        """Within the block, cut queries to `length` tokens (None: unchanged)."""
        before = self.max_query_length
        self.max_query_length = length or before
        try:
            yield self
        finally:
            self.max_query_length = before

    def encode_queries(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        ids = self.tokenize_queries(texts)
        return self._encode("query", ids, None, batch_size, desc="queries")

    def encode_passages(self, passages: Sequence[PassageInput], batch_size: int | None = None) -> np.ndarray:
        enc = self.tokenize_passages(passages)
        return self._encode("passage", enc["input_ids"], enc.get("token_type_ids"), batch_size, desc="passages")

    def encode(self, sentences: str | Sequence[PassageInput], prompt_name: str | None = None, *,
               batch_size: int | None = None, show_progress_bar: bool | None = None) -> np.ndarray:
        """sentence-transformers' `encode`: `prompt_name` "query" encodes questions, "document" (the default, as
        sentence-transformers' asymmetric models) or "passage" encodes passages; one string gives one vector.
        `show_progress_bar` (None: the encoder's `show_progress`) switches this call's bar."""
        sides = {"query": self.encode_queries, "document": self.encode_passages, "passage": self.encode_passages,
                 None: self.encode_passages}
        if prompt_name not in sides:
            raise ConfigError(f"prompt_name must be 'query', 'document' or 'passage', got {prompt_name!r}")
        one = isinstance(sentences, str)
        before = self.show_progress
        self.show_progress = before if show_progress_bar is None else show_progress_bar
        try:
            out = sides[prompt_name]([sentences] if one else list(sentences), batch_size)
        finally:
            self.show_progress = before
        return out[0] if one else out

    def encode_query(self, sentences: str | Sequence[str], **kwargs) -> np.ndarray:
        """`encode(sentences, "query")`, as sentence-transformers' `encode_query`."""
        return self.encode(sentences, "query", **kwargs)

    def encode_document(self, sentences: str | Sequence[PassageInput], **kwargs) -> np.ndarray:
        """`encode(sentences, "document")`, as sentence-transformers' `encode_document`."""
        return self.encode(sentences, "document", **kwargs)

    def represent_queries(self, texts: Sequence[str], batch_size: int | None = None) -> Reps:
        """The model's own representations of `texts` in input order, on the CPU in float32: `[n, d]` vectors,
        or `TokenReps` (ColBERT, padded to the longest text); score them with the model's `compute_similarity`."""
        return self._represent("query", self.tokenize_queries(texts), None, batch_size, desc="queries")

    def represent_passages(self, passages: Sequence[PassageInput], batch_size: int | None = None) -> Reps:
        enc = self.tokenize_passages(passages)
        return self._represent("passage", enc["input_ids"], enc.get("token_type_ids"), batch_size, desc="passages")

    def _represent(self, kind: Kind, input_ids, token_type_ids, batch_size, desc: str) -> Reps:
        parts, rows = [], []
        for idx, reps in self._batches(kind, input_ids, token_type_ids, batch_size, desc):
            parts.append(reps.to("cpu").float())
            rows.append(torch.from_numpy(idx))
        if not parts:
            raise ValueError(f"no {desc} to encode")
        inverse = torch.empty(len(input_ids), dtype=torch.long)
        inverse[torch.cat(rows)] = torch.arange(len(input_ids))
        return cat_reps(parts)[inverse]

    def _encode(self, kind: Kind, input_ids: list[list[int]], token_type_ids: list[list[int]] | None,
                batch_size: int | None, desc: str) -> np.ndarray:
        out = np.empty((len(input_ids), self.dim), dtype=np.float32)
        for idx, reps in self._batches(kind, input_ids, token_type_ids, batch_size, desc):
            if isinstance(reps, TokenReps):
                raise ConfigError(f"{type(self.model).__name__} represents a text by its token vectors, not one "
                                  "vector: it cannot fill a dense index; score with represent_* and the model's "
                                  "compute_similarity")
            out[idx] = reps.float().cpu().numpy()
        return out

    def _batches(self, kind: Kind, input_ids: list[list[int]], token_type_ids: list[list[int]] | None,
                 batch_size: int | None, desc: str) -> Iterator[tuple[np.ndarray, Reps]]:
        """(input rows, their representations) per padded batch, longest inputs first."""
        batch_size = batch_size or self.batch_size
        order = np.argsort([-len(x) for x in input_ids], kind="stable")  # longest first: OOM shows up at once
        pad = self.tokenizer.pad_token_id
        bar = tqdm(total=len(input_ids), desc=f"encode {desc}", disable=not self.show_progress, unit="text")
        model = self.running_model()
        kernels = (speed.kernels or StockKernels)(self.fuse_cpu_linears, self.device, self.resolved_precision, model,
                                                  n_batches=-(-len(order) // batch_size))
        forward = model.encode_query if kind == "query" else model.encode_passage
        with torch.inference_mode():
            for b, start in enumerate(range(0, len(order), batch_size)):
                idx = order[start:start + batch_size]
                width = max(len(input_ids[i]) for i in idx)
                ids = torch.full((len(idx), width), pad, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                types = torch.zeros((len(idx), width), dtype=torch.long)
                for row, i in enumerate(idx):
                    n = len(input_ids[i])
                    ids[row, :n] = torch.tensor(input_ids[i])
                    mask[row, :n] = 1
                    if token_type_ids is not None:
                        types[row, :n] = torch.tensor(token_type_ids[i])
                batch = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device),
                         "token_type_ids": types.to(self.device)}
                with kernels.batch(model, b, ids.numel()):
                    reps = forward(**batch)
                yield idx, reps
                bar.update(len(idx))
        bar.close()

    def save(self, path: str | Path) -> None:
        """Model (safetensors) and tokenizer, loadable with `load_encoder(path)`."""
        with atomic_dir(path) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
