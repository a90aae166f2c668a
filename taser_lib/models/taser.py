"""TASER: one BERT encoder whose blocks alternate between shared and specialized (Cheng et al., Sec. 3, App. A).

Counting from the bottom, every block after T shared blocks is specialized: with 12 layers and T = 2 the
specialized blocks are layers 3, 6, 9, 12 (1-based). A specialized block shares its attention sub-layer (with its
Add & Norm) and has I expert FFN sub-layers, each with its own output Add & Norm as in the released
microsoft/taser code, so their checkpoints convert without loss (`convert.py`). Routing picks one expert:

- ``deterministic`` (Det-R): questions use expert 0 (Q-FFN), passages expert 1 (P-FFN). A batch is all questions
  or all passages, so exactly one expert runs per batch.
- ``sequence`` (Seq-R) / ``token`` (Tok-R): R(u) = GumbelSoftmax(A u + c) (Eq. 3) per sequence (u = the [CLS]
  FFN input) or per token (u = h_j). Training samples a hard one-hot with the straight-through estimator and
  multiplies the chosen expert's output by its weight, so the router gets the task loss's gradient; evaluation
  takes the argmax. The routing-entropy term L_ent (Eq. 4) is returned for L_joint = L_sim + beta L_ent (Eq. 5),
  averaged over the specialized blocks and added over the question and passage passes. Its sign and target are
  `entropy_mode` (`losses.routing_entropy_term`): `release` (default, the authors' code: maximise each unit's
  routing entropy), `literal` (Eq. 4 as printed: minimise it) or `balance` (maximise the entropy of the
  batch-averaged routing, i.e. even expert usage).
- ``shared`` (TASER_Shared, I = 1): no specialization; the Siamese encoder, structurally plain BERT.

The model is a `BertModel` (embeddings, masks, attention kernels and loading all stock) whose specialized layers
are replaced by `TaserLayer`. What routing needs of one call travels through the forward: BertModel.forward hands
its extra keyword arguments to every layer, so `routing_kind` (question or passage) and `routing_mask` (the real
tokens) reach each specialized block, and the shared blocks pass them by.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.models.bert.modeling_bert import BertAttention, BertIntermediate, BertOutput

from ..errors import ConfigError
from ..losses import ENTROPY_MODES, batch_routing_entropy, routing_entropy, routing_entropy_term
from .common import (PASSAGE_FORMATS, POOLINGS, BiEncoderMixin, Kind, checkpoint_passage_format,
                     checkpoint_pooling, described, init_projection, mlm_head_field, normalize_field,
                     passage_format_field, pooling_field, projection_dim_field, similarity_scale_field)
from .mlm_head import MaskedLMHead, init_head
from .routing import ROUTINGS, Routing, routing_strategy
from .weights import load_bert


class TaserConfig(BertConfig):
    """A BERT config plus TASER's fields. `shared_blocks` is T, `num_experts` is I."""

    model_type = "taser"
    shared_blocks: int = described(2, "T: shared blocks before each specialized one (paper: 2)")
    num_experts: int = described(2, "I: expert FFNs per specialized block (Det-R needs 2, shared 1; from_bert: "
                                    "unset = 2, or 1 for shared routing)")
    routing: str = described("deterministic", "deterministic (Det-R) | sequence (Seq-R) | token (Tok-R) | shared "
                                              "(TASER_Shared, one expert)")
    pooling: str = pooling_field()
    normalize: bool = normalize_field()
    similarity_scale: float = similarity_scale_field()
    projection_dim: int | None = projection_dim_field()
    router_temperature: float = described(1.0, "Gumbel-softmax temperature of Seq-R / Tok-R routing (Eq. 3)")
    entropy_weight: float = described(0.01, "beta of TASER Eq. 5, the weight of the routing entropy L_ent for "
                                            "learned routing (paper: 0.01)")
    entropy_mode: str = described("release", "release | literal | balance: the routing-entropy term of Eq. 5 for "
                                             "learned routing: maximise each unit's entropy (the authors' code), "
                                             "minimise it (Eq. 4 as printed), or maximise the entropy of the "
                                             "batch-averaged routing (load balancing); losses.routing_entropy_term")
    passage_format: str = passage_format_field()
    mlm_head: bool = mlm_head_field()

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.shared_blocks < 1:
            raise ConfigError(f"shared_blocks (T) must be >= 1, got {self.shared_blocks}")
        if self.num_experts < 1:
            raise ConfigError(f"num_experts (I) must be >= 1, got {self.num_experts}")
        self.strategy.check(self.num_experts)  # an unknown name, or Det-R / shared with another number of experts
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.entropy_mode not in ENTROPY_MODES:
            raise ConfigError(f"entropy_mode must be one of {ENTROPY_MODES}, got {self.entropy_mode!r}")
        if self.passage_format not in PASSAGE_FORMATS:
            raise ConfigError(f"passage_format must be one of {PASSAGE_FORMATS}, got {self.passage_format!r}")
        if self.projection_dim is not None and self.projection_dim < 1:
            raise ConfigError(f"projection_dim must be >= 1 (or null: no projection), got {self.projection_dim}")

    @property
    def strategy(self) -> Routing:
        """The routing scheme `routing` names (`models.routing`)."""
        return routing_strategy(self.routing)

    @property
    def specialized_layers(self) -> list[int]:
        """0-based indices of the specialized blocks: every (T+1)-th block counting from the bottom."""
        return [i for i in range(self.num_hidden_layers) if (i + 1) % (self.shared_blocks + 1) == 0]


