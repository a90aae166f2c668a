"""DPR's has-answer rule: tricky cases decided by hand, and the fast matcher equal to a per-pair reference."""

from __future__ import annotations

import json
import random
import re
import zipfile

import pytest

from taser_book.bench.matching import reference_has_answer  # DPR's rule written out per pair, independently
from taser_lib.data.answers import AnswerMatcher, has_answer, tokenize
from taser_lib.data.types import Document, Query

# ---- tricky cases, expected values reasoned from the rule, not from the code ------------------------------------
STRING_CASES = [
    # (answer, passage text, has answer?, why)
    ("PARIS", "He moved to paris in 1920.", True, "case-insensitive"),
    ("the Beatles", "Beatles songs topped the charts.", False, "DPR does not strip articles"),
    ("Beatles", "The Beatles' songs topped the charts.", True, "apostrophe is its own token"),
    ("cat", "They had to concatenate strings.", False, "tokens, not substrings"),
    ("U.S.", "the U.S. army", True, "punctuation tokens match"),
    ("US", "the U.S. army", False, "'us' is not 'u . s .'"),
    ("U.S", "the U.S. army", True, "prefix of the token sequence"),
    ("Paris.", "in Paris, France", False, "trailing '.' must match a '.' token"),
    ("well-known", "a well known fact", False, "hyphen is a token"),
    ("well-known", "a well - known fact", True, "spacing between tokens is irrelevant"),
    ("1,000", "about 1000 people", False, "number punctuation is kept"),
    ("1,000", "about 1, 000 people", True, "'1' ',' '000' both"),
    ("3.14", "pi is 3.14159", False, "'14' is not '14159'"),
    ("1990", "in the 1990s", False, "'1990s' is one token"),
    ("Café", "the cafe\u0301 opened", True, "precomposed vs decomposed accent: NFD makes them equal"),
    ("Cafe\u0301", "the caf\u00e9 opened", True, "decomposed answer, precomposed passage"),
    ("Café", "the cafe opened", False, "the accent is kept (a combining mark inside the token)"),
    ("naïve", "NAÏVE approach", True, "case-folding with an accent"),
    ("ΟΔΟΣ", "η οδος", True, "Greek final sigma lowercases per token"),
    ("New\nYork", "lived in new   york city", True, "whitespace in the answer is a separator"),
    ("ﬁsh", "a fish", False, "NFD is not NFKD: the ligature stays"),
    ("C++", "written in C ++ mostly", True, "'+' tokens"),
    ("Smith", "Dr. Smith\u00a0Jr.", True, "no-break space separates"),
    ("Smith Jr", "Dr. Smith\u00a0Jr.", True, "no-break space between answer tokens"),
]


@pytest.mark.parametrize("answer,text,expected,why", STRING_CASES)
def test_string_rule(answer, text, expected, why):
    assert has_answer([answer], text) is expected, why
    assert reference_has_answer([answer], text) is expected, why


PATTERN_CASES = [
    (r"Mount\s+Everest", "climbing MOUNT   everest", True, "IGNORECASE"),
    (r"cat", "concatenate", True, "a pattern is a substring search, unlike token matching"),
    (r"^China$", "Big\nchina\nstuff", True, "MULTILINE anchors"),
    (r"^China$", "Big china stuff", False, "anchors need line ends"),
    ("caf\u00e9", "the cafe\u0301 opened", True, "pattern and passage are both NFD-normalised"),
    (r"20\s?,?\s?(32|40)0\s?-?\s?f(ee|oo)t", "it is 20,320 feet high", True, "a CuratedTREC pattern"),
    (r"20\s?,?\s?(32|40)0\s?-?\s?f(ee|oo)t", "it is 20,300 feet high", False, "a CuratedTREC pattern"),
]


@pytest.mark.parametrize("pattern,text,expected,why", PATTERN_CASES)
def test_pattern_rule(pattern, text, expected, why):
    assert has_answer([pattern], text, patterns=True) is expected, why
    assert reference_has_answer([pattern], text, patterns=True) is expected, why


def test_any_of_several_answers():
    assert has_answer(["Lyon", "Paris"], "in Paris")
    assert not has_answer(["Lyon", "Marseille"], "in Paris")


def test_tokenize_is_dpr_simple_tokenizer():
    assert tokenize("Café-au-lait, 3.14!") == ["cafe\u0301", "-", "au", "-", "lait", ",", "3", ".", "14", "!"]


@pytest.mark.parametrize("bad", ["", "   ", "\n\t"])
def test_answer_without_tokens_is_an_error(bad):
    # DPR would match an empty token sequence in every passage.
    with pytest.raises(ValueError, match="no tokens"):
        has_answer([bad], "anything")


def test_invalid_pattern_is_an_error():
    with pytest.raises(ValueError, match="regular expression"):
        has_answer(["(unclosed"], "text", patterns=True)


