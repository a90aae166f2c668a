"""Convert released microsoft/taser checkpoints (their `MoEBertModel`) into `TaserModel` and back.

Their naming, per specialized layer N and expert E (question expert 0, passage expert 1, as here):
    encoder.layer.N.moe_layer.interm_layers.E.dense.{weight,bias}
    encoder.layer.N.moe_layer.output_layers.E.dense.{weight,bias}
    encoder.layer.N.moe_layer.output_layers.E.LayerNorm.{weight,bias}
and stock `BertLayer` names everywhere else. Ours: encoder.layer.N.experts.E.{intermediate,output}.*.
Every key is mapped or rejected by name: nothing is dropped silently (a BERT pooler, unused by [CLS] pooling,
is dropped only when the caller says so).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors.torch import load_file

from ..errors import ConfigError
from .taser import TaserConfig, TaserModel

_MS = re.compile(r"^encoder\.layer\.(\d+)\.moe_layer\.(interm_layers|output_layers)\.(\d+)\.(.+)$")
_OURS = re.compile(r"^encoder\.layer\.(\d+)\.experts\.(\d+)\.(intermediate|output)\.(.+)$")
_TO_OURS = {"interm_layers": "intermediate", "output_layers": "output"}
_TO_MS = {v: k for k, v in _TO_OURS.items()}
_WRAPPERS = ("module.", "bert.", "model.")


def _strip_wrappers(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Remove a prefix every key shares (DDP's `module.`, a `bert.` base-model prefix)."""
    for prefix in _WRAPPERS:
        if state and all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    return state


def from_microsoft_naming(state: dict[str, torch.Tensor], drop_pooler: bool = False) -> dict[str, torch.Tensor]:
    """Rename a microsoft/taser state dict to this package's names."""
    out = {}
    for key, value in _strip_wrappers(state).items():
        if key.startswith("pooler."):
            if drop_pooler:
                continue
            raise ConfigError(f"checkpoint has BERT pooler weights ({key}); TASER pools the final [CLS] vector. "
                              "Pass drop_pooler=True to drop them knowingly.")
        m = _MS.match(key)
        out[f"encoder.layer.{m[1]}.experts.{m[3]}.{_TO_OURS[m[2]]}.{m[4]}" if m else key] = value
    return out


def to_microsoft_naming(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of `from_microsoft_naming` (for exporting to, and testing against, the released code)."""
    out = {}
    for key, value in state.items():
        m = _OURS.match(key)
        out[f"encoder.layer.{m[1]}.moe_layer.{_TO_MS[m[3]]}.{m[2]}.{m[4]}" if m else key] = value
    return out


def infer_layout(state: dict[str, torch.Tensor]) -> tuple[int, int]:
    """(T, I) from which layers hold experts and how many; the layout must be TASER's regular interleaving."""
    experts: dict[int, set[int]] = {}
    for key in state:
        m = _OURS.match(key)
        if m:
            experts.setdefault(int(m[1]), set()).add(int(m[2]))
    if not experts:
        raise ConfigError("no expert FFN weights found: this is not a TASER checkpoint")
    layers = sorted(experts)
    shared_blocks = layers[0]
    counts = {len(e) for e in experts.values()}
    if len(counts) != 1:
        raise ConfigError(f"specialized layers have different expert counts: {experts}")
    if any((i + 1) % (shared_blocks + 1) for i in layers):
        raise ConfigError(f"specialized layers {layers} are not every {shared_blocks + 1}-th block")
    return shared_blocks, counts.pop()


def load_microsoft_taser(weights: str | Path | dict[str, torch.Tensor], bert_config: dict,
                         drop_pooler: bool = False, **config_overrides) -> TaserModel:
    """Build a Det-R `TaserModel` from a microsoft/taser state dict (or a safetensors file of one) and the BERT
    config it was trained from. Loading is strict: a missing or unexpected key is an error."""
    state = load_file(str(weights)) if isinstance(weights, (str, Path)) else weights
    state = from_microsoft_naming(state, drop_pooler=drop_pooler)
    shared_blocks, num_experts = infer_layout(state)
    config = TaserConfig(**{**bert_config, "model_type": "taser", "shared_blocks": shared_blocks,
                            "num_experts": num_experts,
                            "routing": "deterministic" if num_experts == 2 else "shared", **config_overrides})
    model = TaserModel(config)
    # position_ids / token_type_ids are buffers some checkpoints carry and others do not.
    own_buffers = {k for k, _ in model.named_buffers()}
    state = {k: v for k, v in state.items() if k not in own_buffers or k in model.state_dict()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k not in own_buffers]
    if missing or unexpected:
        raise ConfigError(f"checkpoint does not match TASER(T={shared_blocks}, I={num_experts}): "
                          f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}")
    return model
