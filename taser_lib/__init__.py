"""taser_lib: TASER and dual-encoder retrieval, reproduced.

The core is models with routing, losses, data, retrieval, evaluation and training; `speed` (the int8 encoder for
indexing) and `export` (sentence-transformers folders) are optional, above it: the core never imports them.

Layers (each imports only from its own and those before it; tests/test_layers.py checks it):
errors, io, meta, progress -> data, losses -> models -> retrieval -> evaluation -> training -> speed, export, datasets
"""

__version__ = "0.1.0"
