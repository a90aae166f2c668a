"""Cross-attention (CA) ranker ("In defense of dual-encoders", Sec. 2): BERT reads the concatenation
[CLS] q [SEP] d [SEP]; a linear head on the final [CLS] vector gives the score s(q, d)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import BertConfig, BertModel, PreTrainedModel

from .weights import load_bert


class CrossEncoderConfig(BertConfig):
    model_type = "taser-cross-encoder"


class CrossEncoderModel(PreTrainedModel):
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
        cls = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids).last_hidden_state[:, 0]
        return self.score(self.dropout(cls)).squeeze(-1)

    @classmethod
    def from_bert(cls, name_or_path: str | Path = "default", *, allow_pickle: bool = False,
                  **config_overrides) -> "CrossEncoderModel":
        """BERT body from the checkpoint (its first `num_hidden_layers` layers when set); the scoring head starts
        fresh."""
        bert, _ = load_bert(name_or_path, allow_pickle, config_overrides.get("num_hidden_layers"))
        config = CrossEncoderConfig(**{**bert.config.to_dict(), "model_type": "taser-cross-encoder",
                                       "architectures": ["CrossEncoderModel"], **config_overrides})
        model = cls(config)
        model.bert.load_state_dict(bert.state_dict())
        return model
