"""A sentence-transformers input module that runs a taser_lib TASER model (Det-R, Seq-R or Tok-R).

Exports of TASER with specialized blocks (`taser_lib.export`) list this class in modules.json. It holds the one TASER
encoder (each shared weight stored once) and hands the input kind to the specialized blocks from
sentence-transformers' task: `encode_query` runs the "query" kind (Det-R's Q-FFN), `encode_document` and plain
`encode` the "passage" kind (P-FFN). Learned routing (Seq-R, Tok-R) routes each input by itself, in eval mode by
the router's argmax, as `DenseEncoder` does.

Tokenisation is `DenseEncoder`'s (`encoding.tokenize_passages`, in the model config's `passage_format`): a query
is `[CLS] q [SEP]` cut to `max_query_length`; a passage given as a (title, text) pair is, for a "pair" model,
`[CLS] title [SEP] text [SEP]` (token types 0 then 1, only the text truncated; a batch holding any titled passage
encodes its untitled ones as pairs with an empty title) and, for a "concat" model, the one string "title text"; a
plain string is `[CLS] text [SEP]`; passages are cut to `max_passage_length`. The module outputs the final token
vectors (`token_embeddings`); sentence-transformers' own Pooling and Normalize modules follow it.

Loading one needs taser_lib installed and, since sentence-transformers 6 refuses to import any module class
outside its own package otherwise, `SentenceTransformer(folder, trust_remote_code=True)` (or
`module_classes={"taser_lib.models.st_module.TaserEncoder": TaserEncoder}`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from sentence_transformers.sentence_transformer.modules import InputModule
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from .encoding import model_passage_format, tokenize_passages

CONFIG_FILE = "taser_module_config.json"  # beside the model's own config.json (saved in the export's root)


class TaserEncoder(InputModule):
    """sentence-transformers module: tokenise like `DenseEncoder`, run a `TaserModel` for the task's input kind,
    output `token_embeddings`."""

    config_keys = ["max_query_length", "max_passage_length"]
    config_file_name = CONFIG_FILE
    forward_kwargs = {"task"}
    save_in_root = True

    def __init__(self, model, tokenizer: PreTrainedTokenizerBase, max_query_length: int = 64,
                 max_passage_length: int = 256):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.max_query_length = int(max_query_length)
        self.max_passage_length = int(max_passage_length)

    @staticmethod
    def kind(task: str | None) -> str:
        """sentence-transformers' task -> our input kind: "query" -> query; "document" or none -> passage."""
        return "query" if task == "query" else "passage"

    @property
    def max_seq_length(self) -> int:
        return self.max_passage_length

    def get_embedding_dimension(self) -> int:
        return self.model.config.hidden_size

    get_word_embedding_dimension = get_embedding_dimension

    def preprocess(self, inputs: Sequence[Any], prompt: str | None = None, task: str | None = None,
                   **kwargs) -> dict[str, Any]:
        if not inputs:
            return {}
        common = {"padding": True, "return_tensors": "pt"}
        if self.kind(task) == "query":
            texts = [(prompt or "") + q for q in inputs]
            features = self.tokenizer(texts, truncation=True, max_length=self.max_query_length,
                                      return_token_type_ids=True, **common)
        else:
            passages = [tuple(p) if isinstance(p, list) else p for p in inputs]
            features = tokenize_passages(self.tokenizer, passages, self.max_passage_length,
                                         model_passage_format(self.model), prompt=prompt or "", **common)
        features = dict(features)
        features["task"] = task
        return features

    def forward(self, features: dict[str, Any], task: str | None = None, **kwargs) -> dict[str, Any]:
        task = task if task is not None else features.get("task")
        token_type_ids = features.get("token_type_ids")
        features["token_embeddings"] = self.model.encode_tokens(
            self.kind(task), features["input_ids"], features["attention_mask"],
            torch.zeros_like(features["input_ids"]) if token_type_ids is None else token_type_ids)
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.model.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(output_path)
        self.save_config(output_path)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs) -> "TaserEncoder":
        from . import load_model  # the package's loader (registers our configs with transformers)

        hub = {"token": token, "cache_folder": cache_folder, "revision": revision,
               "local_files_only": local_files_only}
        folder = Path(cls.load_dir_path(model_name_or_path, subfolder=subfolder, **hub))
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        return cls(load_model(folder), AutoTokenizer.from_pretrained(folder), **config)
