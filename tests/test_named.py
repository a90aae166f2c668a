"""The core without the dataset registry: it imports none of `taser_lib.datasets`, reads folders without it, and a
dataset it is given by name reaches the registry only through `taser_lib.data.named.registry` (issue 49: the
registry is an optional subpackage the core never imports)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_the_core_imports_no_module_of_the_registry():
    out = _run("""
        import sys
        import taser_lib.data, taser_lib.evaluation, taser_lib.losses, taser_lib.models, taser_lib.retrieval
        import taser_lib.training.cross_encoder, taser_lib.training.distill, taser_lib.training.mining
        import taser_lib.training.retriever
        print(sorted(m for m in sys.modules if m.startswith("taser_lib.datasets")))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_name_without_the_registry_says_how_to_get_it_and_a_folder_needs_none(tmp_path):
    out = _run(f"""
        from taser_lib.errors import TaserError
        from taser_lib.training.reranking import load_reranking_sets
        try:
            load_reranking_sets("wikiqa", ["test"])
        except TaserError as err:
            print("error:", err)
        from taser_lib.data.formats.beir import write_corpus_jsonl, write_qrels_tsv, write_queries_jsonl
        from taser_lib.data.types import Document, Query
        from taser_lib.training.config import DataSource
        from taser_lib.training.retriever import load_beir_source
        folder = {str(tmp_path)!r}
        write_corpus_jsonl({{"d1": Document("d1", "a passage", "T"), "d2": Document("d2", "another", "")}},
                           folder + "/corpus.jsonl")
        write_queries_jsonl({{"q1": Query("q1", "a question")}}, folder + "/queries.jsonl")
        write_qrels_tsv({{"q1": {{"d1": 1}}}}, folder + "/qrels/train.tsv")
        dataset = load_beir_source(DataSource("beir", "train", folder))
        print("read:", sorted(dataset.corpus), sorted(dataset.queries))
        import sys
        print("registry loaded:", any(m.startswith("taser_lib.datasets") for m in sys.modules))
    """)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("error: a dataset given by name needs the dataset registry: `import taser_lib.datasets`")
    assert lines[1:] == ["read: ['d1', 'd2'] ['q1']", "registry loaded: False"]


def test_the_stand_in_is_the_registry_once_imported():
    import taser_lib.datasets as datasets
    from taser_lib.data.named import registry

    for name in ("load_dataset", "prepared_dir", "ensure_prepared", "load_evaluation_set", "get", "fetch"):
        assert getattr(registry, name) is getattr(datasets, name)
    assert registry.msmarco is sys.modules["taser_lib.datasets.msmarco"]
    assert registry.load_dataset is sys.modules["taser_lib.datasets.registry"].load_dataset


def test_the_counted_core_holds_no_file_of_the_registry():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import core_lines
    finally:
        sys.path.pop(0)
    files = [p.relative_to(REPO).as_posix() for p in core_lines.core_files()]
    assert "taser_lib/data/named.py" in files
    assert not [f for f in files if f.startswith("taser_lib/datasets/")]
