"""SQuAD-open: passages, the article split, positives, and the prepared files, checked against independent
recomputations from the raw SQuAD json (str.split word counts) and hand-made examples."""

from __future__ import annotations

import json

import pytest

from taser_lib.data.formats.beir import read_prepared
from taser_lib.data.formats.squad import SquadAnswer, read_squad
from taser_lib.data.squad_open import (SPLITS, answer_window, build_squad_open, cut_words, load_squad_open,
                                       split_articles, write_squad_open)
from taser_lib.data.training_examples import read_dpr_retriever_json


@pytest.fixture(scope="module")
def squad_path(shared_data):
    return shared_data / "squad-v1.1" / "dev-v1.1.json.zip"


@pytest.fixture(scope="module")
def built(squad_path):
    return build_squad_open(squad_path, seed=0)


def test_cut_words_by_hand():
    context = " ".join(f"w{i}" for i in range(250))
    windows = cut_words(context, 100)
    assert [len(w.text.split()) for w in windows] == [100, 100, 50]
    assert windows[1].text.split()[0] == "w100" and context[windows[1].start:windows[1].end] == windows[1].text
    messy = "a  b\n\nc d"
    assert [w.text for w in cut_words(messy, 3)] == ["a b c", "d"]


def test_answer_window_by_hand():
    windows = cut_words("aa bb cc dd ee ff", 3)  # windows "aa bb cc" (chars 0-8), "dd ee ff" (9-17)
    assert answer_window(SquadAnswer("bb", 3), windows) == 0
    assert answer_window(SquadAnswer("ee ff", 12), windows) == 1
    assert answer_window(SquadAnswer("cc dd", 6), windows) is None  # straddles: neither window holds it
    assert answer_window(SquadAnswer(" dd", 8), windows) == 1  # the span's whitespace is trimmed first
    assert answer_window(SquadAnswer("b", 4), windows) == 0  # mid-word spans stay in their word's window


def test_split_articles_by_hand():
    titles = [f"t{i}" for i in range(10)]
    split = split_articles(titles, seed=3)
    assert [len(split[s]) for s in SPLITS] == [6, 2, 2]
    assert sorted(sum(split.values(), [])) == sorted(titles)
    assert split == split_articles(list(reversed(titles)), seed=3)  # input order does not matter
    with pytest.raises(ValueError):
        split_articles(["a", "a", "b"])


def test_corpus_is_the_paragraphs_cut_in_100_words(built, squad_path):
    articles = read_squad(squad_path)
    expected = sum(-(-len(p.context.split()) // 100) for a in articles for p in a.paragraphs)
    assert len(built.corpus) == expected
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article.paragraphs):
            pieces, k = [], 0
            while f"squad-open:{i}:{j}:{k}" in built.corpus:
                doc = built.corpus[f"squad-open:{i}:{j}:{k}"]
                assert doc.title == article.title.replace("_", " ") and len(doc.text.split()) <= 100
                pieces.append(doc.text)
                k += 1
            assert " ".join(pieces) == " ".join(paragraph.context.split())


def test_split_by_article(built, squad_path):
    articles = read_squad(squad_path)
    assignment = built.meta["articles"]
    assert [len(assignment[s]) for s in SPLITS] == [28, 10, 10]  # 48 articles: 20% (9.6 -> 10) dev and test
    assert sorted(sum(assignment.values(), [])) == sorted(a.title for a in articles)
    assert sum(len(built.splits[s]) for s in SPLITS) == 10570
    for split in SPLITS:
        for q in built.splits[split].values():
            assert q.meta["title"] in assignment[split]
    assert set().union(*built.splits.values()) == set(built.positives)


def test_positives_contain_the_answer(built, squad_path):
    articles = read_squad(squad_path)
    straddle_only = 0
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article.paragraphs):
            ctx = paragraph.context
            for q in paragraph.questions:
                expected = set()
                for a in q.answers:  # word positions by str.split, independently of the builder's regex
                    text = a.text.strip()
                    start = a.start + a.text.index(text)
                    first = len(ctx[:start + 1].split()) - 1
                    last = len(ctx[:start + len(text)].split()) - 1
                    if first // 100 == last // 100:
                        expected.add(f"squad-open:{i}:{j}:{first // 100}")
                assert set(built.positives[q.id]) == expected
                straddle_only += not expected
                for pid in built.positives[q.id]:
                    assert any(" ".join(a.text.split()) in built.corpus[pid].text for a in q.answers)
    with_positive = sum(built.meta["counts"]["questions_with_positive"].values())
    assert with_positive == 10570 - straddle_only


def test_deterministic(built, squad_path):
    again = build_squad_open(squad_path, seed=0)
    assert again.meta == built.meta and again.positives == built.positives and again.corpus == built.corpus
    assert build_squad_open(squad_path, seed=1).meta["articles"] != built.meta["articles"]


def test_write_and_load(built, tmp_path):
    out = tmp_path / "squad-open"
    some_q = next(iter(built.splits["train"]))
    negative = next(pid for pid in built.corpus if pid not in built.positives[some_q])
    write_squad_open(built, out, hard_negatives={some_q: [negative]}, negatives_meta={"method": "by hand"})
    loaded = load_squad_open(out)
    assert loaded.corpus == built.corpus and loaded.splits == built.splits
    assert loaded.positives == built.positives and loaded.meta == built.meta
    assert json.loads((out / "split.json").read_text())["articles"] == built.meta["articles"]
    assert json.loads((out / "meta.json").read_text())["hard_negatives"] == {"method": "by hand"}
    test = read_prepared(out / "test")  # the folder `taser search` reads
    assert test.queries == built.splits["test"] and test.qrels == built.qrels("test")
    examples = read_dpr_retriever_json(out / "dpr" / "train.json")
    assert len(examples) == built.meta["counts"]["questions_with_positive"]["train"]
    first = next(e for e in examples if e.query.id == some_q)
    assert [d.id for d in first.positives] == built.positives[some_q]
    assert [d.id for d in first.hard_negatives] == [negative] and first.query.answers == built.splits["train"][
        some_q].answers
    with pytest.raises(ValueError, match="not in the corpus"):
        write_squad_open(built, tmp_path / "bad", hard_negatives={some_q: ["nope"]})
