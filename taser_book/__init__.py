"""taser_book: the machinery of this repository's book, kept apart from the library it uses.

`taser_lib` is the reusable core (models and routing, losses, data, retrieval, evaluation, training) and imports
nothing from here. This package runs the book: profiles and run recipes, the run cache, capacity and student sizing,
result files and their provenance, the papers' analyses, tables and claims, the scorecard, the figures, the notebook runner,
the book's build, `taser reproduce`, the benchmarks and the `taser` command line.

Layers (each imports only from its own, those before it, and taser_lib; tests/test_layers.py checks it):
analyses, bench -> results, preserving, claims, run_ledger, profiles, executed -> tables -> runs -> plots -> scorecard -> pages -> runner -> book -> reproduce -> cli
"""

import taser_lib.speed  # noqa: F401  (installs what `auto` means on a CPU and the fused-linear choice: taser_lib.plugins)
from taser_lib import __version__

__all__ = ["__version__"]