class ExpertFFN(nn.Module):
    """One expert: BERT's FFN sub-layer (Eq. 1) with its own output Add & Norm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, attention_output: torch.Tensor) -> torch.Tensor:
        return self.output(self.intermediate(attention_output), attention_output)


class TaserLayer(GradientCheckpointingLayer):
    """A specialized block: shared attention, I expert FFNs, a router. Drop-in for `BertLayer`."""

    def __init__(self, config: TaserConfig, layer_idx: int | None = None):
        super().__init__()
        self.config = config
        self.attention = BertAttention(config, layer_idx=layer_idx)
        self.experts = nn.ModuleList(ExpertFFN(config) for _ in range(config.num_experts))
        # A in R^{d x I}, c in R^I of Eq. 3; only learned routing has parameters.
        self.strategy = config.strategy
        self.router = nn.Linear(config.hidden_size, config.num_experts) if self.strategy.learned else None
        # What the last forward call's routing gave (read by TaserModel._encode).
        self.entropy: torch.Tensor | None = None
        self.stats: tuple[torch.Tensor, torch.Tensor] | None = None  # (per-unit, batch-average) entropy, detached

    def regularize(self, logits: torch.Tensor) -> None:
        """The entropy term of this call's routing logits (`[units, I]`) under the config's entropy_mode, and the
        two entropies for logging."""
        self.entropy = routing_entropy_term(logits, self.config.entropy_mode)
        with torch.no_grad():
            self.stats = (routing_entropy(logits), batch_routing_entropy(logits))

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, cache=None, routing_kind: Kind | None = None,
                routing_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
        self.entropy = self.stats = None
        h, _ = self.attention(hidden_states, attention_mask, cache=cache, **kwargs)
        return self.strategy.route(self, h, routing_kind, routing_mask)

    def dispatch(self, h: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        """Run each routed unit (row of `h`) through its chosen expert only, never every expert."""
        if self.training:
            # Eq. 3 with the straight-through estimator: forward value one-hot, gradient of the soft sample.
            weights = F.gumbel_softmax(logits, tau=self.config.router_temperature, hard=True)
            choice = weights.argmax(-1)
        else:
            weights, choice = None, logits.argmax(-1)
        out = torch.zeros_like(h)
        for e in choice.unique().tolist():
            idx = (choice == e).nonzero(as_tuple=True)[0]
            y = self.experts[e](h[idx])
            if weights is not None:
                y = y * weights[idx, e].view(-1, 1, 1)
            out = out.index_copy(0, idx, y)
        return out


class TaserModel(BiEncoderMixin, BertModel):
    """TASER encoder (Det-R, Seq-R, Tok-R or shared). `encode_query` / `encode_passage` return pooled vectors;
    `forward(query=..., passage=...)` returns both with the routing-entropy term L_ent (Eq. 4, under
    `config.entropy_mode`) as `entropy`; after each pass `routing_stats[kind]` holds the per-unit and the
    batch-average routing entropy, averaged over the specialized blocks (detached, for logging)."""

    config_class = TaserConfig
    _no_split_modules = ["BertEmbeddings", "BertLayer", "TaserLayer"]

    def __init__(self, config: TaserConfig):
        super().__init__(config, add_pooling_layer=False)  # the papers pool the final [CLS], not BERT's pooler
        for i in config.specialized_layers:
            self.encoder.layer[i] = TaserLayer(config, layer_idx=i)
        self.mlm_head = MaskedLMHead(config) if config.mlm_head else None
        # one tower, one embedding projection for both sides (`projection_dim`; see common.BiEncoderMixin)
        self.embedding_projection = (nn.Linear(config.hidden_size, config.projection_dim, bias=False)
                                     if getattr(config, "projection_dim", None) else None)
        self.routing_stats: dict[Kind, tuple[torch.Tensor, torch.Tensor]] = {}
        self._add_modules(config)
        self.post_init()

    def _add_modules(self, config: TaserConfig) -> None:
        """Subclasses add their own modules here (before the weights are initialised)."""

    def _mlm(self, kind: Kind):
        return self.mlm_head, self.embeddings.word_embeddings.weight  # one tower: one head for both sides

    @property
    def taser_layers(self) -> list[TaserLayer]:
        return [self.encoder.layer[i] for i in self.config.specialized_layers]

    def _encode(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        hidden = BertModel.forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                   token_type_ids=token_type_ids, routing_kind=kind,
                                   routing_mask=attention_mask).last_hidden_state
        entropies = [layer.entropy for layer in self.taser_layers if layer.entropy is not None]
        stats = [layer.stats for layer in self.taser_layers if layer.stats is not None]
        # averaged over the specialized blocks, as the authors' moe_models.py does
        entropy = torch.stack(entropies).mean() if entropies else hidden.new_zeros(())
        if stats:
            self.routing_stats[kind] = tuple(torch.stack(s).mean() for s in zip(*stats))
        return hidden, entropy

    @classmethod
    def from_bert(cls, name_or_path: str | Path = "default", *, pooling: str | None = None,
                  normalize: bool | None = None, passage_format: str | None = None, allow_pickle: bool = False,
                  **config_fields) -> "TaserModel":
        """Build TASER (or a subclass: its config class) from a plain BERT checkpoint: attention and embeddings
        copied, every expert of a specialized block initialised from that block's pretrained FFN (App. A), routers
        freshly initialised. `config_fields` set the config class's fields (shared_blocks, routing, ...).

        `pooling` / `normalize` default to the checkpoint's own (sentence-transformers config), else [CLS];
        `passage_format` to the checkpoint's own (`checkpoint_passage_format`: "concat" for a sentence-transformers
        checkpoint such as the default), else DPR's "pair"; `num_experts` to 2, or 1 for shared routing.
        `num_hidden_layers` keeps the checkpoint's first L layers; `projection_dim` adds a fresh embedding
        projection (`common.init_projection`).
        """
        bert, path = load_bert(name_or_path, allow_pickle, config_fields.get("num_hidden_layers"))
        own = checkpoint_pooling(path)
        config_class = cls.config_class
        routing = config_fields.get("routing", config_class.routing)
        config_fields.setdefault("num_experts", routing_strategy(routing).default_experts)
        config = config_class(**{
            **bert.config.to_dict(),
            "model_type": config_class.model_type,
            "pooling": pooling or (own[0] if own else "cls"),
            "normalize": normalize if normalize is not None else (own[1] if own else config_class.normalize),
            "passage_format": passage_format or checkpoint_passage_format(path) or "pair",
            "architectures": [cls.__name__],
            **config_fields,
        })
        model = cls(config)
        model.load_bert_weights(bert)
        if model.embedding_projection is not None:
            init_projection(model.embedding_projection)
        if model.mlm_head is not None:
            init_head(model.mlm_head, path)
        return model

    @torch.no_grad()
    def load_bert_weights(self, bert: BertModel) -> None:
        """Copy a BertModel's weights in: shared blocks one-to-one, each expert from its block's FFN."""
        self.embeddings.load_state_dict(bert.embeddings.state_dict())
        for i, (mine, theirs) in enumerate(zip(self.encoder.layer, bert.encoder.layer)):
            mine.attention.load_state_dict(theirs.attention.state_dict())
            if isinstance(mine, TaserLayer):
                for expert in mine.experts:
                    expert.intermediate.load_state_dict(theirs.intermediate.state_dict())
                    expert.output.load_state_dict(theirs.output.state_dict())
            else:
                mine.load_state_dict(theirs.state_dict())
