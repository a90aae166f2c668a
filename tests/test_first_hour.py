"""A researcher's first hour with the library (issue 53): the README's snippet as written, a saved folder that loads
with its tokenizer, BEIR records in, sentence-transformers' `encode`, progress bars off, the packaged model under its
hub name, and the data mirror found beside the checkout."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoModel, PreTrainedModel

from taser_lib import progress
from taser_lib.errors import ConfigError, TaserError
from taser_lib.models import TaserModel, default_checkpoint, load_encoder, load_tokenizer, weights

REPO = Path(__file__).resolve().parents[1]
fetch = importlib.import_module("taser_lib.datasets.fetch")  # the module, not the function taser_lib.datasets exports


def readme_library_snippet() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"## The library\n\n```python\n(.*?)```", text, re.S)
    assert found, "README.md has no python block right under '## The library'"
    return found.group(1)


def test_the_readme_library_snippet_runs_offline_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    scope: dict = {}
    exec(compile(readme_library_snippet(), "README.md", "exec"), scope)
    assert capsys.readouterr().out.strip() == "(1, 1)"
    assert scope["P"].shape == (1, scope["model"].config.hidden_size)
    assert (tmp_path / "my-taser" / "tokenizer.json").is_file()
    loaded = AutoModel.from_pretrained(tmp_path / "my-taser")  # the README's AutoModel sentence
    assert type(loaded) is TaserModel and loaded.config.routing == "deterministic"


@pytest.fixture(scope="module")
def tiny_encoder():
    return load_encoder("tiny", show_progress=False)


def test_save_pretrained_writes_the_tokenizer_and_a_folder_without_one_says_so(tmp_path, tiny_encoder):
    model = TaserModel.from_bert("tiny", routing="deterministic")
    model.save_pretrained(tmp_path / "saved")
    again = load_encoder(tmp_path / "saved", show_progress=False)
    assert again.tokenizer("who wrote hamlet")["input_ids"] == tiny_encoder.tokenizer("who wrote hamlet")["input_ids"]
    # a model loaded from that folder and saved elsewhere carries the tokenizer on
    TaserModel.from_pretrained(tmp_path / "saved").save_pretrained(tmp_path / "copy")
    assert (tmp_path / "copy" / "tokenizer.json").is_file()
    # a folder saved by transformers alone (no tokenizer) fails with that reason, not sentencepiece's
    PreTrainedModel.save_pretrained(model, tmp_path / "bare")
    with pytest.raises(TaserError, match=r"bare has no tokenizer .*tokenizer.save_pretrained"):
        load_encoder(tmp_path / "bare")
    assert load_encoder(tmp_path / "bare", tokenizer="tiny").tokenizer is not None  # or name its tokenizer


def test_encode_passages_takes_beir_records_tuples_and_strings(tiny_encoder):
    title, text = "Hamlet", "Hamlet is a tragedy by William Shakespeare."
    as_tuple = tiny_encoder.encode_passages([(title, text), ("", "An untitled passage.")])
    as_records = tiny_encoder.encode_passages([{"_id": "d1", "title": title, "text": text, "metadata": {}},
                                               {"text": "An untitled passage."}])
    np.testing.assert_array_equal(as_records, as_tuple)
    np.testing.assert_array_equal(tiny_encoder.encode_passages(["An untitled passage."]),
                                  tiny_encoder.encode_passages([("", "An untitled passage.")]))
    with pytest.raises(ConfigError, match=r'needs a "text" string .*\[\'body\', \'title\'\]'):
        tiny_encoder.encode_passages([{"title": title, "body": text}])


def test_encode_follows_sentence_transformers(tiny_encoder, capsys):
    queries = ["who wrote hamlet", "when was hamlet written"]
    np.testing.assert_array_equal(tiny_encoder.encode(queries, prompt_name="query"), tiny_encoder.encode_queries(queries))
    np.testing.assert_array_equal(tiny_encoder.encode_query(queries), tiny_encoder.encode_queries(queries))
    np.testing.assert_array_equal(tiny_encoder.encode(queries), tiny_encoder.encode_passages(queries))  # "document"
    np.testing.assert_array_equal(tiny_encoder.encode_document(queries), tiny_encoder.encode_passages(queries))
    one = tiny_encoder.encode("who wrote hamlet", prompt_name="query")
    assert one.shape == (tiny_encoder.dim,)
    with pytest.raises(ConfigError, match="prompt_name must be"):
        tiny_encoder.encode(queries, prompt_name="question")
    shown = load_encoder("tiny")  # bars on by default
    capsys.readouterr()
    shown.encode(queries, prompt_name="query", show_progress_bar=False)
    assert "encode queries" not in capsys.readouterr().err
    shown.encode(queries, prompt_name="query")
    assert "encode queries" in capsys.readouterr().err
    assert shown.show_progress is True  # the call's switch does not stick


def test_disable_progress_bars_hides_every_bar_of_the_library(capsys):
    shown = load_encoder("tiny")
    capsys.readouterr()
    progress.disable_progress_bars()
    try:
        assert not progress.progress_bars_shown()
        shown.encode_queries(["who wrote hamlet"])
        assert "encode queries" not in capsys.readouterr().err
    finally:
        progress.enable_progress_bars()
    shown.encode_queries(["who wrote hamlet"])
    assert "encode queries" in capsys.readouterr().err


def test_taser_progress_off_hides_the_bars_for_a_process(monkeypatch, capsys):
    shown = load_encoder("tiny")
    capsys.readouterr()
    monkeypatch.setenv("TASER_PROGRESS", "off")
    shown.encode_queries(["who wrote hamlet"])
    assert "encode queries" not in capsys.readouterr().err


def test_the_packaged_model_answers_to_its_hub_name_offline(monkeypatch):
    import huggingface_hub

    def not_cached(*args, **kwargs):
        raise huggingface_hub.errors.LocalEntryNotFoundError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", not_cached)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in weights.DEFAULT_HUB_NAMES:
        assert weights.resolve_checkpoint(name) == default_checkpoint()
    with pytest.raises(TaserError, match="neither a local folder nor in the Hugging Face cache"):
        weights.resolve_checkpoint("bert-base-uncased")
    assert load_tokenizer("sentence-transformers/all-MiniLM-L6-v2")("hamlet")["input_ids"] == \
        load_tokenizer("default")("hamlet")["input_ids"]


def test_the_data_mirror_beside_the_checkout_is_found(tmp_path, monkeypatch):
    root = tmp_path / "work" / "taser"
    (root / "taser_lib" / "data").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'taser-lib'\n")
    monkeypatch.setattr(fetch, "__file__", str(root / "taser_lib" / "data" / "fetch.py"))
    monkeypatch.delenv("TASER_DATA_MIRROR", raising=False)
    assert fetch.resolve_mirror() is None  # no ../shared/data yet
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    assert fetch.resolve_mirror() == tmp_path / "work" / "shared" / "data"
    monkeypatch.setenv("TASER_DATA_MIRROR", "")  # set but empty: no mirror at all
    assert fetch.resolve_mirror() is None
    monkeypatch.setenv("TASER_DATA_MIRROR", str(tmp_path))  # the environment beats the checkout
    assert fetch.resolve_mirror() == tmp_path
    assert fetch.resolve_mirror(tmp_path / "work") == tmp_path / "work"  # and the argument beats both
    (root / "pyproject.toml").unlink()  # an installed package, not a checkout: nothing beside it counts
    monkeypatch.delenv("TASER_DATA_MIRROR")
    assert fetch.resolve_mirror() is None


def test_a_plain_shell_without_the_export_line_finds_the_mirror():
    """The checkout this test runs from: ../shared/data beside it (as CI lays it out) is the mirror."""
    beside = REPO.parent / "shared" / "data"
    assert beside.is_dir(), "tests need ../shared/data beside the checkout"
    env = {k: v for k, v in os.environ.items() if k != "TASER_DATA_MIRROR"}
    out = subprocess.run([sys.executable, "-c", "from taser_lib.datasets.fetch import resolve_mirror; print(resolve_mirror())"],
                         env=env, capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    assert Path(out).resolve() == beside.resolve()


def test_import_taser_lib_is_enough_for_auto_model(tmp_path):
    """A user's script: `import taser_lib`, then transformers' AutoModel on a folder the library saved. Importing
    taser_lib imports no torch; the classes register once transformers is imported, in either order."""
    TaserModel.from_bert("tiny", routing="sequence", num_experts=2).save_pretrained(tmp_path / "saved")
    script = ("import sys\nimport taser_lib\nprint('torch' in sys.modules, 'transformers' in sys.modules)\n"
              "from transformers import AutoConfig, AutoModel\n"
              f"model = AutoModel.from_pretrained({str(tmp_path / 'saved')!r})\n"
              "print(type(model).__name__, model.config.routing, AutoConfig.for_model('taser').__class__.__name__)\n")
    for first in ("", "import transformers\n"):
        out = subprocess.run([sys.executable, "-c", first + script], capture_output=True, text=True, cwd=tmp_path,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert out.returncode == 0, out.stderr[-2000:]
        lines = out.stdout.split("\n")
        assert lines[0] == ("False False" if not first else "True True")
        assert lines[1] == "TaserModel sequence TaserConfig"


def test_every_page_imported_the_models_anyway():
    """Why registering at `import transformers` keeps every result: each committed result recorded
    taser_lib/models/__init__.py among the files it loaded, so each imported the models (and registered them)
    already; now that import comes when transformers does."""
    metas = sorted(REPO.glob("results/*/*/meta.json"))
    assert metas
    missing = [m.parent.name for m in metas
               if "taser_lib/models/__init__.py" not in json.loads(m.read_text(encoding="utf-8")).get("library_files", {})]
    assert not missing, missing
