"""taser_book.analyses.scores: the score frame of a re-ranking set, centring, normalised margins and the summary
statistics of "In defense of dual-encoders" §3.3 (Figs. 2, 6, 8)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taser_lib.data.types import Document, Query
from taser_lib.evaluation import rerank_per_query
from taser_book.analyses.scores import (STATISTICS, baseline_shift, centre_scores, normalised_margins, score_frame,
                                        score_frames, score_range, score_statistics, score_summary)
from taser_lib.training.reranking import RerankingSet


def reranking_set(n_queries=4, k=5, positives=((0,), (1, 3), (4,), ()), seed=0) -> RerankingSet:
    """Queries q0.. with k candidates each; query i's positives at the given positions (the last has none)."""
    corpus = {f"d{i}": Document(f"d{i}", f"passage {i}") for i in range(n_queries * k)}
    queries = {f"q{i}": Query(f"q{i}", f"question {i}") for i in range(n_queries)}
    rng = np.random.default_rng(seed)
    candidates, labels = {}, {}
    for i in range(n_queries):
        docs = [f"d{j}" for j in rng.permutation(len(corpus))[:k]]
        candidates[f"q{i}"] = docs
        labels[f"q{i}"] = [int(j in positives[i]) for j in range(k)]
    return RerankingSet(queries, corpus, candidates, labels, "toy", "test")


def random_scores(rset, seed=0, scale=1.0, shift=0.0):
    rng = np.random.default_rng(seed)
    return {q: rng.normal(size=len(docs)) * scale + shift for q, docs in rset.candidates.items()}


# --- the frame -------------------------------------------------------------------------------------------------------

def test_frame_labels_candidates_by_the_qrels_and_keeps_queries_with_a_positive():
    rset = reranking_set()
    scores = random_scores(rset)
    frame = score_frame(rset, scores, "CA")
    assert list(frame.columns) == ["model", "query_id", "doc_id", "label", "score"]
    assert list(dict.fromkeys(frame["query_id"])) == ["q0", "q1", "q2"]       # q3 has no positive
    for qid in ("q0", "q1", "q2"):
        mine = frame[frame["query_id"] == qid]
        assert list(mine["doc_id"]) == rset.candidates[qid]
        assert list(mine["label"] == "pos") == [y > 0 for y in rset.labels[qid]]
        assert np.array_equal(mine["score"].to_numpy(), scores[qid])
    assert set(frame["model"]) == {"CA"}


def test_a_run_gives_the_same_frame_as_aligned_arrays():
    rset = reranking_set()
    scores = random_scores(rset)
    run = {q: dict(zip(rset.candidates[q], map(float, s))) for q, s in scores.items()}
    pd.testing.assert_frame_equal(score_frame(rset, scores, "DE"), score_frame(rset, run, "DE"))


@pytest.mark.parametrize("broken, message", [
    (lambda s: {q: v for q, v in s.items() if q != "q1"}, "no scores for 1 queries"),
    (lambda s: {**s, "q2": s["q2"][:-1]}, "query 'q2': 4 scores for 5 candidates"),
    (lambda s: {**s, "q0": np.array([np.nan, 0, 0, 0, 0])}, "query 'q0': non-finite"),
])
def test_bad_scores_are_refused_naming_the_query(broken, message):
    rset = reranking_set()
    with pytest.raises(ValueError, match=message):
        score_frame(rset, broken(random_scores(rset)), "CA")


# --- centring and range -----------------------------------------------------------------------------------------------

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), shift=finite, scale=st.floats(0.01, 100))
def test_centring_gives_each_model_mean_zero_and_keeps_every_difference(seed, shift, scale):
    rset = reranking_set(seed=seed % 7)
    frame = score_frames(rset, {"CA": random_scores(rset, seed), "DE": random_scores(rset, seed + 1, scale, shift)})
    centred = centre_scores(frame)
    for model, part in centred.groupby("model"):
        assert abs(part["score"].mean()) < 1e-9 * max(1.0, abs(shift))
        raw = frame.loc[part.index, "score"]
        offsets = raw - part["score"]
        assert np.allclose(offsets, offsets.iloc[0])                   # one constant per model
        assert np.isclose(offsets.iloc[0], raw.mean())
    assert np.allclose(score_range(centred), score_range(frame))


