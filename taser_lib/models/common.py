"""What every retriever here shares: pooling, the representations, and the Tevatron-style interface.

A retriever maps a question batch and a passage batch to representations (`encode_query`, `encode_passage`) and
scores every question against every passage with `compute_similarity(q_reps, p_reps) -> [Bq, Bp]`: a dot product
of pooled vectors for the bi-encoders (TASER Sec. 2, optionally scaled for cosine training), MaxSim over token
vectors for ColBERT (`TokenReps`). Its `forward` returns both sides plus TASER's routing-entropy term L_ent (Eq. 4)
and, for masked inputs, the masked-LM loss. Losses live in `taser_lib.losses`; trainers combine the two (and gather the
passage representations across devices around `compute_similarity`, never instead of it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from transformers.utils import ModelOutput

from ..losses import masked_lm_loss

Kind = Literal["query", "passage"]
POOLINGS = ("cls", "mean")
# How a titled passage goes into the encoder: DPR's text pair `[CLS] title [SEP] text [SEP]` (the papers: models
# trained from a plain BERT) or one string "title text" (sentence-transformers checkpoints and models trained from
# them). A model's config records its own (`passage_format`); training and retrieval both follow it.
PASSAGE_FORMATS = ("pair", "concat")


def described(default, help: str):
    """A config-class field with its help text (the one place a model field is documented: `taser train
    --print-config` and `models.auto.model_fields` read it)."""
    return field(default=default, metadata={"help": help})


# The bi-encoder fields TASER, DPR and ColBERT configs all have (one definition, one help text each).
def pooling_field():
    return described("cls", "cls | mean: the final [CLS] vector (the papers) or the mean over real tokens; "
                            "unset when built from a checkpoint = its own (mean for the default, cls for BERT)")


def passage_format_field():
    return described("pair", "pair | concat: a titled passage as the pair [CLS] title [SEP] text [SEP] (DPR, the "
                             "papers) or one string 'title text' (sentence-transformers); unset when built from a "
                             "checkpoint = its own (concat for the default, pair for BERT); training and retrieval "
                             "both follow it")


def normalize_field(default: bool = False):
    return described(default, "L2-normalise the vectors (cosine similarity); unset when built from a checkpoint = "
                              "its own")


def similarity_scale_field():
    return described(1.0, "s in sim = s * q.p: 1 for dot product (papers), ~20 for cosine (an inverse "
                          "temperature: unscaled cosines give a flat softmax)")


def mlm_head_field():
    return described(False, "a masked-LM head per tower, tied to its word embeddings, for the auxiliary MLM loss "
                            "(DE Table 9)")


def projection_dim_field():
    return described(None, "size of the embedding: a learned linear map (no bias) of the pooled vector to this "
                           "many dimensions, before any normalisation (DE capacity sweeps, Figs. 1, 3); starts "
                           "as a random orthogonal map; null = no projection (the hidden size)")


def init_projection(linear: torch.nn.Linear, generator: torch.Generator | None = None) -> None:
    """A fresh embedding projection as a random orthogonal map: orthonormal rows (projection_dim < hidden) or
    columns (>=), so at projection_dim = hidden_size the untrained model scores exactly as its checkpoint."""
    with torch.no_grad():
        torch.nn.init.orthogonal_(linear.weight, generator=generator)


def pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[CLS] pooling (the papers: the final [CLS] vector, TASER Sec. 2) or mean over real tokens."""
    if pooling == "cls":
        return last_hidden_state[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
        return (last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")


def checkpoint_pooling(path: str | Path) -> tuple[str, bool] | None:
    """The pooling a sentence-transformers checkpoint was trained with: (pooling, normalize), or None.

    A checkpoint used zero-shot keeps its own pooling: the packaged MiniLM was trained with mean pooling and a
    final L2 normalisation (modules.json lists a Normalize module), and [CLS] pooling would misuse it.
    """
    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = json.loads(modules_file.read_text())
    pooling, normalize = None, False
    for module in modules:
        kind = module.get("type", "")
        if kind.endswith("Pooling"):
            cfg = json.loads((path / module.get("path", "") / "config.json").read_text())
            if cfg.get("pooling_mode_cls_token") or cfg.get("pooling_mode") == "cls":  # (sentence-transformers 6)
                pooling = "cls"
            elif cfg.get("pooling_mode_mean_tokens") or cfg.get("pooling_mode") == "mean":
                pooling = "mean"
            else:
                raise ValueError(f"{path}: unsupported sentence-transformers pooling {cfg}")
        elif kind.endswith("Normalize"):
            normalize = True
    return (pooling, normalize) if pooling else None


def checkpoint_passage_format(path: str | Path) -> str | None:
    """How a checkpoint reads a titled passage: the `passage_format` its config.json records (our models, and the
    stock BERT of our sentence-transformers exports), else "concat" for a sentence-transformers checkpoint
    (modules.json: its models take one string per text, and its users join title and text, as BEIR's SentenceBERT
    does with `(title + " " + text).strip()`), else None (a plain BERT: the caller's default, DPR's pair).

    As with pooling, a checkpoint used zero-shot keeps its own convention: the packaged MiniLM was trained on
    single strings; fed pairs it scores 0.5 to 0.7 nDCG@10 points lower on CISI (within noise on its 76 judged
    queries, but a systematic mismatch)."""
    path = Path(path)
    config_file = path / "config.json"
    if config_file.is_file():
        own = json.loads(config_file.read_text()).get("passage_format")
        if own is not None:
            if own not in PASSAGE_FORMATS:
                raise ValueError(f"{config_file}: passage_format must be one of {PASSAGE_FORMATS}, got {own!r}")
            return own
    return "concat" if (path / "modules.json").is_file() else None


def passage_string(title: str, text: str) -> str:
    """A titled passage as one string, the sentence-transformers way (BEIR's `(title + " " + text).strip()`); an
    untitled one is its text."""
    return f"{title} {text}".strip() if title else text


@dataclass
class TokenReps:
    """Late-interaction representations: every token's vector `[B, L, d]` and its attention mask `[B, L]`
    (padding never scores). Indexing selects rows, like a `[B, d]` tensor of pooled vectors."""

    vectors: torch.Tensor
    mask: torch.Tensor

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def __getitem__(self, rows) -> "TokenReps":
        if isinstance(rows, int):
            rows = slice(rows, rows + 1)
        return TokenReps(self.vectors[rows], self.mask[rows])

    def pad_to(self, length: int) -> "TokenReps":
        """The same rows padded (zero vectors, mask 0) to `length` tokens."""
        extra = length - self.vectors.shape[1]
        if extra < 0:
            raise ValueError(f"cannot pad {self.vectors.shape[1]} tokens to {length}")
        if extra == 0:
            return self
        return TokenReps(F.pad(self.vectors, (0, 0, 0, extra)), F.pad(self.mask, (0, extra)))

    def to(self, device: torch.device | str) -> "TokenReps":
        return TokenReps(self.vectors.to(device), self.mask.to(device))

    def float(self) -> "TokenReps":
        return TokenReps(self.vectors.float(), self.mask)

    @staticmethod
    def cat(parts: "list[TokenReps]") -> "TokenReps":
        """Rows of every part, padded to the longest."""
        length = max(p.vectors.shape[1] for p in parts)
        padded = [p.pad_to(length) for p in parts]
        return TokenReps(torch.cat([p.vectors for p in padded]), torch.cat([p.mask for p in padded]))


Reps = torch.Tensor | TokenReps  # what encode_query / encode_passage return: [B, d] pooled vectors or token vectors


def cat_reps(parts: list[Reps]) -> Reps:
    """Concatenate representations along the batch (token representations padded to the longest)."""
    return TokenReps.cat(parts) if isinstance(parts[0], TokenReps) else torch.cat(parts)


@dataclass
class RetrieverOutput(ModelOutput):
    """From one forward: TASER's routing-entropy term L_ent (Eq. 4 under the config's `entropy_mode`, averaged
    over the specialized blocks and added over the two sides; zero without learned routing: trainers weight it by
    beta, Eq. 5), the question and passage
    representations and, when masked inputs were given, the masked-LM loss (DE Table 9)."""

    entropy: torch.Tensor | None = None  # first: ModelOutput treats a non-tensor first field as a container
    q_reps: Reps | None = None
    p_reps: Reps | None = None
    mlm_loss: torch.Tensor | None = None


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def has_tokenizer(folder: str | Path) -> bool:
    """Whether `folder` holds a tokenizer's vocabulary (one of TOKENIZER_FILES)."""
    return any((Path(folder) / name).is_file() for name in TOKENIZER_FILES)


def save_tokenizer(model, folder: str | Path, tokenizer=None) -> None:
    """Write `tokenizer`, else the tokenizer of the folder `model` was loaded or built from, into `folder`, unless
    it already holds one or no such source is known."""
    folder = Path(folder)
    if tokenizer is None:
        source = Path(str(getattr(model, "name_or_path", "") or ""))
        if has_tokenizer(folder) or not str(source) or not source.is_dir() or not has_tokenizer(source):
            return
        if source.resolve() == folder.resolve():
            return
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.save_pretrained(folder)


class SavesTokenizer:
    """`save_pretrained` also writes the tokenizer (`save_tokenizer`; pass `tokenizer=` to choose it), so that
    `load_encoder(folder)` works on every folder the library saved."""

    def save_pretrained(self, save_directory, *args, tokenizer=None, **kwargs):
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            save_tokenizer(self, save_directory, tokenizer)


class BiEncoderMixin(SavesTokenizer):
    """Shared methods of `TaserModel`, `DPRModel` and `ColbertModel`. Subclasses implement `_encode(kind, ...)`
    returning (last_hidden_state, L_ent) and `_mlm(kind)` returning (MaskedLMHead, word embedding weights) of the tower
    that encodes `kind`, and hold `config.pooling`, `config.normalize`, `config.similarity_scale`,
    `config.mlm_head`."""

    def _encode(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        raise NotImplementedError

    def _mlm(self, kind: Kind):
        raise NotImplementedError

    def masked_lm_loss(self, kind: Kind, input_ids, attention_mask, labels, token_type_ids=None) -> torch.Tensor:
        """BERT's MLM loss of a masked `kind` batch (labels: -100 where not masked; see `losses.mlm_mask`) through
        the tower that encodes `kind`. Needs a model built with `mlm_head=True`."""
        if not getattr(self.config, "mlm_head", False):
            raise ValueError("this model has no masked-LM head: build it with mlm_head=True")
        hidden, _ = self._encode(kind, input_ids, attention_mask, token_type_ids)
        head, word_embeddings = self._mlm(kind)
        return masked_lm_loss(head(hidden, word_embeddings), labels)

    @property
    def entropy_weight(self) -> float:
        """beta of TASER Eq. 5 (0 for architectures without learned routing)."""
        return float(getattr(self.config, "entropy_weight", 0.0))

    def _projection(self, kind: Kind) -> torch.nn.Module | None:
        """The embedding projection of the tower that encodes `kind` (`projection_dim`), or None."""
        return getattr(self, "embedding_projection", None)

    def _represent(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        """(representation, L_ent) of a `kind` batch: pooled vectors (projected to `projection_dim` when the
        config sets it, then normalised when it says so); ColBERT returns token vectors."""
        hidden, entropy = self._encode(kind, input_ids, attention_mask, token_type_ids)
        reps = pool(hidden, attention_mask, self.config.pooling)
        projection = self._projection(kind)
        if projection is not None:
            reps = projection(reps)
        if self.config.normalize:
            reps = F.normalize(reps, dim=-1)
        return reps, entropy

    def encode_query(self, input_ids, attention_mask, token_type_ids=None) -> Reps:
        return self._represent("query", input_ids, attention_mask, token_type_ids)[0]

    def encode_passage(self, input_ids, attention_mask, token_type_ids=None) -> Reps:
        return self._represent("passage", input_ids, attention_mask, token_type_ids)[0]

    def encode_tokens(self, kind: Kind, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """Every token's final vector [B, L, d] (for late interaction, see `colbert`)."""
        return self._encode(kind, input_ids, attention_mask, token_type_ids)[0]

    def compute_similarity(self, q_reps: torch.Tensor, p_reps: torch.Tensor) -> torch.Tensor:
        """sim(q, p) = s * q^T p for every question against every passage, `[Bq, Bp]` (TASER Sec. 2; s = 1 for
        dot product, s > 1 to sharpen cosine scores). Holds no parameters, so trainers may call it outside the
        (DistributedDataParallel) forward, on passages gathered from every device."""
        return self.config.similarity_scale * q_reps @ p_reps.transpose(0, 1)

    def forward(self, query: dict | None = None, passage: dict | None = None,
                masked_query: dict | None = None, masked_passage: dict | None = None) -> RetrieverOutput:
        """Encode a tokenised question batch and/or passage batch (dicts of input_ids, attention_mask, ...); with
        masked batches (the same dicts plus `labels`) also return the mean of their masked-LM losses. Everything
        goes through this one forward so that DistributedDataParallel sees every parameter used."""
        q_reps = p_reps = None
        entropies = []
        if query is not None:
            q_reps, e = self._represent("query", **query)
            entropies.append(e)
        if passage is not None:
            p_reps, e = self._represent("passage", **passage)
            entropies.append(e)
        entropy = sum(entropies) if entropies else None
        mlm = [self.masked_lm_loss(kind, **batch) for kind, batch in (("query", masked_query),
                                                                      ("passage", masked_passage))
               if batch is not None]
        mlm_loss = torch.stack(mlm).mean() if mlm else None
        return RetrieverOutput(entropy=entropy, q_reps=q_reps, p_reps=p_reps, mlm_loss=mlm_loss)
