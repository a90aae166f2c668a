"""The README's "Your own data", line by line, as a new user types it: a BEIR folder (real SciFact claims, no
qrels/dev.tsv) trained as TASER and DPR with every default, best/ chosen on a held-out tenth of train by nDCG@10, then
searched, evaluated and exported."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from taser_book.cli import main
from taser_lib.datasets import registry
from taser_lib.data.formats.beir import write_corpus_jsonl, write_qrels_tsv, write_queries_jsonl
from taser_lib.datasets.slicing import slice_dataset

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"### Your own data\n.*?```bash\n(.*?)```", text, re.S)
    assert found, "README.md has no bash block under '### Your own data'"
    return [line.split("  #")[0].strip() for line in found.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def my_beir(shared_data, tmp_path_factory) -> Path:
    """SciFact's real train and test claims over one corpus of the documents they cite and a seeded sample."""
    tmp = tmp_path_factory.mktemp("own-data")
    data = tmp / "data"
    train = slice_dataset(registry.load_dataset("scifact", "train", data_dir=data, mirror=shared_data), 40, 100, 0)
    test = slice_dataset(registry.load_dataset("scifact", "test", data_dir=data, mirror=shared_data), 10, 40, 0)
    folder = tmp / "my-beir"
    write_corpus_jsonl({**train.corpus, **test.corpus}, folder / "corpus.jsonl")
    write_queries_jsonl({**train.queries, **test.queries}, folder / "queries.jsonl")
    write_qrels_tsv(train.qrels, folder / "qrels" / "train.tsv")
    write_qrels_tsv(test.qrels, folder / "qrels" / "test.tsv")
    return tmp


def test_the_readme_own_data_commands_train_select_search_evaluate_and_export(my_beir, monkeypatch):
    monkeypatch.chdir(my_beir)
    commands = readme_commands()
    assert [c.split()[:2] for c in commands] == [["taser", "train"]] * 2 + [["taser", "search"], ["taser", "evaluate"],
                                                                              ["taser", "export"]]
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command

    judged = [q for q in (my_beir / "my-beir" / "qrels" / "train.tsv").read_text().split("\n")[1:] if q]
    train_queries = list(dict.fromkeys(line.split("\t")[0] for line in judged))
    for run in ("runs/my-taser", "runs/my-dpr"):
        recorded = json.loads((my_beir / run / "run_config.json").read_text())["config"]
        data, model = recorded["fingerprint"]["data"], recorded["fingerprint"]["model"]
        assert data["dev"]["split"] == "train[:10%]" and data["train"][0]["split"] == "train[10%:]"
        assert recorded["loop"]["select_metric"] == "nDCG@10" and model["name_or_path"] == "default"
        best = json.loads((my_beir / run / "best" / "best.json").read_text())
        curve = [json.loads(line) for line in (my_beir / run / "curve.jsonl").read_text().splitlines()]
        assert best["nDCG@10"] == max(row["dev/nDCG@10"] for row in curve)  # best/ is the best dev nDCG@10
        assert (my_beir / run / "best" / "tokenizer.json").is_file()
        assert "nDCG@10" in (my_beir / run / "best" / "README.md").read_text()  # taser train writes the card
    assert len(train_queries) == 40  # 36 trained on, 4 held out

    from taser_lib.evaluation.metrics import evaluate
    from taser_lib.datasets.ready import load_evaluation_set
    from taser_lib.retrieval.runs import read_run

    test = load_evaluation_set(my_beir / "my-beir", "test")
    run = read_run(my_beir / "taser.run")
    assert set(run) == set(test.qrels) and all(len(docs) == len(test.corpus) for docs in run.values())  # < 1,000
    scored = json.loads((my_beir / "taser.run.eval.json").read_text())["ir_measures"]
    assert scored == pytest.approx(evaluate(run, test.qrels, ["nDCG@10", "RR@10", "R@100"]), abs=1e-12)

    from sentence_transformers import SentenceTransformer

    from taser_lib.models import load_encoder

    exported = SentenceTransformer(str(my_beir / "st-taser"), device="cpu", trust_remote_code=True)  # as README
    ours = load_encoder(my_beir / "runs/my-taser/best", show_progress=False)
    claims = [q.text for q in list(test.queries.values())[:4]]
    passages = [{"title": d.title, "text": d.text} for d in list(test.corpus.values())[:4]]
    for theirs, mine in ((exported.encode_query(claims), ours.encode(claims, prompt_name="query")),
                         (exported.encode_document(passages), ours.encode(passages))):
        cosine = np.sum(theirs * mine, axis=1) / np.linalg.norm(theirs, axis=1) / np.linalg.norm(mine, axis=1)
        assert np.all(cosine > 0.9999), cosine
