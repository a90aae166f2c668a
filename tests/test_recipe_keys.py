"""The recipes give the configs they gave (issue 49: recipes as Python): every retriever and re-ranking recipe,
sized by every profile of `profiles.yaml` (retrievers also with TASER App. B's mining), resolves to the config it
resolved to when the recipes were data (`variants.yaml`, at b41622a). The saved forms are in
`tests/data/recipe_configs.json`, written by that revision's code (`python tests/test_recipe_keys.py --write` there);
the run cache keys a run by its resolved config as `runs.cache.key_form` reads it (a renamed option under the name
runs were keyed by: `loop.learning_rate` as `lr`), so equal key forms are equal run keys and no run retrains."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import taser_book.runs.recipes as recipes
from taser_book.runs.cache import key_form
from git_versions import source_at
from taser_book.profiles import load_profiles, profile_parameters
from taser_lib.training.config import config_to_dict

SAVED = Path(__file__).with_name("data") / "recipe_configs.json"
VARIANTS = ("taser_book/runs/variants.yaml", "1a6611b67a07eb05a26b567b53de288e22781d382cfc83f1cd33ee65945463fe")
TEACHER = SimpleNamespace(model_path="/runs/cross-encoder-teacher/best")


def saved_forms(monkeypatch) -> dict[str, dict]:
    """{"<profile>/<recipe>[/mined]": the saved form of the config the recipe hands the run cache}."""
    captured = []
    monkeypatch.setattr(recipes, "trained_run", lambda config, **kw: captured.append(config_to_dict(config)))
    out = {}
    for profile in load_profiles():
        params = profile_parameters(profile, "taser_in_domain")
        for name in recipes.RETRIEVERS:
            for mined in (False, True):
                recipes.variant_run(name, 13, params, mined=mined, progress=False)
                out[f"{profile}/{name}" + ("/mined" if mined else "")] = captured.pop()
        params = {**profile_parameters(profile, "de_distillation"), "teacher": {"n_train": 20}}
        for name in recipes.RERANKERS:
            recipes.reranking_run(name, 13, params, teacher=TEACHER, progress=False)
            out[f"{profile}/{name}"] = captured.pop()
    return out


def test_every_recipe_gives_the_config_it_gave_as_data(monkeypatch):
    before = json.loads(SAVED.read_text(encoding="utf-8"))
    now = saved_forms(monkeypatch)
    assert sorted(now) == sorted(before)
    changed = [key for key in before if key_form(now[key]) != key_form(before[key])]
    assert not changed, f"{len(changed)} recipes resolve differently, first {changed[0]}"


def test_every_recipe_has_the_label_and_the_paper_row_it_had():
    """The tables and figures name each run by its label: the labels (and the paper rows) are variants.yaml's."""
    before = yaml.safe_load(source_at(*VARIANTS))
    for section, table in (("variants", recipes.RETRIEVERS), ("reranking", recipes.RERANKERS)):
        assert {name: (body["label"], body.get("paper", "")) for name, body in before[section].items()} == \
            {name: (recipe.label, recipe.paper) for name, recipe in table.items()}, section


def test_the_saved_forms_tell_the_recipes_apart():
    """Each recipe resolves to a config of its own at each profile, so a recipe that swapped its loss, arch or
    routing for another's would fail the comparison above."""
    saved = json.loads(SAVED.read_text(encoding="utf-8"))
    for profile in {key.split("/")[0] for key in saved}:
        forms = [json.dumps(form, sort_keys=True) for key, form in saved.items() if key.startswith(profile + "/")]
        assert len(set(forms)) == len(forms), profile


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    with pytest.MonkeyPatch.context() as patch:
        SAVED.write_text(json.dumps(saved_forms(patch), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SAVED}")
