"""SQuAD v1.1 json (Rajpurkar et al., 2016), plain or zipped (one .json member).

{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers": [{"text",
"answer_start"}]}]}]}]}. Every answer span is checked: context[answer_start:answer_start+len(text)] must equal text.
The official file is a single line, so errors name the record by its JSON path (data[i].paragraphs[j]...) in the
field position instead of a line number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import FormatError
from ..types import Corpus, Dataset, Document, Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, StrictJson, display_name, read_text
from ..text import zip_names


@dataclass(frozen=True)
class SquadAnswer:
    text: str
    start: int  # character offset in the paragraph's context

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass(frozen=True)
class SquadQuestion:
    id: str
    question: str
    answers: tuple[SquadAnswer, ...]


@dataclass(frozen=True)
class SquadParagraph:
    context: str
    questions: tuple[SquadQuestion, ...]


@dataclass(frozen=True)
class SquadArticle:
    title: str  # as in the file, with underscores ("Super_Bowl_50")
    paragraphs: tuple[SquadParagraph, ...]

    @property
    def display_title(self) -> str:
        """The Wikipedia title as DPR's passages carry it: underscores become spaces."""
        return self.title.replace("_", " ")


def _read_json(path: Path) -> tuple[str, Any]:
    member = None
    if path.suffix == ".zip":
        members = [n for n in zip_names(path) if n.endswith(".json")]
        if len(members) != 1:
            raise FormatError(path, None, None, f"expected one .json member, found {members}")
        member = members[0]
    where = display_name(path, member)
    return where, StrictJson().loads(read_text(path, member), where, None)


def _expect(value: Any, kind: type, where: str, field_name: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError(where, None, field_name, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _question(qa: Any, context: str, where: str, at: str) -> SquadQuestion:
    qa = _expect(qa, dict, where, at)
    qid = _expect(qa.get("id"), str, where, f"{at}.id")
    if not qid.strip():
        raise FormatError(where, None, f"{at}.id", "empty question id")
    question = _expect(qa.get("question"), str, where, f"{at}.question")
    if not question.strip():
        raise FormatError(where, None, f"{at}.question", f"question {qid!r} is empty")
    answers = []
    for k, answer in enumerate(_expect(qa.get("answers"), list, where, f"{at}.answers")):
        a_at = f"{at}.answers[{k}]"
        answer = _expect(answer, dict, where, a_at)
        text = _expect(answer.get("text"), str, where, f"{a_at}.text")
        start = _expect(answer.get("answer_start"), int, where, f"{a_at}.answer_start")
        if not text.strip() or start < 0 or context[start:start + len(text)] != text:
            raise FormatError(where, None, f"{a_at}.answer_start",
                              f"question {qid!r}: context[{start}:{start + len(text)}] is not the answer {text!r}")
        answers.append(SquadAnswer(text, start))
    if not answers:
        raise FormatError(where, None, f"{at}.answers", f"question {qid!r} has no answer")
    return SquadQuestion(qid, question.strip(), tuple(answers))


def read_squad(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> list[SquadArticle]:
    """Articles in file order. A question with a bad field is an error (or, with skip_bad, skipped and counted)."""
    on_bad = OnBad(skip_bad, report)
    where, root = _read_json(Path(path))
    data = _expect(_expect(root, dict, where, "(top level)").get("data"), list, where, "data")
    articles, seen = [], set()
    for i, article in enumerate(data):
        article = _expect(article, dict, where, f"data[{i}]")
        title = _expect(article.get("title"), str, where, f"data[{i}].title")
        paragraphs = []
        for j, paragraph in enumerate(_expect(article.get("paragraphs"), list, where, f"data[{i}].paragraphs")):
            at = f"data[{i}].paragraphs[{j}]"
            paragraph = _expect(paragraph, dict, where, at)
            context = _expect(paragraph.get("context"), str, where, f"{at}.context")
            questions = []
            for k, qa in enumerate(_expect(paragraph.get("qas"), list, where, f"{at}.qas")):
                try:
                    question = _question(qa, context, where, f"{at}.qas[{k}]")
                    if question.id in seen:
                        raise FormatError(where, None, f"{at}.qas[{k}].id", f"duplicate question id {question.id!r}")
                except FormatError as err:
                    on_bad(err)
                    continue
                seen.add(question.id)
                questions.append(question)
            paragraphs.append(SquadParagraph(context, tuple(questions)))
        articles.append(SquadArticle(title, tuple(paragraphs)))
    return articles


def _unique(texts) -> tuple[str, ...]:
    return tuple(dict.fromkeys(texts))


def squad_queries(articles: list[SquadArticle]) -> Queries:
    """Questions with their distinct answer strings; meta: article title, paragraph position, answer offsets."""
    queries: Queries = {}
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article.paragraphs):
            for q in paragraph.questions:
                queries[q.id] = Query(q.id, q.question, _unique(a.text for a in q.answers),
                                      meta={"title": article.title, "article": i, "paragraph": j})
    return queries


def load_squad(path: PathLike, split: str = "dev", *, skip_bad: bool = False,
               report: SkipReport | None = None) -> Dataset:
    """SQuAD as a paragraph-retrieval set: documents = paragraphs (id "<article>:<paragraph>"), one relevant
    paragraph per question. (The open-domain benchmark with 100-word passages is `taser_lib.data.squad_open`.)"""
    articles = read_squad(path, skip_bad=skip_bad, report=report)
    corpus: Corpus = {}
    qrels: Qrels = {}
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article.paragraphs):
            doc_id = f"{i}:{j}"
            corpus[doc_id] = Document(doc_id, paragraph.context, article.display_title)
            for q in paragraph.questions:
                qrels[q.id] = {doc_id: 1}
    return Dataset("squad-v1.1", split, corpus, squad_queries(articles), qrels)
