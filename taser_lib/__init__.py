"""taser_lib: TASER and dual-encoder retrieval, reproduced.

Layers (each imports only from those before it):
data (+ losses, pure) -> models -> retrieval -> evaluation -> training -> plots -> reproduce, scorecard, bench, cli.
"""

__version__ = "0.1.0"
