"""taser_lib: TASER and dual-encoder retrieval, reproduced.

Layers (each imports only from its own and those before it; tests/test_layers.py checks it):
errors, io, meta, progress -> data, losses -> models -> retrieval -> evaluation -> training
"""

__version__ = "0.1.0"
