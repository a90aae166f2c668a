"""The profiles (`taser_book/profiles.yaml`): each one's parameters, validated, and what one notebook gets at one."""

from __future__ import annotations

import os
from collections.abc import Mapping
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


def _read_profiles_file(path: Path) -> tuple[dict[str, dict], dict[str, int]]:
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