# --- margins ----------------------------------------------------------------------------------------------------------

def test_margins_on_a_hand_computed_example():
    rset = reranking_set(n_queries=2, k=3, positives=((0,), (0, 1)))
    scores = {"q0": np.array([3.0, 1.0, 2.0]), "q1": np.array([0.0, -1.0, 1.0])}
    frame = score_frame(rset, scores, "CA")
    rho = 3.0 - (-1.0)
    m = normalised_margins(frame)
    assert sorted(m["margin"]) == sorted([3 - 1, 3 - 2, 0 - 1, -1 - 1])
    assert np.allclose(m["rho"], rho) and np.allclose(m["normalised_margin"], m["margin"] / rho)
    hard = normalised_margins(frame, pairs="hardest")
    assert sorted(hard["margin"]) == sorted([3 - 2, 0 - 1, -1 - 1])
    per_query = normalised_margins(frame, scale="query")
    assert np.allclose(per_query.loc[per_query["query_id"] == "q0", "rho"], 2.0)
    assert np.allclose(per_query.loc[per_query["query_id"] == "q1", "rho"], 2.0)


def test_all_pairs_are_every_positive_with_every_negative_of_its_query():
    rset = reranking_set()
    frame = score_frame(rset, random_scores(rset), "CA")
    m = normalised_margins(frame)
    expected = sum(sum(y) * (len(y) - sum(y)) for q, y in rset.labels.items() if sum(y))
    assert len(m) == expected
    assert not m.duplicated(["query_id", "pos_id", "neg_id"]).any()
    assert m["normalised_margin"].between(-1, 1).all()
    hard = normalised_margins(frame, pairs="hardest")
    assert len(hard) == sum(sum(y) for y in rset.labels.values())
    worst = m.groupby(["query_id", "pos_id"])["margin"].min()          # the hardest negative's margin
    assert np.allclose(hard.set_index(["query_id", "pos_id"])["margin"].loc[worst.index], worst)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), a=st.floats(0.01, 100), b=finite, pairs=st.sampled_from(["all", "hardest"]))
def test_normalised_margins_are_invariant_to_a_models_affine_rescaling(seed, a, b, pairs):
    rset = reranking_set(seed=seed % 5)
    scores = random_scores(rset, seed)
    frame = score_frames(rset, {"CA": scores, "DE": {q: a * s + b for q, s in scores.items()}})
    m = normalised_margins(frame, pairs=pairs)
    ca = m[m["model"] == "CA"]["normalised_margin"].to_numpy()
    de = m[m["model"] == "DE"]["normalised_margin"].to_numpy()
    assert np.allclose(ca, de, atol=1e-9)
    assert np.allclose(m[m["model"] == "DE"]["margin"].to_numpy(), a * m[m["model"] == "CA"]["margin"].to_numpy(),
                       rtol=1e-6, atol=1e-6 * a)


def test_per_query_scale_removes_per_query_affine_changes_and_the_global_scale_does_not():
    rset = reranking_set()
    scores = random_scores(rset)
    rng = np.random.default_rng(5)
    warped = {q: rng.uniform(0.5, 5) * s + rng.normal() * 10 for q, s in scores.items()}
    frame = score_frames(rset, {"A": scores, "B": warped})
    local = normalised_margins(frame, scale="query")
    assert np.allclose(local[local["model"] == "A"]["normalised_margin"].to_numpy(),
                       local[local["model"] == "B"]["normalised_margin"].to_numpy())
    glob = normalised_margins(frame)
    assert not np.allclose(glob[glob["model"] == "A"]["normalised_margin"].to_numpy(),
                           glob[glob["model"] == "B"]["normalised_margin"].to_numpy())