def test_matcher_uses_text_not_title_and_names_bad_inputs():
    corpus = {"d1": Document("d1", "a passage about rivers", title="Paris"),
              "d2": Document("d2", "Paris is big", title="")}
    m = AnswerMatcher(corpus)
    q = Query("q1", "where?", answers=("Paris",))
    assert m.has_answer(q, "d1") is False  # DPR checks the passage text only
    assert m.has_answer(q, "d2") is True
    with pytest.raises(ValueError, match="not in the corpus"):
        m.has_answer(q, "d9")
    with pytest.raises(ValueError, match="no answers"):
        m.has_answer(Query("q2", "?"), "d1")
    with pytest.raises(ValueError, match="'q3'.*no tokens"):
        m.has_answer(Query("q3", "?", answers=("  ",)), "d1")


def test_top_k_hits_in_rank_order_and_missing_queries():
    corpus = {f"d{i}": Document(f"d{i}", text) for i, text in enumerate(["no", "Paris here", "nope", "Paris too"])}
    queries = {"q1": Query("q1", "?", ("Paris",)), "q2": Query("q2", "?", ("Lyon",))}
    m = AnswerMatcher(corpus)
    hits = m.top_k_hits(queries, {"q1": ["d0", "d1", "d2", "d3"]}, k=3, progress=False)
    assert hits == {"q1": [False, True, False], "q2": []}
    with pytest.raises(ValueError, match="not in the query set"):
        m.top_k_hits(queries, {"q9": ["d0"]}, k=3, progress=False)
    with pytest.raises(TypeError, match="ordered doc ids"):
        m.top_k_hits(queries, {"q1": {"d0": 1.0}}, k=3, progress=False)


# ---- equality with the reference on real SQuAD paragraphs and answers ------------------------------------------

@pytest.fixture(scope="module")
def squad(shared_data):
    with zipfile.ZipFile(shared_data / "squad-v1.1" / "dev-v1.1.json.zip") as z:
        data = json.loads(z.read("dev-v1.1.json"))
    corpus, queries, own = {}, {}, {}
    for a, article in enumerate(data["data"]):
        for p, para in enumerate(article["paragraphs"]):
            doc_id = f"{a}-{p}"
            corpus[doc_id] = Document(doc_id, para["context"], article["title"])
            for qa in para["qas"]:
                queries[qa["id"]] = Query(qa["id"], qa["question"], tuple(a_["text"] for a_ in qa["answers"]))
                own[qa["id"]] = doc_id
    return corpus, queries, own


def test_matches_reference_on_squad(squad):
    corpus, queries, own = squad
    rng = random.Random(0)
    doc_ids = list(corpus)
    qids = rng.sample(sorted(queries), 400)
    # Each question against its own paragraph, 9 paragraphs of the same article (often also holding the answer
    # string) and 20 random ones: both decisions occur often.
    rankings = {}
    for qid in qids:
        article = own[qid].split("-")[0]
        same = [d for d in doc_ids if d.split("-")[0] == article and d != own[qid]]
        rankings[qid] = [own[qid], *rng.sample(same, min(9, len(same))), *rng.sample(doc_ids, 20)]
    hits = AnswerMatcher(corpus).top_k_hits({q: queries[q] for q in qids}, rankings, k=30, progress=False)
    expected = {qid: [reference_has_answer(queries[qid].answers, corpus[d].text) for d in rankings[qid]]
                for qid in qids}
    assert hits == expected
    # Both outcomes are well represented beyond the own paragraph: other paragraphs do hold answer strings.
    elsewhere = [h for flags in hits.values() for h in flags[1:]]
    assert 50 < sum(elsewhere) < len(elsewhere) - 50
    # A SQuAD answer is a span of its paragraph, so nearly every own paragraph matches (not all: "1990" in "1990s").
    own_rate = sum(flags[0] for flags in hits.values()) / len(hits)
    assert own_rate > 0.95


def test_matches_reference_on_squad_with_patterns(squad):
    corpus, queries, _ = squad
    rng = random.Random(1)
    doc_ids = list(corpus)
    qids = rng.sample(sorted(queries), 100)
    # Answers as escaped regexes with a word-boundary: a realistic CuratedTREC-like use.
    pattern_queries = {q: Query(q, queries[q].text, tuple(r"\b" + re.escape(a) for a in queries[q].answers), True)
                       for q in qids}
    rankings = {q: rng.sample(doc_ids, 20) for q in qids}
    hits = AnswerMatcher(corpus).top_k_hits(pattern_queries, rankings, k=20, progress=False)
    expected = {q: [reference_has_answer(pattern_queries[q].answers, corpus[d].text, patterns=True)
                    for d in rankings[q]] for q in qids}
    assert hits == expected


def test_top_k_hits_checks_every_querys_answers():
    m = AnswerMatcher({"d0": Document("d0", "text")})
    with pytest.raises(ValueError, match="'q2' has no answers"):
        m.top_k_hits({"q1": Query("q1", "?", ("text",)), "q2": Query("q2", "?")}, {"q1": ["d0"]}, k=1,
                     progress=False)
