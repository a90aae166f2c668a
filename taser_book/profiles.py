"""The profiles (`taser_book/profiles.yaml`): each one's parameters, validated, and what one notebook gets at one."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any

import yaml

from taser_lib.errors import ConfigError, FormatError

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
# Every profile must set these (after `extends`): the knobs every notebook may rely on.
REQUIRED_KEYS = (
    "description", "model", "pooling", "device", "seed", "seeds", "bf16", "offline", "max_query_length",
    "max_passage_length", "batch_size", "eval_batch_size", "epochs", "learning_rate", "n_train", "n_queries",
    "n_docs", "top_k", "cell_timeout_s",
)
RUNNER_PARAMETERS = ("profile", "results_dir")  # set by the runner only
_NOT_PARAMETERS = ("description", "extends", "notebooks", "run_first", "cell_timeout_s", "budget_hours")  # never injected


def _key_lines(path: Path, text: str) -> dict[str, int]:
    """1-based line of each `profiles.<name>` key, so errors can name it."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "profiles" and isinstance(value, yaml.MappingNode):
                for name_node, _ in value.value:
                    lines[f"profiles.{name_node.value}"] = name_node.start_mark.line + 1
    return lines


_READ: dict[tuple[str, int, int], tuple[dict[str, dict], dict[str, int]]] = {}


def _read_profiles_file(path: Path) -> tuple[dict[str, dict], dict[str, int]]:
    """(profiles, key lines) of a profiles file, parsed once per file version (a test or a reproduce resolves
    hundreds of page settings: parsing the YAML each time took 0.1 s a call); each caller gets copies of its own."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _READ:
        _READ[key] = _parse_profiles_file(path)
    profiles, lines = _READ[key]
    return copy.deepcopy(profiles), dict(lines)


def _parse_profiles_file(path: Path) -> tuple[dict[str, dict], dict[str, int]]:
    from taser_lib.data.text import read_text  # strict UTF-8: an undecodable line is a FormatError naming it

    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise FormatError(path, None, "profiles", "expected a mapping 'profiles: {name: {...}}'")
    lines = _key_lines(path, text)
    for name, body in data["profiles"].items():
        if not isinstance(body, dict):
            raise FormatError(path, lines.get(f"profiles.{name}"), f"profiles.{name}", "must be a mapping")
    return data["profiles"], lines


def load_profiles(extra: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """The packaged profiles plus those of `extra` (or $TASER_PROFILES), `extends` resolved, each validated.

    A profile in the extra file with the name of a packaged one replaces it; `extends: NAME` starts from NAME.
    """
    raw, lines = _read_profiles_file(PROFILES_FILE)
    sources = {name: PROFILES_FILE for name in raw}
    extra = extra or os.environ.get("TASER_PROFILES")
    if extra:
        extra_path = Path(extra)
        if not extra_path.is_file():
            raise ConfigError(f"profiles file {extra_path} does not exist")
        more, more_lines = _read_profiles_file(extra_path)
        raw.update(more)
        lines.update(more_lines)
        sources.update({name: extra_path for name in more})

    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if name in resolved:
            return resolved[name]
        body = dict(raw[name])
        own = set(body)
        parent = body.pop("extends", None)
        if parent is not None:
            if parent not in raw:
                raise FormatError(sources[name], lines.get(f"profiles.{name}"), f"profiles.{name}.extends",
                                  f"unknown profile '{parent}' (known: {', '.join(raw)})")
            if parent in chain:
                raise FormatError(sources[name], lines.get(f"profiles.{name}"), f"profiles.{name}.extends",
                                  f"circular: {' -> '.join(chain + (parent,))}")
            base = resolve(parent, chain + (parent,))
            notebooks = {k: dict(v) for k, v in base.get("notebooks", {}).items()}
            for stem, over in (body.pop("notebooks", None) or {}).items():
                notebooks.setdefault(stem, {}).update(over)
            body = {**base, **body, "notebooks": notebooks}
        # `seed` and `seeds` follow each other unless the profile sets both
        if "seed" in own and "seeds" not in own and body["seed"] is not None:
            body["seeds"] = [body["seed"]]
        elif "seeds" in own and "seed" not in own and isinstance(body["seeds"], list) and body["seeds"]:
            body["seed"] = body["seeds"][0]
        resolved[name] = _validate(name, body, sources[name], lines.get(f"profiles.{name}"))
        return resolved[name]

    for name in raw:
        resolve(name, (name,))
        Profile.from_mapping(name, resolved[name], sources[name], lines.get(f"profiles.{name}"))  # a typo
    return resolved


def _validate(name: str, body: dict[str, Any], path: Path, line: int | None) -> dict[str, Any]:
    missing = [k for k in REQUIRED_KEYS if k not in body]
    if missing:
        raise FormatError(path, line, f"profiles.{name}", f"missing required key(s): {', '.join(missing)}")
    seeds = body["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and not isinstance(x, bool)
                                                           for x in seeds):
        raise FormatError(path, line, f"profiles.{name}.seeds", f"must be a non-empty list of integers, got {seeds!r}")
    notebooks = body.get("notebooks") or {}
    if not isinstance(notebooks, dict) or not all(isinstance(v, dict) for v in notebooks.values()):
        raise FormatError(path, line, f"profiles.{name}.notebooks", "must map notebook stems to mappings")
    run_first = body.get("run_first", [])
    if not isinstance(run_first, list) or not all(isinstance(s, str) for s in run_first):
        raise FormatError(path, line, f"profiles.{name}.run_first", f"must be a list of notebook stems, got "
                                                                     f"{run_first!r}")
    budget = body.get("budget_hours")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0):
        raise FormatError(path, line, f"profiles.{name}.budget_hours", f"must be a positive number of hours or null, "
                                                                        f"got {budget!r}")
    for where, keys in [(f"profiles.{name}", body), *((f"profiles.{name}.notebooks.{s}", o)
                                                      for s, o in notebooks.items())]:
        reserved = [k for k in RUNNER_PARAMETERS if k in keys]
        if reserved:
            raise FormatError(path, line, where, f"{', '.join(reserved)} is set by the runner, not by a profile")
    return {**body, "notebooks": notebooks}


def profile_parameters(profile: str, notebook: str, overrides: Mapping[str, Any] | None = None,
                       profiles: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The parameters a notebook gets at `profile`: profile values < per-notebook overrides < `overrides`.

    Includes `profile`; the runner adds `results_dir`.
    """
    profiles = profiles if profiles is not None else load_profiles()
    if profile not in profiles:
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
    body = profiles[profile]
    params = {k: v for k, v in body.items() if k not in _NOT_PARAMETERS}
    params.update(body["notebooks"].get(notebook, {}))
    params.update(overrides or {})
    reserved = [k for k in RUNNER_PARAMETERS if k in (overrides or {})]
    if reserved:
        raise ConfigError(f"{', '.join(reserved)} is set by the runner and cannot be overridden")
    params["profile"] = profile
    return params


