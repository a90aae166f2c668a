"""Pages moved into taser_book/pages are result-preserving: each computes the tables its notebook computed.

Every entry of `taser_book/result_preserving_changes.yaml` shown by `test_the_page_publishes_what_its_notebook_did`
is a notebook that became prose and one call per cell over `taser_book/pages/<page>.py` (which the entry `requires`).
The notebook at `from` and the page module now both run for real at `smoke` sizes on the code paths the `cpu`
profile takes (`CPU_PATHS`), sharing one run cache, and must hand `publish` the same tables, parameters and settings
(`page_proof.assert_same_publish`)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from page_proof import Published, PublishRecorder, assert_same_publish
from taser_book.profiles import page_settings
from taser_book.results import notebook_sha256

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_page_proofs.py::test_the_page_publishes_what_its_notebook_did"

# The page's cpu settings that choose a code path (beyond sizes and the model), run at smoke sizes. A list may be
# part of the cpu profile's (in its order): enough of its variants, losses or seeds to take each path the page has.
CPU_PATHS = {
    "baselines": {},  # cpu's nfcorpus and cisi do not fit smoke's 300 documents; smoke's two sets are part of cpu's
    "de_capacity": {"ca_seeds": [13]},
    "de_colbert": {},
    "de_distillation": {"small_sizes": ["2-384"]},
    "de_k_sweep": {},
    "de_learning_curves": {},
    "de_margins": {"reinit_layers": 2},
    "de_negatives": {"negative_losses": ["de-one-hot", "de-softmax-ce"]},
    "de_propositions": {},
    "de_qualitative": {"reinit_layers": 2, "students": ["de-margin-mse", "de-softmax-ce"]},
    "de_regularisation": {"regularisers": ["baseline", "embedding-dropout", "token-dropout", "mlm", "focal"]},
    "de_score_distributions": {"reinit_layers": 2},
    "taser_distilled": {},
    "taser_efficiency": {},
    "taser_hybrid": {},
    "taser_in_domain": {},
    "taser_out_of_domain": {},  # as baselines: smoke's two out-of-domain sets
    "taser_routing": {"routing_variants": ["dpr", "shared", "taser", "seq-r-2", "tok-r-2"], "score_dev": True},
}
# {page: {table: [columns of measured wall time], "parameters": [keys]}}: on both sides, their values not compared.
WALL = {"parameters": ["wall_s"]}
TIMINGS: dict[str, dict[str, list[str]]] = {
    "de_colbert": WALL, "de_distillation": WALL, "de_k_sweep": WALL, "de_learning_curves": WALL,
    "de_negatives": WALL, "de_propositions": WALL, "de_regularisation": WALL, "taser_distilled": WALL,
    "taser_efficiency": {"throughput": ["seconds", "passages_per_second"]},  # measured as the page runs
}


def _part_of(value, cpus) -> bool:
    """`value` is the cpu profile's value, or a non-empty list of its list's items in its order."""
    if value == cpus:
        return True
    if not (isinstance(value, list) and isinstance(cpus, list) and value):
        return False
    rest = iter(cpus)
    return all(any(item == other for other in rest) for item in value)


def _declared() -> list[dict]:
    entries = yaml.safe_load((REPO / "taser_book/result_preserving_changes.yaml").read_text(encoding="utf-8")) or []
    return [e for e in entries if e.get("shown_by") == TEST]


def _entries() -> list[dict]:
    """The notebooks this test proves; the page module versions it declares as well are `_module_versions`."""
    return [e for e in _declared() if e["file"].endswith(".ipynb")]


def _module_versions() -> list[dict]:
    """Later versions of a proven page's module (`file: taser_book/pages/<page>.py`), which the proof runs."""
    return [e for e in _declared() if not e["file"].endswith(".ipynb")]


def test_a_declared_page_module_version_is_one_the_proof_runs():
    proven = {Path(e["file"]).stem for e in _entries()}
    for entry in _module_versions():
        assert entry["file"].startswith("taser_book/pages/") and Path(entry["file"]).stem in proven, entry["file"]


@pytest.mark.slow
@pytest.mark.parametrize("entry", _entries(), ids=lambda e: Path(e["file"]).stem)
def test_the_page_publishes_what_its_notebook_did(entry, monkeypatch):
    page = Path(entry["file"]).stem
    module = importlib.import_module(f"taser_book.pages.{page}")
    assert f"taser_book/pages/{page}.py" in (entry.get("requires") or {}), "the entry requires the page module"
    overrides = CPU_PATHS[page]
    cpu = page_settings(page, "cpu")
    for key, value in overrides.items():
        assert _part_of(value, getattr(cpu, key)), f"CPU_PATHS[{page!r}][{key!r}] is not (part of) the cpu value"
    record = PublishRecorder(monkeypatch)
    before = record.notebook(entry["file"], entry["from"], "smoke", overrides)
    after = record.page(module, "smoke", overrides)
    assert_same_publish(before, after, TIMINGS.get(page))


def test_every_page_module_is_proven_or_its_page_was_rerun():
    """A page module's move is declared with its proof, or the page's committed cpu result was made from the notebook
    as it is now (rerun after the move: the testbed, the architecture and the performance pages)."""
    proven = {Path(e["file"]).stem for e in _entries()}
    assert proven <= set(CPU_PATHS)
    for page in (p.stem for p in (REPO / "taser_book/pages").glob("*.py") if p.stem not in ("__init__", "common")):
        if page in proven:
            continue
        recorded = json.loads((REPO / "results/cpu" / page / "meta.json").read_text(encoding="utf-8"))
        assert recorded["notebook_source"]["sha256"] == notebook_sha256(REPO / "notebooks" / f"{page}.ipynb"), \
            f"{page}: moved into taser_book/pages, neither proven nor rerun"


def test_part_of_keeps_the_cpu_order():
    assert _part_of([13, 15], [13, 14, 15]) and _part_of(2, 2) and _part_of(["a"], ["a", "b"])
    assert not _part_of([15, 13], [13, 14, 15]) and not _part_of([], [1]) and not _part_of([4], [1, 2])
    assert not _part_of(3, 2)


def test_the_proof_sees_a_changed_table_parameter_or_setting():
    frame = pd.DataFrame({"model": ["ca", "de"], "value": [0.5, 0.25], "seconds": [1.0, 2.0]})
    same = Published("p", {"t": frame}, {"seed": 13}, {}, {"profile": "smoke"})
    assert_same_publish([same], [Published("p", {"t": frame.copy()}, {"seed": 13}, {}, {"profile": "smoke"})])
    changed = [Published("p", {"t": frame.assign(value=[0.5, 0.2500001])}, {"seed": 13}, {}, {"profile": "smoke"}),
               Published("p", {"t": frame[["value", "model", "seconds"]]}, {"seed": 13}, {}, {"profile": "smoke"}),
               Published("p", {"t": frame}, {"seed": 42}, {}, {"profile": "smoke"}),
               Published("p", {"t": frame}, {"seed": 13}, {}, {"profile": "cpu"}),
               Published("p", {"t": frame, "u": frame}, {"seed": 13}, {}, {"profile": "smoke"})]
    for other in changed:
        with pytest.raises(AssertionError):
            assert_same_publish([same], [other])
    timed = Published("p", {"t": frame.assign(seconds=[3.0, 4.0])}, {"seed": 13}, {}, {"profile": "smoke"})
    with pytest.raises(AssertionError):
        assert_same_publish([same], [timed])
    assert_same_publish([same], [timed], {"t": ["seconds"]})
