"""Data by name: how the core reaches the optional dataset registry (`taser_lib.datasets`) without importing it.

The core reads folders and files (`data.formats`, `data.squad_open`, a BEIR folder). Which names exist ("squad-open",
"wikiqa", "msmarco-passage-t1"), where their files come from and how a derived dataset is built belong to the
registry, an optional subpackage above the core. A core module that accepts a name in a config asks `registry`, which
stands for that subpackage once it is imported (it installs itself; the `taser` command and the book import it):

    >>> from taser_lib.data.named import registry
    >>> registry.prepared_dir("squad-open")        # taser_lib.datasets.prepared_dir, the same function

Before it is imported, a name is an error that says so; a folder never needs it.
"""

from __future__ import annotations

import types

from ..errors import TaserError


class _Registry:
    """`taser_lib.datasets` (its names, and its submodules as attributes) once installed, else an error."""

    package: types.ModuleType | None = None

    def __getattr__(self, name: str):
        if self.package is None:
            raise TaserError("a dataset given by name needs the dataset registry: `import taser_lib.datasets` first "
                             "(the `taser` command and the book do), or give a folder")
        return getattr(self.package, name)


registry = _Registry()


def install(package: types.ModuleType) -> None:
    """Make `registry` stand for `package` (`taser_lib.datasets` calls this when imported)."""
    _Registry.package = package