# ---------------------------------------------------------------------------------------------------------------------
# A profile as one typed object, and what one page runs with at it.
#
# A notebook's parameters cell holds only `profile`, `overrides` and `results_dir`; its first hidden cell calls
# `page_settings(page, profile, overrides)`, so `papermill NB OUT -p profile cpu` runs the cpu profile's model and sizes
# (nothing else needs injecting). What a page reads is declared in `taser_book/pages.yaml` (data, not code): the profile
# fields it reads and its own settings with their defaults.

PAGES_FILE = Path(__file__).with_name("pages.yaml")


@dataclass(frozen=True)
class Profile:
    """One profile of `profiles.yaml` (after `extends`): the model, the data and the sizes every page may read.

    `notebooks` holds its per-page overrides ({page: {setting: value}}), `run_first` the order `taser reproduce`
    starts pages in. Build it with `load_profile(name)`; a field it does not know is a one-line error."""

    name: str
    description: str
    model: str                      # "default" (the packaged MiniLM), "tiny", a folder or a Hugging Face name
    pooling: str
    device: str
    seed: int | None                # None: unseeded slicing
    seeds: list[int]
    bf16: bool
    offline: bool
    max_query_length: int
    max_passage_length: int
    batch_size: int
    eval_batch_size: int
    epochs: int
    learning_rate: float
    n_train: int | None             # None: every training question
    n_queries: int | None           # None: every evaluation query
    n_docs: int | None              # None: the whole corpus
    top_k: list[int]
    cell_timeout_s: int | None
    cross_encoder_model: str | None = None   # None: `model`
    cocondenser_model: str | None = None
    precision: str = "fp32"
    qa_datasets: list[str] = field(default_factory=lambda: ["squad-open"])
    qa_corpus: str | None = None
    ood_datasets: list[str] = field(default_factory=lambda: ["scifact", "cranfield"])
    rerank_datasets: list[str] = field(default_factory=lambda: ["wikiqa"])
    rerank_loop: dict[str, Any] = field(default_factory=dict)
    budget_hours: float | None = None
    run_first: list[str] = field(default_factory=list)
    notebooks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        if self.cross_encoder_model is None:
            object.__setattr__(self, "cross_encoder_model", self.model)

    @classmethod
    def from_mapping(cls, name: str, body: Mapping[str, Any], where: str | os.PathLike = PROFILES_FILE,
                     line: int | None = None) -> Profile:
        """The profile `name` from its resolved mapping (`load_profiles()[name]`); an unknown or mistyped field is a
        FormatError naming the file (`where`), the profile's line and the field."""
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = sorted(set(body) - known - {"extends"})
        if unknown:
            raise FormatError(Path(where), line, f"profiles.{name}.{unknown[0]}",
                              f"unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        values = {k: v for k, v in body.items() if k != "extends"}
        for f in fields(cls):
            if f.name in values and not _has_type(values[f.name], f.type):
                raise FormatError(Path(where), line, f"profiles.{name}.{f.name}",
                                  f"must be {f.type}, got {values[f.name]!r}")
        return cls(name=name, **values)

    def settings(self) -> dict[str, Any]:
        """Every field a page may read, by name (not the runner's description, order and per-page overrides)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _PROFILE_ONLY}


_PROFILE_ONLY = ("name", "description", "cell_timeout_s", "budget_hours", "run_first", "notebooks")
_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict, "None": type(None),
          "Any": object}


def _has_type(value: Any, annotation: str) -> bool:
    """Whether `value` fits a field annotation written as text ("int | None", "list[int]", "dict[str, Any]")."""
    for option in (part.strip() for part in annotation.split("|")):
        base = option.split("[", 1)[0]
        wanted = _TYPES.get(base, object)
        if isinstance(value, bool) and base in ("int", "float"):
            continue
        if isinstance(value, wanted):
            return True
    return False


def load_profile(name: str, extra: str | os.PathLike | None = None) -> Profile:
    """The profile `name`: packaged, or from `extra` / $TASER_PROFILES (see `load_profiles`)."""
    profiles = load_profiles(extra)
    if name not in profiles:
        raise ConfigError(f"unknown profile '{name}' (known: {', '.join(profiles)})")
    return Profile.from_mapping(name, profiles[name])


@dataclass(frozen=True)
class PageSpec:
    """What one page reads (`pages.yaml`): the profile fields `uses`, and its own settings with their defaults."""

    page: str
    uses: tuple[str, ...]
    own: Mapping[str, Any]

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.uses, *self.own)


def load_pages(path: str | os.PathLike = PAGES_FILE) -> dict[str, PageSpec]:
    """{page: PageSpec} of `pages.yaml`; a malformed entry is a FormatError naming its line."""
    from taser_lib.data.text import read_text

    path = Path(path)
    text = read_text(path)
    try:
        data = yaml.safe_load(text) or {}
        root = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from err
    lines = {k.value: k.start_mark.line + 1 for k, _ in root.value} if isinstance(root, yaml.MappingNode) else {}
    if not isinstance(data, dict):
        raise FormatError(path, 1, None, "expected a mapping {page: {uses: [...], own: {...}}}")
    profile_fields = {f.name for f in fields(Profile)} - set(_PROFILE_ONLY)
    specs = {}
    for page, body in data.items():
        line = lines.get(page)
        if not isinstance(body, dict) or set(body) - {"uses", "own"}:
            raise FormatError(path, line, page, "expected a mapping with 'uses' (a list) and 'own' (a mapping)")
        uses, own = body.get("uses") or [], body.get("own") or {}
        if not isinstance(uses, list) or not isinstance(own, dict):
            raise FormatError(path, line, page, "'uses' must be a list of profile fields, 'own' a mapping")
        unknown = sorted(set(uses) - profile_fields)
        if unknown:
            raise FormatError(path, line, f"{page}.uses", f"not profile fields: {', '.join(unknown)}")
        clash = sorted((set(own) & profile_fields) | (set(own) & set(RUNNER_PARAMETERS + ("overrides",))))
        if clash:
            raise FormatError(path, line, f"{page}.own", f"{', '.join(clash)}: a profile field or the runner's")
        specs[page] = PageSpec(page, tuple(uses), dict(own))
    return specs


class PageSettings:
    """What one page runs with at one profile: an attribute for each setting, `profile` (its name) and `page`.

    Made by `page_settings`; frozen (a setting is changed by `overrides`, not by assignment)."""

    page: str
    profile: str

    def as_dict(self) -> dict[str, Any]:
        """{"profile": name, setting: value, ...}: what meta.json records as the page's parameters."""
        return {"profile": self.profile, **{f.name: getattr(self, f.name) for f in fields(self)
                                            if f.name not in ("page", "profile")}}


def page_settings(page: str, profile: str | Profile = "smoke", overrides: Mapping[str, Any] | None = None, *,
                  profiles: Mapping[str, Mapping[str, Any]] | None = None,
                  pages: Mapping[str, PageSpec] | None = None) -> PageSettings:
    """The settings page `page` runs with at `profile`: the page's own defaults < the profile's fields it reads <
    the profile's overrides for this page < `overrides`.

    >>> s = page_settings("de_margins", "cpu")
    >>> s.model, s.n_train                      # doctest: +SKIP
    ('default', 1000)

    An unknown page, profile or override field is a ConfigError that names it."""
    pages = pages if pages is not None else load_pages()
    if page not in pages:
        raise ConfigError(f"page '{page}' has no entry in {PAGES_FILE.name} (known: {', '.join(sorted(pages))})")
    spec = pages[page]
    if isinstance(profile, Profile):
        prof = profile
    else:
        profiles = profiles if profiles is not None else load_profiles()
        if profile not in profiles:
            raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
        prof = Profile.from_mapping(profile, profiles[profile])
    overrides = dict(overrides or {})
    reserved = [k for k in (*RUNNER_PARAMETERS, "overrides") if k in overrides]
    if reserved:
        raise ConfigError(f"{', '.join(reserved)} cannot be overridden: pass it as its own parameter")
    values = {**spec.own, **{k: getattr(prof, k) for k in spec.uses}}
    for source, given in ((f"profile '{prof.name}' overrides", prof.notebooks.get(page, {})), ("overrides", overrides)):
        unknown = sorted(set(given) - set(values))
        if unknown:
            raise ConfigError(f"{source} for page '{page}' name unknown setting(s) {', '.join(unknown)} "
                              f"(its settings: {', '.join(spec.names)})")
        values.update(given)
    cls = _settings_class(page, spec.names)
    return cls(page=page, profile=prof.name, **values)


def page_defaults(page: str, pages: Mapping[str, PageSpec] | None = None) -> dict[str, Any]:
    """Page `page`'s settings where no profile sets them: its own defaults and those of the Profile fields it reads
    that have one ({} for a notebook without an entry in pages.yaml)."""
    spec = (pages if pages is not None else load_pages()).get(page)
    if spec is None:
        return {}
    defaults = {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(Profile)
                if f.default is not MISSING or f.default_factory is not MISSING}
    return {**{k: defaults[k] for k in spec.uses if k in defaults}, **spec.own}


_SETTINGS_CLASSES: dict[tuple[str, tuple[str, ...]], type] = {}


def _settings_class(page: str, names: tuple[str, ...]) -> type:
    key = (page, names)
    if key not in _SETTINGS_CLASSES:
        title = "".join(part.title() for part in page.split("_")) + "Settings"
        _SETTINGS_CLASSES[key] = make_dataclass(title, [("page", str), ("profile", str), *((n, Any) for n in names)],
                                                bases=(PageSettings,), frozen=True)
    return _SETTINGS_CLASSES[key]
