"""Cross-attention (CA) ranker ("In defense of dual-encoders", Sec. 2): BERT reads the concatenation
[CLS] q [SEP] d [SEP]; a linear head on the final [CLS] vector gives the score s(q, d).

`pooling: mean` reads the mean of the pair's token vectors instead. It is for checkpoints trained with mean pooling,
such as the packaged MiniLM, whose [CLS] vector carries little of the input: across 16 question-passage pairs its
final [CLS] varies by a standard deviation of 0.001 per dimension after 2 layers (0.23 after all 6), against a norm of
8, so a head on it barely learns (a 2-layer CA selected its untrained step in every run), where the mean-pooled
one fits the same pairs in 60 steps. The paper's CA, from BERT, reads [CLS]: the default."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import BertConfig, BertModel, PreTrainedModel

from ..errors import ConfigError
from .common import POOLINGS, SavesTokenizer, described, pool
from .weights import load_bert


class CrossEncoderConfig(BertConfig):
    model_type = "taser-cross-encoder"
    pooling: str = described("cls", "cls | mean: what the score head reads: the final [CLS] vector (the paper's CA) "
                                    "or the mean over the pair's real tokens (checkpoints trained with mean "
                                    "pooling, e.g. the default)")

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")


class CrossEncoderModel(SavesTokenizer, PreTrainedModel):
    config_class = CrossEncoderConfig
    base_model_prefix = "cross_encoder"
    _no_split_modules = ["BertEmbeddings", "BertLayer"]
    _supports_sdpa = True

    def __init__(self, config: CrossEncoderConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.score = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """Scores [B] for B (query, document) pairs tokenised as text pairs."""
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        return self.score(self.dropout(pool(hidden, attention_mask, self.config.pooling))).squeeze(-1)

    @classmethod
    def from_bert(cls, name_or_path: str | Path = "default", *, pooling: str | None = None,
                  allow_pickle: bool = False, **config_overrides) -> "CrossEncoderModel":
        """BERT body from the checkpoint (its first `num_hidden_layers` layers when set); the scoring head starts
        fresh and reads `pooling` (None: [CLS], the paper's)."""
        bert, _ = load_bert(name_or_path, allow_pickle, config_overrides.get("num_hidden_layers"))
        config = CrossEncoderConfig(**{**bert.config.to_dict(), "model_type": "taser-cross-encoder",
                                       "architectures": ["CrossEncoderModel"], **config_overrides,
                                       "pooling": pooling or "cls"})
        model = cls(config)
        model.bert.load_state_dict(bert.state_dict())
        return model