def test_trimmed_range_ignores_one_outlier():
    rset = reranking_set()
    scores = random_scores(rset)
    frame = score_frame(rset, scores, "CA")
    outlier = frame.copy()
    outlier.loc[outlier.index[1], "score"] = 1e6
    assert score_range(outlier)["CA"] > 1e5
    assert score_range(outlier, trim=0.1)["CA"] < 10


def test_the_fraction_of_queries_with_a_positive_hardest_margin_is_their_share_ranked_first():
    """Cross-check with ir-measures: one positive per query, so it is ranked first iff it beats the hardest
    negative, i.e. iff its RR@10 is 1."""
    rset = reranking_set(n_queries=3, k=6, positives=((0,), (2,), (5,)))
    for seed in range(5):
        scores = random_scores(rset, seed)
        margins = normalised_margins(score_frame(rset, scores, "DE"), pairs="hardest")
        first = np.mean([v == 1.0 for v in rerank_per_query(rset, scores, ["RR@10"])["RR@10"].values()])
        assert (margins["margin"] > 0).mean() == pytest.approx(first)


# --- summary statistics -----------------------------------------------------------------------------------------------

def brute_overlap(pos, neg):
    return np.mean([1.0 if n > p else 0.5 if n == p else 0.0 for p, n in itertools.product(pos, neg)])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), ties=st.booleans())
def test_overlap_is_the_probability_that_a_random_negative_outscores_a_random_positive(seed, ties):
    rset = reranking_set(seed=seed % 5)
    scores = random_scores(rset, seed)
    if ties:
        scores = {q: np.round(s) for q, s in scores.items()}
    frame = score_frame(rset, scores, "CA")
    pos = frame.loc[frame["label"] == "pos", "score"].to_numpy()
    neg = frame.loc[frame["label"] == "neg", "score"].to_numpy()
    row = score_summary(frame).iloc[0]
    assert row["overlap"] == pytest.approx(brute_overlap(pos, neg))
    within = [brute_overlap(g.loc[g["label"] == "pos", "score"], g.loc[g["label"] == "neg", "score"])
              for _, g in frame.groupby("query_id")]
    assert row["overlap_within"] == pytest.approx(np.mean(within))
    # invariant to any increasing transform
    squashed = frame.assign(score=np.tanh(frame["score"] / 3))
    assert score_summary(squashed).iloc[0]["overlap"] == pytest.approx(row["overlap"])


