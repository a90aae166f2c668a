"""`taser export --format sentence-transformers`: SentenceTransformer(OUT) loads the folder offline and its
encode_query / encode_document give DenseEncoder's query and passage vectors, for DPR (two towers), TASER (Det-R,
Seq-R, Tok-R) and Shared on a tiny random BERT with the default tokenizer; TASER's shared weights are stored once;
the packaged default exports to what sentence-transformers itself computes with it; CLI errors are one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from sentence_transformers import SentenceTransformer

from taser_book.cli import main
from taser_lib.models import DenseEncoder, build_model, count_parameters, default_checkpoint, load_model, \
    load_tokenizer
from taser_lib.export import export_sentence_transformers
from training_helpers import make_tiny_bert, one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

QUERIES = ["who wrote hamlet?", "what is the capital of france",
           "which emperor ruled rome when the western roman empire finally fell to odoacer in the fifth century"]
TITLED = [("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
          ("Paris", "Paris is the capital and most populous city of France."),
          ("Western Roman Empire", "The last emperor, Romulus Augustulus, was deposed by Odoacer in 476. " * 6)]
UNTITLED = ["Shakespeare was born in Stratford-upon-Avon.", "The Seine flows through Paris. " * 12]
LENGTHS = dict(max_query_length=16, max_passage_length=48)  # short: the long texts above are truncated
CASES = {
    "dpr": ("dpr", {}),
    "taser-det": ("taser", {"routing": "deterministic"}),
    "taser-seq": ("taser", {"routing": "sequence", "pooling": "mean", "normalize": True}),
    "taser-tok": ("taser", {"routing": "token"}),
    "shared": ("shared", {"pooling": "mean", "normalize": True}),
    # models that read a titled passage as one string "title text" (built from sentence-transformers checkpoints)
    "shared-concat": ("shared", {"pooling": "mean", "normalize": True, "passage_format": "concat"}),
    "dpr-concat": ("dpr", {"passage_format": "concat"}),
    "taser-det-concat": ("taser", {"routing": "deterministic", "passage_format": "concat"}),
}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny") / "bert")


def saved_model(tiny_bert, folder, arch, overrides, **extra):
    """A model of `arch` from the tiny BERT with every weight moved by seeded noise (so DPR's towers and TASER's
    experts differ, as after training), saved with its tokenizer."""
    model = build_model(arch, tiny_bert, **overrides, **extra)
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * p.std().nan_to_num(0.02).clamp(min=0.02) * torch.randn(p.shape, generator=generator))
    model.save_pretrained(folder)
    load_tokenizer(tiny_bert).save_pretrained(folder)
    return folder


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def stored(folder):
    """{tensor name (with its file): numel} over every safetensors file of an export."""
    out = {}
    for path in sorted(folder.rglob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                out[f"{path.relative_to(folder)}:{key}"] = int(np.prod(f.get_slice(key).get_shape()))
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_sentence_transformers_round_trip(tiny_bert, tmp_path, case):
    arch, overrides = CASES[case]
    source = saved_model(tiny_bert, tmp_path / "model", arch, overrides)
    out = export_sentence_transformers(source, tmp_path / "st", **LENGTHS)
    ours = DenseEncoder(load_model(source), load_tokenizer(source), show_progress=False, **LENGTHS)

    custom = arch == "taser" and overrides["routing"] != "shared"
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=custom)
    assert min_cosine(st.encode_query(QUERIES), ours.encode_queries(QUERIES)) >= 0.9999
    concat = overrides.get("passage_format") == "concat"
    assert ours.passage_format == ("concat" if concat else "pair")
    if concat:  # sentence-transformers users pass one string, title + " " + text; our TASER module joins tuples too
        joined = [f"{title} {text}" for title, text in TITLED]
        assert min_cosine(st.encode_document(joined), ours.encode_passages(TITLED)) >= 0.9999
        assert "title + \" \" + text" in (out / "README.md").read_text()
    if not concat or custom:
        assert min_cosine(st.encode_document(TITLED), ours.encode_passages(TITLED)) >= 0.9999
    assert min_cosine(st.encode_document(UNTITLED), ours.encode_passages(UNTITLED)) >= 0.9999
    assert min_cosine(st.encode(UNTITLED), ours.encode_passages(UNTITLED)) >= 0.9999  # no task: passages
    if arch == "dpr" or overrides.get("routing") == "deterministic":
        # the task reaches the right tower / expert: the same text encoded as a query and as a passage differs
        text = UNTITLED[:1]
        as_query, as_passage = st.encode_query(text), st.encode_document(text)
        np.testing.assert_allclose(as_query, ours.encode_queries(text), atol=1e-4)
        np.testing.assert_allclose(as_passage, ours.encode_passages(text), atol=1e-4)
        assert np.abs(as_query - as_passage).max() > 1e-2
    if custom:  # sentence-transformers >= 6 imports our module class only when trusted
        with pytest.raises(ValueError, match="trust_remote_code"):
            SentenceTransformer(str(out), device="cpu")
        modules = json.loads((out / "modules.json").read_text())
        assert modules[0]["type"] == "taser_lib.models.st_module.TaserEncoder"


def test_taser_shared_weights_are_stored_once(tiny_bert, tmp_path):
    source = saved_model(tiny_bert, tmp_path / "model", "taser", {"routing": "deterministic"}, mlm_head=True)
    out = export_sentence_transformers(source, tmp_path / "st")
    model = load_model(source)
    encoder = {n: p for n, p in model.named_parameters() if not n.startswith("mlm_head.")}
    tensors = stored(out)
    # one file, one copy of every encoder weight (shared blocks, attention and embeddings once, both experts),
    # and nothing else: no second tower, no pooler, no training-only MLM head
    assert {name.split(":")[0] for name in tensors} == {"model.safetensors"}
    assert len(tensors) == len(encoder)
    assert sum(tensors.values()) == sum(p.numel() for p in encoder.values())
    size = (out / "model.safetensors").stat().st_size
    assert 4 * sum(tensors.values()) <= size < 4 * sum(tensors.values()) + 64 * 1024  # float32 + a JSON header
    # against DPR's two full towers: Det-R adds one expert FFN per specialized block to one tower
    dpr = stored(export_sentence_transformers(saved_model(tiny_bert, tmp_path / "dpr", "dpr", {}), tmp_path / "d"))
    assert sum(dpr.values()) == count_parameters(load_model(tmp_path / "dpr"))
    assert sum(tensors.values()) < 0.75 * sum(dpr.values())


def test_shared_and_dpr_load_with_no_flag_and_back_into_taser_lib(tiny_bert, tmp_path):
    source = saved_model(tiny_bert, tmp_path / "model", "shared", {"pooling": "mean", "normalize": True})
    out = export_sentence_transformers(source, tmp_path / "st")
    types = [m["type"] for m in json.loads((out / "modules.json").read_text())]
    assert all(t.startswith("sentence_transformers.") for t in types)
    # the export's root is a stock BERT with the ST pooling: taser_lib loads it as the same Shared model
    again = DenseEncoder(load_model(out), load_tokenizer(out), show_progress=False)
    ours = DenseEncoder(load_model(source), load_tokenizer(source), show_progress=False)
    assert again.passage_format == ours.passage_format == "pair"  # recorded in the export's config.json
    assert min_cosine(again.encode_passages(TITLED), ours.encode_passages(TITLED)) >= 0.9999


def test_default_model_exports_to_what_sentence_transformers_computes(tmp_path):
    out = export_sentence_transformers("default", tmp_path / "st")
    ours = SentenceTransformer(str(out), device="cpu")
    theirs = SentenceTransformer(str(default_checkpoint()), device="cpu")
    texts = UNTITLED + QUERIES
    assert min_cosine(ours.encode_document(texts), theirs.encode(texts)) >= 0.9999
    card = (out / "README.md").read_text()
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err  # besides transformers' weight-loading progress bars
    lines = [line for line in err.splitlines() if line.startswith("taser:")]
    assert len(lines) == 1 and lines[0].startswith("taser: error: ") and "Traceback" not in err
    return lines[0]


def test_cli_exports_and_refuses_with_one_line_errors(tiny_bert, tmp_path, capsys):
    source = saved_model(tiny_bert, tmp_path / "run" / "best", "taser", {"routing": "deterministic"})
    (tmp_path / "run" / "run_config.json").write_text(json.dumps({"config": {"loop": {}, "fingerprint": {}}}))
    out = tmp_path / "exports" / "taser"
    assert main(["export", "--format", "sentence-transformers", str(tmp_path / "run"), str(out)]) == 0
    assert "exported" in capsys.readouterr().out
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()

    err = _one_line_error(capsys, ["export", str(tmp_path / "missing"), str(tmp_path / "x")])
    assert "missing does not exist" in err
    err = _one_line_error(capsys, ["export", str(source), str(out)])
    assert "already exists" in err and "--force" in err
    err = _one_line_error(capsys, ["export", str(tmp_path / "exports"), str(tmp_path / "y")])
    assert "holds no model" in err
    colbert = saved_model(tiny_bert, tmp_path / "colbert", "colbert", {})
    err = _one_line_error(capsys, ["export", str(colbert), str(tmp_path / "z")])
    assert "ColbertModel cannot be exported" in err
    # nothing half-written beside the outputs
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["taser"]
    assert not (tmp_path / "z").exists() and not any(p.name.startswith(".z") for p in tmp_path.iterdir())

    before = (out / "model.safetensors").stat().st_mtime_ns
    assert main(["export", "--force", str(source), str(out)]) == 0
    assert (out / "model.safetensors").stat().st_mtime_ns != before
