"""The recall cutoff that stands for the paper's R@20 over 21M passages on a smaller corpus, and claims decided on it."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taser_book.tables.cutoffs import (DPR_WIKI_PASSAGES, MATCHED_COLUMN, cutoff_table, mark_matched_cutoff,
                                          matched_cutoff)
from taser_book.scorecard import HOLDS, evaluate_claim

from test_scorecard import make_repo, publish  # noqa: E402  (the scorecard tests' helpers)

KS = [1, 5, 20, 100]


def test_squad_open_is_decided_at_r1_and_dpr_wiki_at_r20():
    assert matched_cutoff(3526, KS) == 1            # 20 of 21M is one in a million; 1 of 3,526 is the nearest share
    assert matched_cutoff(DPR_WIKI_PASSAGES, KS) == 20
    assert matched_cutoff(DPR_WIKI_PASSAGES * 5, KS) == 100   # a corpus five times larger: R@100 covers the same share
    assert matched_cutoff(3526, [20, 100]) == 20    # only what the table reports can be chosen


@given(n=st.integers(1, 10**9), ks=st.lists(st.integers(1, 1000), min_size=1, max_size=6, unique=True))
def test_the_choice_is_the_nearest_share_on_a_log_scale(n, ks):
    chosen = matched_cutoff(n, ks)
    target = math.log(20 / DPR_WIKI_PASSAGES)
    distance = {k: abs(math.log(k / n) - target) for k in ks}
    assert chosen in ks and distance[chosen] == min(distance.values())


def test_bad_sizes_and_empty_cutoffs_are_errors():
    with pytest.raises(ValueError, match="n_passages"):
        matched_cutoff(0, KS)
    with pytest.raises(ValueError, match="cutoffs"):
        matched_cutoff(100, [])


def test_rows_of_the_matched_cutoff_are_flagged_per_dataset():
    rows = pd.DataFrame({"dataset": ["small"] * 4 + ["wiki"] * 4, "metric": [f"R@{k}" for k in KS] * 2,
                         "value": range(8)})
    marked = mark_matched_cutoff(rows, {"small": 3526, "wiki": DPR_WIKI_PASSAGES}, KS)
    assert marked.loc[marked[MATCHED_COLUMN], ["dataset", "metric"]].values.tolist() == [["small", "R@1"],
                                                                                        ["wiki", "R@20"]]
    assert list(rows.columns) == ["dataset", "metric", "value"]   # the input is left as it was
    with pytest.raises(ValueError, match="wiki"):
        mark_matched_cutoff(rows, {"small": 3526}, KS)
    # a set judged by another metric (nDCG@10 beside the QA sets): its rows decide nothing, in their own places
    mixed = mark_matched_cutoff(rows, {"small": 3526}, KS, others=False)
    assert mixed.index.equals(rows.index) and list(mixed["dataset"]) == list(rows["dataset"])
    assert mixed.loc[mixed[MATCHED_COLUMN], ["dataset", "metric"]].values.tolist() == [["small", "R@1"]]
    table = cutoff_table({"small": 3526}, KS)
    assert table.loc[0, "metric"] == "R@1" and table.loc[0, "passages"] == 3526
    assert table.loc[0, "share (per million)"] == pytest.approx(1e6 / 3526, abs=0.01)


CLAIM = """\
claims:
  - id: C-1
    paper: A
    where: Table 1
    statement: taser beats dpr at the cutoff that stands for R@20
    paper_numbers: 2 vs 1
    table: retrieval
    quantities:
      taser: {model: taser, decides: true}
      dpr: {model: dpr, decides: true}
    test: taser > dpr
    exact: the fixture's numbers
    over: dataset
"""


def test_a_claim_reads_the_flagged_rows_from_the_saved_table(tmp_path):
    root = make_repo(tmp_path, {"nb": CLAIM}, notebooks=("nb",))
    # R@20 is at its ceiling and ties; R@1, the cutoff that decides on 3,526 passages, separates the two
    rows = pd.DataFrame({"model": ["taser", "taser", "dpr", "dpr"], "dataset": ["squad-open"] * 4,
                         "metric": ["R@1", "R@20", "R@1", "R@20"], "value": [64.0, 95.0, 60.0, 95.0]})
    publish(root, "cpu", "nb", "retrieval", mark_matched_cutoff(rows, {"squad-open": 3526}, KS))
    from taser_book.claims import load_claims
    claim = load_claims(root / "notebooks" / "claims")[0]
    verdict = evaluate_claim(claim, root / "results" / "cpu", root=root)
    assert verdict.status == HOLDS and "taser=64, dpr=60" in verdict.ours
