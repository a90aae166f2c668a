"""TASER Eq. 6 hybrid with Ma et al. (2021) filling and normalisation, worked by hand; alpha selection."""

from __future__ import annotations

import pytest

from taser_lib.retrieval.hybrid import ALPHAS, DevSet, choose_alpha, fuse, fuse_query
from taser_lib.retrieval.runs import ranked

DENSE = {"a": 0.9, "b": 0.7, "c": 0.5}
SPARSE = {"b": 12.0, "d": 10.0, "e": 4.0}
# By hand. Dense: min .5, max .9, midpoint .7, range .4 -> a .5, b 0, c -.5; d, e missing -> min .5 -> -.5.
# BM25: min 4, max 12, midpoint 8, range 8 -> b .5, d .25, e -.5; a, c missing -> min 4 -> -.5.


def test_normalised_fusion_by_hand():
    assert fuse_query(DENSE, SPARSE, alpha=1.0) == pytest.approx(
        {"a": 0.5 - 0.5, "b": 0.0 + 0.5, "c": -0.5 - 0.5, "d": -0.5 + 0.25, "e": -0.5 - 0.5})
    assert fuse_query(DENSE, SPARSE, alpha=2.0) == pytest.approx(
        {"a": 0.5 - 1.0, "b": 0.0 + 1.0, "c": -0.5 - 1.0, "d": -0.5 + 0.5, "e": -0.5 - 1.0})
    run = fuse({"q": DENSE}, {"q": SPARSE}, alpha=1.0)
    assert [d for d, _ in ranked(run["q"])] == ["b", "a", "d", "c", "e"]  # c, e tie: doc id order


def test_unnormalised_fusion_fills_minimum_raw_score():
    # Missing dense -> .5, missing BM25 -> 4: a .9 + .1*4, b .7 + .1*12, c .5 + .1*4, d .5 + .1*10, e .5 + .1*4.
    assert fuse_query(DENSE, SPARSE, alpha=0.1, normalise=False) == pytest.approx(
        {"a": 1.3, "b": 1.9, "c": 0.9, "d": 1.5, "e": 0.9})


def test_only_top_k_prime_of_each_retriever_are_candidates():
    # Top 2: dense {a, b} (min .7, max .9), BM25 {b, d} (min 10, max 12); c, e are not candidates.
    # a: .5 + (10 -> -.5) = 0;  b: -.5 + .5 = 0;  d: (.7 -> -.5) + -.5 = -1.
    fused = fuse_query(DENSE, SPARSE, alpha=1.0, k_prime=2)
    assert fused == pytest.approx({"a": 0.0, "b": 0.0, "d": -1.0})
    top2 = fuse({"q": DENSE}, {"q": SPARSE}, alpha=1.0, k=2, k_prime=2)["q"]
    assert top2.keys() == {"a", "b"} and top2 == pytest.approx({"a": 0.0, "b": 0.0})


def test_degenerate_lists_keep_the_other_retrievers_order():
    # BM25 found nothing for q1 (no indexed term) and q2 is absent from the BM25 run: dense order stands.
    run = fuse({"q1": DENSE, "q2": DENSE}, {"q1": {}}, alpha=1.5)
    for qid in ("q1", "q2"):
        assert [d for d, _ in ranked(run[qid])] == ["a", "b", "c"]
    # All-equal dense scores normalise to 0: BM25 alone orders the candidates.
    flat = fuse_query({"x": 1.0, "y": 1.0}, {"y": 3.0, "x": 1.0}, alpha=1.0)
    assert flat == pytest.approx({"x": -0.5, "y": 0.5})


def test_alpha_grid_is_tasers():
    assert ALPHAS == (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0)


def _top_is(gold: dict[str, str]):
    return lambda run: {q: float(ranked(scores, 1)[0][0] == gold[q]) for q, scores in run.items()}


def test_choose_alpha_pools_dev_sets():
    # Each query: dense prefers one passage, BM25 the other; normalised, x = .5 - .5 alpha, y = -.5 + .5 alpha,
    # so BM25's favourite wins only for alpha > 1 (at 1 they tie and doc id order decides).
    pair = ({"x": 1.0, "y": 0.0}, {"y": 10.0, "x": 0.0})
    wants_bm25 = DevSet({"q1": pair[0]}, {"q1": pair[1]}, _top_is({"q1": "y"}))
    wants_dense = DevSet({"q1": pair[0], "q2": pair[0]}, {"q1": pair[1], "q2": pair[1]},
                         _top_is({"q1": "x", "q2": "x"}))
    alone = choose_alpha([wants_bm25])
    assert alone.alpha == 1.1  # the smallest alpha above 1
    assert alone.scores[1.0] == 0.0 and alone.scores[2.0] == 1.0
    # Combined dev set: 2 of 3 queries want the dense order, so one alpha < 1 serves both (ties -> smallest).
    pooled = choose_alpha([wants_bm25, wants_dense])
    assert pooled.alpha == 0.5
    assert pooled.scores[0.5] == pytest.approx(2 / 3) and pooled.scores[2.0] == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        choose_alpha([])
