"""Where two re-rankers disagree (taser_book.analyses.disagreement): DE Table 3's pairs, Appendix C.11's queries
and Tables 10-11's top-k lists side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taser_lib.data.types import Document, Query
from taser_book.analyses.disagreement import (RELEVANT_MARK, agreement_counts, disagreeing_queries, disagreements,
                                               normalised_scores, top_k_side_by_side, with_text)
from taser_book.analyses.scores import score_frames
from taser_lib.training.reranking import RerankingSet


def toy_set():
    corpus = {f"d{i}": Document(f"d{i}", f"passage number {i} " * 3, title=f"T{i}") for i in range(6)}
    queries = {"q1": Query("q1", "first question"), "q2": Query("q2", "second question")}
    return RerankingSet(queries, corpus, {"q1": ["d0", "d1", "d2"], "q2": ["d3", "d4", "d5"]},
                        {"q1": [1, 0, 0], "q2": [0, 1, 0]}, "toy", "test")


def frames():
    rset = toy_set()
    # CA: logits; DE: cosines x 20 with a baseline shift. The DE likes d2 (a CA negative) and d5.
    ca = {"q1": np.array([8.0, -2.0, -6.0]), "q2": np.array([-4.0, 6.0, -5.0])}
    de = {"q1": np.array([15.0, 12.0, 16.0]), "q2": np.array([11.0, 14.0, 15.5])}
    return rset, ca, de, score_frames(rset, {"CA": ca, "DE": de})


def test_normalised_scores_span_zero_to_one_per_model():
    *_, frame = frames()
    norm = normalised_scores(frame)
    for model in ("CA", "DE"):
        mine = norm[frame["model"] == model]
        assert mine.min() == 0.0 and mine.max() == 1.0
    ranks = normalised_scores(frame, "percentile")
    assert ranks[frame["model"] == "CA"].max() == 1.0
    with pytest.raises(ValueError):
        normalised_scores(frame, "zscore")


def test_disagreements_put_the_pairs_the_de_likes_and_the_ca_does_not_first():
    rset, ca, de, frame = frames()
    out = disagreements(frame, low="CA", high="DE", n=5, per_query=None)
    first = out.iloc[0]
    assert (first["query_id"], first["doc_id"], first["label"]) == ("q1", "d2", "neg")
    # the discrepancy is the difference of the (0-1) columns, sorted descending
    assert np.allclose(out["discrepancy"], out["DE (0-1)"] - out["CA (0-1)"])
    assert list(out["discrepancy"]) == sorted(out["discrepancy"], reverse=True)
    assert out.loc[0, "CA score"] == -6.0 and out.loc[0, "DE score"] == 16.0
    capped = disagreements(frame, low="CA", high="DE", n=5)
    assert capped["query_id"].is_unique and len(capped) == 2
    assert set(disagreements(frame, low="CA", high="DE", n=5, label="pos", per_query=None)["label"]) == {"pos"}
    texts = with_text(capped, rset, width=20)
    assert list(texts.columns[:2]) == ["query", "passage"]
    assert texts.loc[0, "query"] == "first question" and len(texts.loc[0, "passage"]) <= 20
    assert texts.loc[0, "passage"].startswith("T2: ")


def test_disagreements_check_their_models():
    *_, frame = frames()
    with pytest.raises(KeyError, match="ColBERT"):
        disagreements(frame, low="CA", high="ColBERT")
    with pytest.raises(ValueError):
        disagreements(frame, low="CA", high="CA")
    short = frame[~((frame["model"] == "DE") & (frame["doc_id"] == "d5"))]
    with pytest.raises(ValueError, match="same"):
        disagreements(short, low="CA", high="DE")


def test_query_agreement_and_the_queries_that_favour_one_model():
    a = {"q1": 1.0, "q2": 0.5, "q3": 0.2, "q4": 0.0}
    b = {"q1": 1.0, "q2": 0.25, "q3": 0.7, "q4": 0.0, "q5": 1.0}
    assert agreement_counts(a, b) == {"queries": 4, "agree": 2, "favour a": 1, "favour b": 1}
    assert disagreeing_queries(a, b, n=3) == ["q2"]
    assert disagreeing_queries(a, b, n=3, favour="b") == ["q3"]
    assert disagreeing_queries(a, b, n=3, favour="either") == ["q3", "q2"]
    with pytest.raises(ValueError):
        agreement_counts({"x": 1.0}, {"y": 1.0})


def test_top_k_side_by_side_lists_each_models_ranking_and_marks_positives():
    rset, ca, de, _ = frames()
    table = top_k_side_by_side(rset, {"CA": ca, "DE": de}, ["q1", "q2"], k=2, width=None)
    assert list(table.columns) == ["query", "rank", "CA", "DE"]
    assert len(table) == 4 and list(table["rank"]) == [1, 2, 1, 2]
    q1 = table[table["query"] == "first question"]
    assert q1.iloc[0]["CA"].startswith(RELEVANT_MARK + "T0")        # the CA ranks the positive first
    assert q1.iloc[0]["DE"].startswith("T2")                         # the DE a negative
    assert q1.iloc[1]["DE"].startswith(RELEVANT_MARK + "T0")
    with pytest.raises(KeyError):
        top_k_side_by_side(rset, {"CA": ca}, ["q9"])
    with pytest.raises(ValueError):
        top_k_side_by_side(rset, {"CA": {"q1": [1.0]}}, ["q1"])


def test_token_overlap_counts_the_querys_content_words_found_in_the_passage():
    from taser_book.analyses.disagreement import token_overlap, tokens
    assert tokens("What is the Capital of France?") == {"capital", "france"}
    assert token_overlap("capital of France", Document("d", "Paris is the capital.", title="France")) == 1.0
    assert token_overlap("capital of Spain", "the capital of France") == 0.5
    assert np.isnan(token_overlap("what is the", "anything"))


def test_disagreement_summary_reports_share_of_negatives_and_overlaps():
    from taser_book.analyses.disagreement import SUMMARY_STATISTICS, disagreement_summary
    rset, ca, de, frame = frames()
    pairs = disagreements(frame, low="CA", high="DE", n=2)
    out = disagreement_summary(frame, pairs, rset).set_index("statistic")["value"]
    assert list(SUMMARY_STATISTICS) == list(out.index)   # the page shows each statistic in words, in this order
    assert out["pairs"] == 2 and out["negative_share"] == 1.0
    assert out["negative_base_rate"] == pytest.approx(4 / 6)       # 2 positives among the 6 candidates
    # every toy query shares no content word with its passages
    assert out["overlap_pairs"] == 0.0 and out["overlap_negatives"] == 0.0
    with pytest.raises(ValueError):
        disagreement_summary(frame, pairs.iloc[:0], rset)


def worded_set():
    """Two questions whose passages share some of their words: q1's pair d2 shares both, its other negative d1
    one of two; q2's pair d4 shares one of three, its other negatives d5 none and d3 two of three."""
    corpus = {"d0": Document("d0", "Paris is the capital of France.", title="Paris"),
              "d1": Document("d1", "A capital city.", title="Cities"),
              "d2": Document("d2", "France has a capital.", title="France"),
              "d3": Document("d3", "Tesla worked on motors.", title="Tesla"),
              "d4": Document("d4", "Nothing about him, in 1888.", title="Years"),
              "d5": Document("d5", "Unrelated words only.", title="Other"),
              "d6": Document("d6", "Tesla's 1888 motors.", title="Tesla")}
    queries = {"q1": Query("q1", "What is the capital of France?"),
               "q2": Query("q2", "What did Tesla work on in 1888?")}
    return RerankingSet(queries, corpus, {"q1": ["d0", "d1", "d2"], "q2": ["d6", "d3", "d4", "d5"]},
                        {"q1": [1, 0, 0], "q2": [1, 0, 0, 0]}, "toy", "test")


