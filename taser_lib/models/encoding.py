"""Turn texts into float32 embedding arrays with any bi-encoder, fast.

Inputs are tokenised once, sorted by length so each batch pads only to its own longest input, run under
`torch.inference_mode`, and returned in the caller's order. Passages go in DPR style as the text pair
(title, text), i.e. `[CLS] title [SEP] text [SEP]`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm
from transformers import PreTrainedTokenizerBase

from ..io import atomic_dir
from .common import Kind

PassageInput = str | tuple[str, str]


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def passage_pair(passage) -> tuple[str, str]:
    """(title, text) from a plain string, a (title, text) tuple or an object with .title / .text."""
    if isinstance(passage, str):
        return "", passage
    if isinstance(passage, tuple):
        return passage
    return passage.title, passage.text


class DenseEncoder:
    """`encode_queries` / `encode_passages` for a `TaserModel` or `DPRModel` and its tokenizer."""

    def __init__(self, model, tokenizer: PreTrainedTokenizerBase, *, max_query_length: int = 64,
                 max_passage_length: int = 256, batch_size: int = 64, device: str | torch.device | None = None,
                 show_progress: bool = True):
        self.device = torch.device(device) if device else default_device()
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.max_query_length = max_query_length
        self.max_passage_length = max_passage_length
        self.batch_size = batch_size
        self.show_progress = show_progress

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    def tokenize_queries(self, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        return self.tokenizer(list(texts), truncation=True, max_length=max_length or self.max_query_length,
                              return_token_type_ids=False, return_attention_mask=False)["input_ids"]

    def tokenize_passages(self, passages: Sequence, max_length: int | None = None) -> dict:
        pairs = [passage_pair(p) for p in passages]
        titles = [t for t, _ in pairs]
        texts = [x for _, x in pairs]
        max_length = max_length or self.max_passage_length
        if not any(titles):
            return self.tokenizer(texts, truncation=True, max_length=max_length, return_attention_mask=False)
        return self.tokenizer(titles, texts, truncation="only_second", max_length=max_length,
                              return_attention_mask=False)

    def encode_queries(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        ids = self.tokenize_queries(texts)
        return self._encode("query", ids, None, batch_size, desc="queries")

    def encode_passages(self, passages: Sequence[PassageInput], batch_size: int | None = None) -> np.ndarray:
        enc = self.tokenize_passages(passages)
        return self._encode("passage", enc["input_ids"], enc.get("token_type_ids"), batch_size, desc="passages")

    def _encode(self, kind: Kind, input_ids: list[list[int]], token_type_ids: list[list[int]] | None,
                batch_size: int | None, desc: str) -> np.ndarray:
        batch_size = batch_size or self.batch_size
        out = np.empty((len(input_ids), self.dim), dtype=np.float32)
        order = np.argsort([-len(x) for x in input_ids], kind="stable")  # longest first: OOM shows up at once
        pad = self.tokenizer.pad_token_id
        bar = tqdm(total=len(input_ids), desc=f"encode {desc}", disable=not self.show_progress, unit="text")
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
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
                reps = (self.model.encode_query if kind == "query" else self.model.encode_passage)(**batch)
                out[idx] = reps.float().cpu().numpy()
                bar.update(len(idx))
        bar.close()
        return out

    def save(self, path: str | Path) -> None:
        """Model (safetensors) and tokenizer, loadable with `load_encoder(path)`."""
        with atomic_dir(path) as tmp:
            self.model.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)
