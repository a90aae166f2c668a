"""DPR bi-encoder (Karpukhin et al. 2020; TASER Sec. 2): two separately parameterised BERT towers, one for
questions and one for passages, [CLS] pooling, dot-product similarity. TASER's baseline: twice the parameters."""

from __future__ import annotations

from pathlib import Path

from torch import nn
from transformers import BertConfig, BertModel, PreTrainedModel

from ..errors import ConfigError
from .common import (PASSAGE_FORMATS, POOLINGS, BiEncoderMixin, Kind, checkpoint_passage_format, checkpoint_pooling,
                     init_projection, mlm_head_field, normalize_field, passage_format_field, pooling_field,
                     projection_dim_field, similarity_scale_field)
from .mlm_head import MaskedLMHead, init_head
from .weights import load_bert


class DPRConfig(BertConfig):
    """A BERT config (shared by both towers) plus the bi-encoder's pooling and similarity."""

    model_type = "taser-dpr"
    pooling: str = pooling_field()
    normalize: bool = normalize_field()
    similarity_scale: float = similarity_scale_field()
    projection_dim: int | None = projection_dim_field()
    mlm_head: bool = mlm_head_field()
    passage_format: str = passage_format_field()

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.passage_format not in PASSAGE_FORMATS:
            raise ConfigError(f"passage_format must be one of {PASSAGE_FORMATS}, got {self.passage_format!r}")
        if self.projection_dim is not None and self.projection_dim < 1:
            raise ConfigError(f"projection_dim must be >= 1 (or null: no projection), got {self.projection_dim}")


class DPRModel(BiEncoderMixin, PreTrainedModel):
    config_class = DPRConfig
    base_model_prefix = "dpr"
    _no_split_modules = ["BertEmbeddings", "BertLayer"]
    _supports_sdpa = True

    def __init__(self, config: DPRConfig):
        super().__init__(config)
        self.question_encoder = BertModel(config, add_pooling_layer=False)
        self.passage_encoder = BertModel(config, add_pooling_layer=False)
        # one head per tower, each tied to its own tower's word embeddings (the towers diverge in training)
        self.mlm_heads = nn.ModuleDict({"query": MaskedLMHead(config), "passage": MaskedLMHead(config)}) \
            if config.mlm_head else None
        # one embedding projection per tower (`projection_dim`), as the towers themselves
        self.embedding_projections = nn.ModuleDict(
            {kind: nn.Linear(config.hidden_size, config.projection_dim, bias=False) for kind in ("query", "passage")}
        ) if getattr(config, "projection_dim", None) else None
        self.post_init()

    def _projection(self, kind: Kind):
        return self.embedding_projections[kind] if self.embedding_projections is not None else None

    def _mlm(self, kind: Kind):
        tower = self.question_encoder if kind == "query" else self.passage_encoder
        return self.mlm_heads[kind], tower.embeddings.word_embeddings.weight

    def _encode(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        tower = self.question_encoder if kind == "query" else self.passage_encoder
        hidden = tower(input_ids=input_ids, attention_mask=attention_mask,
                       token_type_ids=token_type_ids).last_hidden_state
        return hidden, hidden.new_zeros(())

    @classmethod
    def from_bert(cls, name_or_path: str | Path = "default", *, pooling: str | None = None,
                  normalize: bool | None = None, passage_format: str | None = None, allow_pickle: bool = False,
                  **config_overrides) -> "DPRModel":
        """Both towers initialised from the same BERT checkpoint (they diverge in training); `num_hidden_layers`
        keeps its first L layers; `projection_dim` gives each tower a projection, both starting as the same random
        orthogonal map."""
        bert, path = load_bert(name_or_path, allow_pickle, config_overrides.get("num_hidden_layers"))
        own = checkpoint_pooling(path)
        config = DPRConfig(**{
            **bert.config.to_dict(), "model_type": "taser-dpr", "architectures": ["DPRModel"],
            "pooling": pooling or (own[0] if own else "cls"),
            "normalize": normalize if normalize is not None else (own[1] if own else False),
            "passage_format": passage_format or checkpoint_passage_format(path) or "pair",
            **config_overrides,
        })
        model = cls(config)
        model.question_encoder.load_state_dict(bert.state_dict())
        model.passage_encoder.load_state_dict(bert.state_dict())
        if model.embedding_projections is not None:
            init_projection(model.embedding_projections["query"])
            model.embedding_projections["passage"].load_state_dict(model.embedding_projections["query"].state_dict())
        if model.mlm_heads is not None:
            for head in model.mlm_heads.values():
                init_head(head, path)
        return model
