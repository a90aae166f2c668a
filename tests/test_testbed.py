"""The testbed probe's tables (training/testbed.py), its figure and the page's preconditions (scorecard)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from taser_book.plots.testbed import plot_probe_gap
from taser_book.results import save_result
from taser_book.scorecard import notebook_preconditions
from taser_book.runs.testbed import (ProbePoint, probe_display, probe_gaps, probe_points, probe_training,
                                        reinitialised_checkpoint, setting_label)


def test_probe_points_cover_every_size_and_seed():
    points = probe_points({"squad-open": [200, 1000], "wikiqa": [None]}, seeds=[13, 14],
                          reinit={"squad-open": [1000]}, reinit_layers=2)
    assert len(points) == 8
    assert ProbePoint("squad-open", 1000, 13, 2) in points
    assert ProbePoint("squad-open", 1000, 13, 2).start_label == "top 2 re-initialised"
    assert ProbePoint("wikiqa", None, 14) in points
    assert ProbePoint("wikiqa", None, 13).size_label == "all"
    assert setting_label("wikiqa", "all") == "wikiqa, all questions"
    assert setting_label("wikiqa", "all", "top 2 re-initialised") == "wikiqa, all questions, top 2 re-initialised"


def _rows(ca: np.ndarray, de: np.ndarray, begin: np.ndarray, **where) -> list[dict]:
    out = []
    for name, values in (("ca", ca), ("de", de), ("zero-shot", begin)):
        out += [{"model": name, "seed": 13, "metric": "MRR@10", "query_id": f"q{i}", "value": float(v), **where}
                for i, v in enumerate(values)]
    return out


def test_probe_gaps_pair_the_models_on_their_shared_questions():
    rng = np.random.default_rng(0)
    start = rng.uniform(0.3, 0.7, 60)
    de = start + 0.001 * rng.standard_normal(60)   # barely moved
    ca = np.clip(de + 0.2, 0, 1)                    # a clear lead
    rows = _rows(ca, de, start, dataset="squad-open", n_train="1000", start="packaged")
    rows += [{"model": "ca", "seed": 13, "metric": "MRR@10", "query_id": "only-ca", "value": 1.0,
              "dataset": "squad-open", "n_train": "1000", "start": "packaged"}]   # a question the DE never saw: left out
    rows += _rows(start - 0.1, start + 0.2, start, dataset="wikiqa", n_train="all", start="top 2 re-initialised")
    gaps = probe_gaps(pd.DataFrame(rows)).set_index("setting")
    lead = gaps.loc["squad-open, 1000 questions"]
    assert lead["questions"] == 60 and lead["start"] == "packaged"
    assert lead["ca − de"] == pytest.approx(float(np.mean(ca - de)), abs=1e-4)
    assert lead["p (ca vs de)"] < 0.01 and lead["ca − de CI low"] > 0
    assert lead["p (de vs zero-shot)"] > 0.05
    shown = probe_display(gaps.reset_index())
    assert list(shown.columns)[:3] == ["setting", "seed", "questions"] and len(shown.columns) == 10
    assert shown["CA − DE [95% CI]"].str.match(r"^[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]$").all()
    behind = gaps.loc["wikiqa, all questions, top 2 re-initialised"]
    assert behind["ca − de"] < 0 and behind["de − zero-shot"] == pytest.approx(0.2, abs=1e-4)
    assert behind["p (de vs zero-shot)"] < 0.01


def _run(curve: list[tuple[int, float]], best_step: int, final_step: int) -> SimpleNamespace:
    result = {"select_metric": "nDCG@10", "best_step": best_step, "final_step": final_step,
              "best_metric": dict(curve)[best_step],
              "curve": [{"step": s, "dev/nDCG@10": v} for s, v in curve]}
    data = SimpleNamespace(train_split="train", load=lambda progress=False: {"train": list(range(50))})
    return SimpleNamespace(result=result, config=SimpleNamespace(data=data))


def test_probe_training_says_which_runs_left_their_initialisation():
    runs = {ProbePoint("wikiqa", None, 13): {"ca": _run([(0, 0.5), (10, 0.7)], 10, 10),
                                             "de": _run([(0, 0.8), (10, 0.79)], 0, 10)}}
    table = probe_training(runs).set_index("model")
    assert table.loc["ca", "trained"] == 1 and table.loc["de", "trained"] == 0
    assert table.loc["ca", "train questions"] == 50 and table.loc["ca", "setting"] == "wikiqa, all questions"
    assert table.loc["ca", "start"] == "packaged"


def test_a_reinitialised_checkpoint_keeps_the_lower_layers(tmp_path):
    from safetensors.numpy import load_file

    from taser_lib.models.weights import default_checkpoint

    folder = reinitialised_checkpoint("default", 2, seed=0, root=tmp_path)
    assert reinitialised_checkpoint("default", 2, seed=0, root=tmp_path) == folder   # written once
    before = load_file(str(default_checkpoint() / "model.safetensors"))
    after = load_file(str(folder / "model.safetensors"))
    name = "encoder.layer.{}.attention.self.query.weight"
    np.testing.assert_array_equal(after[name.format(0)], before[name.format(0)])
    assert not np.allclose(after[name.format(5)], before[name.format(5)])
    assert np.allclose(after["encoder.layer.5.output.dense.bias"], 0)
    assert (folder / "vocab.txt").is_file()
    with pytest.raises(ValueError):
        reinitialised_checkpoint("default", 7, root=tmp_path)


def test_a_reinitialised_copy_pools_as_its_checkpoint(tmp_path):
    """The packaged MiniLM is a mean-pooling, cosine sentence encoder: a DE built from its re-initialised copy must be
    one too, not fall back to [CLS] and a dot product (as copies without the module files did)."""
    from taser_lib.models import build_model
    from taser_lib.models.common import checkpoint_pooling
    from taser_lib.models.weights import default_checkpoint

    folder = reinitialised_checkpoint("default", 2, seed=0, root=tmp_path)
    assert checkpoint_pooling(folder) == checkpoint_pooling(default_checkpoint()) == ("mean", True)
    model = build_model("shared", folder)
    assert model.config.pooling == "mean" and model.config.normalize
    (folder / "modules.json").unlink()  # a copy written before the module files came along: written again
    assert checkpoint_pooling(reinitialised_checkpoint("default", 2, seed=0, root=tmp_path)) == ("mean", True)


def test_the_gap_figure_fits_the_column_and_labels_its_units():
    gaps = pd.DataFrame([{"dataset": "squad-open", "n_train": n, "seed": 13, "ca − de": g,
                          "ca − de CI low": g - 0.01, "ca − de CI high": g + 0.01}
                         for n, g in (("200", -0.02), ("2000", 0.02))])
    fig = plot_probe_gap(gaps, questions={("squad-open", "200"): 200, ("squad-open", "2000"): 2000})
    assert fig.get_size_inches()[0] <= 7.0
    ax = fig.axes[0]
    assert "points" in ax.get_ylabel() and "questions" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["200", "2,000"]
    with pytest.raises(KeyError):
        plot_probe_gap(gaps, questions={("squad-open", "200"): 200})


def test_the_page_reads_its_preconditions_per_setting(tmp_path: Path):
    folder = tmp_path / "cpu" / "testbed"
    folder.mkdir(parents=True)
    save_result(folder, "probe_gaps", pd.DataFrame(
        [{"setting": "a", "ca − de": 0.03, "p (ca vs de)": 0.001, "p (de vs zero-shot)": 0.2},
         {"setting": "b", "ca − de": -0.01, "p (ca vs de)": 0.3, "p (de vs zero-shot)": 0.001}]),
        parameters={"profile": "cpu"})
    save_result(folder, "probe_training", pd.DataFrame([{"setting": s, "model": m, "trained": t} for s, m, t in
                                                        (("a", "ca", 1), ("a", "de", 0), ("b", "ca", 0),
                                                         ("b", "de", 1))]))
    table = notebook_preconditions("testbed", folder).set_index("precondition")
    assert table.loc["probe-ca-leads-de", "per setting"] == "a: met; b: not met"
    assert table.loc["probe-ca-trained", "per setting"] == "a: met; b: not met"
    assert table.loc["probe-de-moved", "per setting"] == "a: not met; b: met"
    assert list(notebook_preconditions("testbed").columns) == ["precondition", "what it says"]
