"""The re-ranking runs' sizes (`runs.recipes.reranking_changes`) as every re-ranking page asks for them at every
profile, against a snapshot made by the code the committed pages ran.

`reranking_changes` turns a page's parameters into the changes of its CA and student configs, so it decides their
run keys. The snapshot `tests/data/reranking_changes.json` holds, for each page, profile and re-ranking entry, the
parameters the page passes and the changes they gave. Where they still give the same changes, every committed page
trains the same runs: this test is what `taser_book/result_preserving_changes.yaml` names for recipes.py. Write it
again (`python tests/test_reranking_sizes.py`) only with a change that is meant to change run keys, and rerun the
pages it changes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "data" / "reranking_changes.json"
PROFILES = ("smoke", "cpu", "gpu", "full")
PAGE_KEYS = ("model", "pooling", "precision", "max_query_length", "max_passage_length", "batch_size",
             "eval_batch_size", "epochs", "learning_rate", "n_train", "n_queries", "n_docs")  # the pages' `params`


def _changes(name: str, params: dict) -> list[str]:
    from taser_book.runs.recipes import RERANKERS, reranking_changes

    config = RERANKERS[name].load()
    if config.kind == "cross-encoder":  # as reranking_run: the CA's own sizes where they differ
        params = {**params, **(params.get("teacher") or {})}
    return [repr(change) for change in reranking_changes(config, params)]


def _cases() -> list[dict]:
    """Every re-ranking page's `rerank_params` at every profile, with every re-ranking entry."""
    import nbformat

    from taser_book.runner import notebook_parameters
    from taser_book.runs.recipes import RERANKERS

    names = sorted(RERANKERS)
    cases, seen = [], set()
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if not any("reranking_run(" in c.source for c in nb.cells):
            continue
        defaults: dict = {}
        exec(next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])), {}, defaults)
        for profile in PROFILES:
            given = {**defaults, **notebook_parameters(path, profile)}
            params = {k: given[k] for k in PAGE_KEYS if k in given}
            params.update(cross_encoder_model=given.get("cross_encoder_model"), teacher=given.get("teacher_params"))
            if given.get("rerank_loop"):  # the pages that declare it
                params["rerank_loop"] = given["rerank_loop"]
            for name in names:
                key = json.dumps([params, name], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    cases.append({"pages": [f"{path.stem}@{profile}"], "entry": name, "params": params,
                                  "changes": _changes(name, params)})
                else:
                    next(c for c in cases if json.dumps([c["params"], c["entry"]], sort_keys=True) == key)[
                        "pages"].append(f"{path.stem}@{profile}")
    return cases


def test_every_page_profile_and_entry_gets_the_changes_it_got():
    cases = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert {p.split("@")[1] for c in cases for p in c["pages"]} >= {"smoke", "cpu"}
    for case in cases:
        assert _changes(case["entry"], case["params"]) == case["changes"], (case["entry"], case["pages"])


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    cases = _cases()
    SNAPSHOT.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases written to {SNAPSHOT.relative_to(REPO)}")
