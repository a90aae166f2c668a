"""Typed changes of a training config: what a page asks of a run beyond its profile's sizes.

A change is a function from a training config object to a changed copy, made with `dataclasses.replace`, so a
misspelt field is a TypeError where the change is applied, not a string the config parser reads back later:

    >>> from taser_book.runs.changes import data, training, model_overrides
    >>> reranking_run("de-one-hot", 13, params, teacher=teacher,
    ...               changes=[data(dataset="wikiqa"), training(label_smoothing=0.1)])

The constructors name the config's sections (`model`, `model_overrides`, `data`, `training`, `teacher`, `loop`,
`mining`); `apply` applies a list of changes in order (a later change wins) and checks the result once, as a whole. The run cache keys a run by the resolved
config (`cache.run_key`), so a change that leaves the config as it was gives the same cached run.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from taser_lib.errors import ConfigError
from taser_lib.training.config import config_to_dict
from taser_lib.training.kinds import config_from_dict

Change = Callable[[Any], Any]
"""A training config object in, a changed copy out (the classes below are the ones the book uses; any function of
the config will do)."""


def _shown(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


@dataclass(frozen=True, eq=True)
class SetFields:
    """Set fields of one section of the config (`model`, `data`, `training`, `teacher`, `loop`, `mining`)."""

    section: str
    values: Mapping[str, Any]

    def __call__(self, config: Any) -> Any:
        part = getattr(config, self.section, None)
        if part is None or not dataclasses.is_dataclass(part):
            raise ConfigError(f"a {getattr(config, 'kind', type(config).__name__)} config has no '{self.section}' "
                              f"section to set {', '.join(self.values)} in")
        return _with_section(config, self.section, dataclasses.replace(part, **self.values))

    def __repr__(self) -> str:
        return f"{self.section}({_shown(self.values)})"


@dataclass(frozen=True, eq=True)
class ModelOverrides:
    """Add entries to `model.overrides`, the settings passed to the model's constructor."""

    values: Mapping[str, Any]

    def __call__(self, config: Any) -> Any:
        return _with_section(config, "model", dataclasses.replace(
            config.model, overrides={**(config.model.overrides or {}), **self.values}))

    def __repr__(self) -> str:
        return f"model_overrides({_shown(self.values)})"


def model(**values: Any) -> Change:
    """Set fields of the config's `model` section (e.g. `name_or_path`, `arch`)."""
    return SetFields("model", values)


def data(**values: Any) -> Change:
    """Set fields of the config's `data` section (e.g. `dataset`, `candidates`, `dev_queries`)."""
    return SetFields("data", values)


def training(**values: Any) -> Change:
    """Set fields of the config's `training` section (e.g. `loss`, `group_size`, `label_smoothing`)."""
    return SetFields("training", values)


def teacher(**values: Any) -> Change:
    """Set fields of a distilled student's `teacher` section (e.g. `model`, `cache`, `max_length`)."""
    return SetFields("teacher", values)


def loop(**values: Any) -> Change:
    """Set fields of the config's training `loop` (e.g. `max_steps`, `precision`, `log_every`)."""
    return SetFields("loop", values)


def mining(**values: Any) -> Change:
    """Set fields of a retriever config's `mining` section (TASER App. B's second round)."""
    return SetFields("mining", values)


def model_overrides(**values: Any) -> Change:
    """Add entries to `model.overrides`, the settings passed to the model's constructor (e.g. `pooling`,
    `num_hidden_layers`, `projection_dim`, `routing`)."""
    return ModelOverrides(values)


def _with_section(config: Any, name: str, part: Any) -> Any:
    """A shallow copy of `config` with section `name` replaced. The section checks itself when it is replaced; the
    checks across sections (a group size within the candidates, say) run once on the whole config, in `apply` and
    when the run cache resolves it, so changes compose in any order."""
    out = copy.copy(config)
    object.__setattr__(out, name, part)
    return out


def apply(config: Any, changes: Iterable[Change]) -> Any:
    """`config` after each change in turn (a later change wins), checked as a whole at the end like a config file
    (`config_from_dict`: types, unknown keys and the checks across sections)."""
    for change in changes:
        if not callable(change):
            raise ConfigError(f"a run's changes are functions of its config (taser_book.runs.changes), got "
                              f"{change!r}")
        config = change(config)
    return config_from_dict(config_to_dict(config))