def test_disagreement_per_query_gives_one_row_per_pair_and_statistic():
    from taser_book.analyses.disagreement import disagreement_per_query, token_overlap
    rset = worded_set()
    ca = {"q1": np.array([8.0, -2.0, -6.0]), "q2": np.array([7.0, 1.0, -5.0, -4.0])}
    de = {"q1": np.array([15.0, 12.0, 16.0]), "q2": np.array([16.0, 12.0, 15.0, 10.0])}
    frame = score_frames(rset, {"CA": ca, "DE": de})
    pairs = disagreements(frame, low="CA", high="DE", n=2)
    assert sorted(zip(pairs["query_id"], pairs["doc_id"])) == [("q1", "d2"), ("q2", "d4")]
    out = disagreement_per_query(frame, pairs, rset).pivot(index="query_id", columns="statistic", values="value")
    assert list(out["negative"]) == [1.0, 1.0]
    assert out.loc["q1", "overlap_pair"] == 1.0                     # capital, france: both in d2
    assert out.loc["q1", "overlap_query_negatives"] == 0.5          # d1 (capital) alone: the pair is left out
    q2 = "What did Tesla work on in 1888?"                          # content words: tesla, work, 1888
    assert out.loc["q2", "overlap_pair"] == pytest.approx(1 / 3)
    expected = (token_overlap(q2, rset.corpus["d3"]) + token_overlap(q2, rset.corpus["d5"])) / 2
    assert out.loc["q2", "overlap_query_negatives"] == pytest.approx(expected) == pytest.approx(1 / 6)
    # a positive pair counts 0 in `negative`
    positive = disagreements(frame, low="CA", high="DE", n=1, label="pos")
    assert disagreement_per_query(frame, positive, rset).set_index("statistic").loc["negative", "value"] == 0.0


def test_disagreement_per_query_needs_one_pair_per_question():
    from taser_book.analyses.disagreement import disagreement_per_query
    rset, ca, de, frame = frames()
    several = disagreements(frame, low="CA", high="DE", n=4, per_query=2)
    with pytest.raises(ValueError, match="one pair per question"):
        disagreement_per_query(frame, several, rset)
    with pytest.raises(ValueError, match="no disagreement pairs"):
        disagreement_per_query(frame, several.iloc[:0], rset)


def test_disagreement_scatter_draws_every_pair_and_circles_the_chosen(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from taser_book.plots.disagreement import plot_disagreement_scatter
    rset, ca, de, frame = frames()
    pairs = disagreements(frame, low="CA", high="DE", n=2)
    fig = plot_disagreement_scatter(frame, "CA", "DE", pairs=pairs, title="t")
    ax = fig.axes[0]
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == 6 + len(pairs)                      # every pair, plus one circle per chosen pair
    assert [t.get_text() for t in ax.texts] == ["1", "2"]
    assert "CA" in ax.get_xlabel() and "DE" in ax.get_ylabel()
    with pytest.raises(KeyError):
        plot_disagreement_scatter(frame, "CA", "ColBERT")


def test_the_pages_summary_table_says_each_statistic_in_words():
    import pandas as pd

    from taser_book.tables.disagreement import summary_table
    from taser_book.analyses.disagreement import SUMMARY_STATISTICS

    summary = pd.DataFrame({"statistic": ["pairs", "negative_share", "other"], "value": [50.0, 0.95999, 1 / 3]})
    table = summary_table(summary)
    assert table["statistic"].tolist() == [SUMMARY_STATISTICS["pairs"], SUMMARY_STATISTICS["negative_share"], "other"]
    assert table["value"].tolist() == ["50", "0.96", "0.333"]     # a count without decimals, the rest at 3
