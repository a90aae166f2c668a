"""taser_lib: TASER and dual-encoder retrieval, reproduced.

Layers (each imports only from those before it):
data -> models -> training, retrieval -> evaluation -> plots -> reproduce, bench, cli.
"""

__version__ = "0.1.0"
