"""tools/probe_ca_depth.py: de_capacity's CA of one depth, with loop settings changed, trained at `smoke`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import probe_ca_depth  # noqa: E402


@pytest.fixture()
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(REPO)
    return tmp_path / "runs"


def test_the_probe_trains_the_pages_ca_then_one_with_the_loop_changed(runs_dir, capsys):
    assert probe_ca_depth.main(["--profile", "smoke", "--layers", "2"]) == 0
    page = capsys.readouterr().out
    assert "2-layer CA, loop as the page" in page and "test MRR@10" in page and "BM25" in page
    assert "scores under another question" in page and "Spearman with its own" in page
    assert probe_ca_depth.main(["--profile", "smoke", "--layers", "2", "--set", "learning_rate=1e-3"]) == 0
    changed = capsys.readouterr().out
    assert "'learning_rate': 0.001" in changed
    runs = sorted(p for p in runs_dir.glob("cross-encoder-*") if p.is_dir())
    assert len(runs) == 2  # another configuration, another run; the page's one is not touched
    lrs = {json.loads((r / "fingerprint.json").read_text())["config"]["loop"]["lr"] for r in runs}  # the key keeps the old name
    assert 1e-3 in lrs and len(lrs) == 2
    layers = {json.loads((r / "fingerprint.json").read_text())["config"]["model"]["overrides"]["num_hidden_layers"]
              for r in runs}
    assert layers == {2}


def test_bad_arguments_say_what_is_wrong(runs_dir):
    with pytest.raises(SystemExit, match="no size of 3 layers"):
        probe_ca_depth.main(["--profile", "smoke", "--layers", "3"])
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        probe_ca_depth.main(["--profile", "smoke", "--set", "learning_rate"])