def synthetic(collapsed: bool, n=60, k=10, seed=0) -> pd.DataFrame:
    """One positive and k-1 negatives per query: a CA-like model collapses its negatives into a narrow peak, a
    DE-like one spreads them (same positives, same mean gap)."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n):
        rows.append({"query_id": f"q{q}", "doc_id": "p", "label": "pos", "score": 4 + rng.normal()})
        for j in range(k - 1):
            rows.append({"query_id": f"q{q}", "doc_id": f"n{j}", "label": "neg",
                         "score": rng.normal() * (0.2 if collapsed else 2.0)})
    return pd.DataFrame(rows).assign(model="CA" if collapsed else "DE")


def test_a_model_that_collapses_its_negatives_has_less_spread_less_overlap_and_larger_margins():
    frame = pd.concat([synthetic(True), synthetic(False)], ignore_index=True)
    summary = score_summary(frame).set_index("model")
    assert list(summary.columns) == list(STATISTICS)
    ca, de = summary.loc["CA"], summary.loc["DE"]
    assert ca["negative_spread"] < de["negative_spread"]
    assert ca["negative_iqr"] < de["negative_iqr"]
    assert ca["negative_spread_within"] < de["negative_spread_within"]
    assert ca["overlap"] < de["overlap"] and ca["overlap_coefficient"] < de["overlap_coefficient"]
    assert ca["median_margin"] > de["median_margin"]
    assert ca["negative_margin_share"] <= de["negative_margin_share"]
    assert ca["queries"] == 60 and ca["positives"] == 60 and ca["negatives"] == 540


@settings(max_examples=10, deadline=None)
@given(a=st.floats(0.01, 100), b=finite)
def test_scale_free_statistics_do_not_change_under_an_affine_rescaling(a, b):
    frame = synthetic(False)
    summary = score_summary(frame).iloc[0]
    moved = score_summary(frame.assign(score=a * frame["score"] + b)).iloc[0]
    for name in ("negative_spread", "negative_iqr", "negative_spread_within", "overlap", "overlap_within",
                 "overlap_coefficient", "median_margin", "mean_margin", "negative_margin_share"):
        assert moved[name] == pytest.approx(summary[name], rel=1e-6, abs=1e-9), name
    assert moved["mean_score"] == pytest.approx(a * summary["mean_score"] + b, rel=1e-6, abs=1e-6 * (a + abs(b)))
    assert moved["score_range"] == pytest.approx(a * summary["score_range"], rel=1e-6)


def test_baseline_shift_is_the_difference_of_the_centring_offsets():
    ca = synthetic(True)
    de = synthetic(False).assign(score=lambda f: f["score"] + 700.0)
    frame = pd.concat([ca, de], ignore_index=True)
    shift = baseline_shift(frame, "DE", "CA")
    assert shift["shift"] == pytest.approx(de["score"].mean() - ca["score"].mean())
    assert shift["shift_rho"] == pytest.approx(shift["shift"] / (ca["score"].max() - ca["score"].min()))
    assert baseline_shift(frame, "CA", "CA")["shift"] == 0.0
    with pytest.raises(ValueError, match="no scores of model 'ColBERT'"):
        baseline_shift(frame, "ColBERT", "CA")


def test_statistics_table_is_long_per_model_and_split_with_the_shift_against_a_reference():
    test = pd.concat([synthetic(True), synthetic(False)]).assign(split="test")
    train = pd.concat([synthetic(True, seed=1), synthetic(False, seed=1).assign(score=lambda f: f["score"] + 50)]
                      ).assign(split="train")
    frame = pd.concat([test, train], ignore_index=True)
    table = score_statistics(frame, by=("model", "split"), reference="CA")
    assert list(table.columns) == ["model", "split", "statistic", "value"]
    assert not table.duplicated(["model", "split", "statistic"]).any()
    assert {"negative_spread", "median_margin", "mean_score", "overlap", "baseline_shift"} <= set(table["statistic"])

    def value(model, split, statistic):
        rows = table[(table["model"] == model) & (table["split"] == split) & (table["statistic"] == statistic)]
        assert len(rows) == 1
        return rows["value"].iloc[0]

    assert value("CA", "train", "baseline_shift") == 0.0
    assert value("DE", "train", "baseline_shift") == pytest.approx(
        train.loc[train["model"] == "DE", "score"].mean() - train.loc[train["model"] == "CA", "score"].mean())
    summary = score_summary(frame, by=("model", "split")).set_index(["model", "split"])
    assert value("DE", "test", "negative_spread") == summary.loc[("DE", "test"), "negative_spread"]


def test_bad_arguments_are_refused():
    frame = synthetic(True)
    with pytest.raises(ValueError, match="pairs must be one of"):
        normalised_margins(frame, pairs="every")
    with pytest.raises(ValueError, match="scale must be one of"):
        normalised_margins(frame, scale="batch")
    with pytest.raises(ValueError, match="trim must lie in"):
        score_range(frame, trim=0.5)
    with pytest.raises(KeyError, match="no column"):
        score_summary(frame, by=("model", "split"))
    with pytest.raises(ValueError, match="label must be 'pos' or 'neg'"):
        score_summary(frame.assign(label="positive"))
