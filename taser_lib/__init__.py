"""taser_lib: TASER and dual-encoder retrieval, reproduced.

The core is models with routing, losses, data, retrieval, evaluation and training; `speed` (what precision `auto`
means on a CPU, fused linears, the int8 encoder for indexing), `export` (sentence-transformers folders) and `datasets`
(the dataset registry) are optional, above it: the core never imports them (`speed` and `datasets` install
themselves where the core asks: `plugins`, `data.named`).

Layers (each imports only from its own and those before it; tests/test_layers.py checks it):
errors, io, meta, plugins, progress -> data, losses -> models -> retrieval -> evaluation -> training -> speed, export, datasets
"""

__version__ = "0.1.0"
