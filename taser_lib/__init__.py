"""taser_lib: TASER and dual-encoder retrieval, reproduced.

The core is models with routing, losses, data, retrieval, evaluation and training; `speed` (what precision `auto`
means on a CPU, fused linears, the int8 encoder for indexing), `export` (sentence-transformers folders) and `datasets`
(the dataset registry) are optional, above it: the core never imports them (`speed` and `datasets` install
themselves where the core asks: `plugins`, `data.named`).

Layers (each imports only from its own and those before it; tests/test_layers.py checks it):
errors, io, meta, plugins, progress -> data, losses -> models -> retrieval -> evaluation -> training -> speed, export, datasets

Importing `taser_lib` lets transformers' `AutoConfig` / `AutoModel` load a folder the library saved (TASER, DPR,
ColBERT, cross-encoder) without importing torch here: `taser_lib.models`, which registers the classes, is imported
as soon as transformers is (at once when it already is).
"""

import sys as _sys

__version__ = "0.1.0"


class _RegisterAfterTransformers:
    """A one-shot import hook: once `transformers` has been imported, import `taser_lib.models` (which registers its
    config and model classes with AutoConfig and AutoModel), so `import taser_lib` stays light."""

    def find_spec(self, name, path=None, target=None):
        if name != "transformers":
            return None
        _sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _register_models()

        spec.loader.exec_module = exec_module
        return spec


def _register_models() -> None:
    try:
        import taser_lib.models  # noqa: F401  (registers with AutoConfig / AutoModel)
    except ImportError:  # transformers without torch: nothing to load a model with, and nothing registered
        pass


if "transformers" in _sys.modules:
    _register_models()
else:
    _sys.meta_path.insert(0, _RegisterAfterTransformers())
