"""The compiled encoder (`taser_lib.speed.compiled`): Inductor's kernels give the eager forward's vectors, for
queries and passages of every width, and the graph is made again when the weights change."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from taser_book.cli import main
from taser_lib.errors import ConfigError
from taser_lib.models import DenseEncoder, build_model, load_tokenizer
from taser_lib.speed.compiled import CompiledEncoder, CompiledModel, compiled_encoder

pytestmark = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                reason="Inductor needs a C++ compiler")
PASSAGES = [("Hamlet", "Hamlet is a tragedy by William Shakespeare."), ("", "Paris is the capital of France."),
            ("Bees", "Bees make honey from nectar collected from flowers, " * 3)]  # three widths


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.slow
def test_compiled_vectors_are_the_eager_ones_and_follow_new_weights(tiny_bert_with_tokenizer):
    tiny = tiny_bert_with_tokenizer
    model = build_model("taser", tiny, shared_blocks=1)
    eager = DenseEncoder(model, load_tokenizer(tiny), device="cpu", show_progress=False, precision="fp32",
                         batch_size=2)
    compiled = compiled_encoder(eager)
    assert isinstance(compiled, CompiledEncoder) and compiled.resolved_precision == "fp32-compiled"
    assert isinstance(compiled.running_model(), CompiledModel)
    for _ in range(2):  # batches of two widths, then the same again: one dynamic graph serves both
        a, b = eager.encode_passages(PASSAGES), compiled.encode_passages(PASSAGES)
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        assert cosines(a, b).min() >= 0.9999
    q = ["who wrote hamlet", "what do bees make from nectar collected from flowers"]
    assert cosines(eager.encode_queries(q), compiled.encode_queries(q)).min() >= 0.9999
    first = compiled.running_model()
    assert compiled.running_model() is first  # kept while the weights stay the same
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    assert compiled.running_model() is not first
    assert cosines(eager.encode_passages(PASSAGES), compiled.encode_passages(PASSAGES)).min() >= 0.9999


def test_a_compiled_encoder_fuses_its_own_linears(tiny_bert_with_tokenizer):
    model = build_model("shared", tiny_bert_with_tokenizer)
    with pytest.raises(ConfigError, match="fuse_cpu_linears"):
        CompiledEncoder(model, load_tokenizer(tiny_bert_with_tokenizer), fuse_cpu_linears=True)


@pytest.mark.slow
def test_cli_index_compiled_records_it_and_refuses_it_at_int8(tiny_bert_with_tokenizer, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "title": "T", "text": f"passage number {i}"}) + "\n"
                              for i in range(5)))
    tiny = str(tiny_bert_with_tokenizer)
    assert main(["index", str(corpus), "--retriever", "dense", "--model", tiny, "--out", str(tmp_path / "idx"),
                 "--precision", "fp32", "--compile", "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "idx" / "taser_index.json").read_text())["precision"] == "fp32-compiled"
    assert main(["encode", str(corpus), "--model", tiny, "--out", str(tmp_path / "emb"), "--precision", "int8",
                 "--compile", "--device", "cpu"]) != 0
    err = capsys.readouterr().err
    assert "--compile runs a float encoder" in err and "Traceback" not in err
