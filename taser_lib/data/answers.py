"""Does a passage contain a gold answer? DPR's rule (Karpukhin et al., 2020), used for top-K accuracy (TASER
Sec. 4.1), SQuAD-open positives and answer-based hard negatives.

The rule, as DPR's `has_answer` applies it to a passage's *text* (not its title):
- strings: NFD-normalise passage and answer, split both with DPR's SimpleTokenizer (runs of letters, digits and
  combining marks, or any single character that is neither a separator nor a control character), lowercase each
  token; the answer matches if its token sequence occurs contiguously in the passage's.
- patterns (CuratedTREC): NFD-normalise both and `re.search` the pattern with IGNORECASE | UNICODE | MULTILINE.

Where DPR would quietly return False we raise `ValueError`: an answer that tokenises to nothing (DPR would match it
everywhere), an invalid regular expression, a query without answers, a doc id missing from the corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

import regex
from ..progress import tqdm

from .types import Corpus, Queries, Query

# DPR's SimpleTokenizer: ALPHA_NUM = [\p{L}\p{N}\p{M}]+, NON_WS = [^\p{Z}\p{C}] (needs `regex` for \p{..}).
_TOKEN = regex.compile(r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])",
                       flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)
_PATTERN_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE
# Tokens never contain a separator (\p{Z}), so with a space around every token, "answer tokens occur contiguously
# in the passage tokens" is exactly "the space-joined answer is a substring of the space-joined passage": one C-level
# substring test per (question, passage) pair, on passage keys built once per passage.
_SEP = " "


def normalize(text: str) -> str:
    """DPR's answer normalisation: Unicode NFD."""
    return unicodedata.normalize("NFD", text)


def tokenize(text: str) -> list[str]:
    """DPR's SimpleTokenizer words of the NFD-normalised text, lowercased token by token."""
    return [m.group().lower() for m in _TOKEN.finditer(normalize(text))]


def _key(text: str) -> str:
    return _SEP + _SEP.join(tokenize(text)) + _SEP


def _answer_keys(answers: Sequence[str]) -> tuple[str, ...]:
    keys = []
    for answer in answers:
        key = _key(answer)
        if key == _SEP + _SEP:
            raise ValueError(f"answer {answer!r} has no tokens; it would match every passage")
        keys.append(key)
    return tuple(keys)


def _compile_patterns(patterns: Sequence[str]) -> tuple[re.Pattern, ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(normalize(pattern), _PATTERN_FLAGS))
        except re.error as err:
            raise ValueError(f"answer pattern {pattern!r} is not a valid regular expression: {err}") from err
    return tuple(compiled)


def has_answer(answers: Sequence[str], text: str, patterns: bool = False) -> bool:
    """One (answers, passage text) pair. For many pairs use `AnswerMatcher`, which tokenises each passage once."""
    if patterns:
        norm = normalize(text)
        return any(p.search(norm) is not None for p in _compile_patterns(answers))
    key = _key(text)
    return any(a in key for a in _answer_keys(answers))


class AnswerMatcher:
    """Answer matching over one corpus, caching each passage's token key (or NFD text) and each answer set.

    >>> m = AnswerMatcher(corpus); m.has_answer(query, "doc7"); m.top_k_hits(queries, {"q1": ["doc7", "doc2"]}, k=1)
    """

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self._keys: dict[str, str] = {}
        self._texts: dict[str, str] = {}
        self._answers: dict[tuple[tuple[str, ...], bool], tuple] = {}

    def _doc(self, doc_id: str):
        try:
            return self.corpus[doc_id]
        except KeyError:
            raise ValueError(f"document {doc_id!r} is not in the corpus") from None

    def _passage_key(self, doc_id: str) -> str:
        key = self._keys.get(doc_id)
        if key is None:
            key = self._keys[doc_id] = _key(self._doc(doc_id).text)
        return key

    def _passage_text(self, doc_id: str) -> str:
        text = self._texts.get(doc_id)
        if text is None:
            text = self._texts[doc_id] = normalize(self._doc(doc_id).text)
        return text

    def _compiled(self, query: Query) -> tuple:
        if not query.answers:
            raise ValueError(f"query {query.id!r} has no answers to match")
        cache_key = (tuple(query.answers), query.answers_are_patterns)
        compiled = self._answers.get(cache_key)
        if compiled is None:
            try:
                compiled = (_compile_patterns(query.answers) if query.answers_are_patterns
                            else _answer_keys(query.answers))
            except ValueError as err:
                raise ValueError(f"query {query.id!r}: {err}") from None
            self._answers[cache_key] = compiled
        return compiled

    def has_answer(self, query: Query, doc_id: str) -> bool:
        compiled = self._compiled(query)
        if query.answers_are_patterns:
            text = self._passage_text(doc_id)
            return any(p.search(text) is not None for p in compiled)
        key = self._passage_key(doc_id)
        return any(a in key for a in compiled)

    def prepare(self, doc_ids: Iterable[str], progress: bool = True) -> None:
        """Tokenise these passages now (with a progress bar) instead of on first use."""
        todo = [d for d in dict.fromkeys(doc_ids) if d not in self._keys]
        for doc_id in tqdm(todo, desc="tokenising passages", disable=not progress or not todo):
            self._passage_key(doc_id)

    def top_k_hits(self, queries: Queries, rankings: Mapping[str, Sequence[str]], k: int,
                   progress: bool = True) -> dict[str, list[bool]]:
        """For every query, whether each of its first k ranked passages has an answer.

        `rankings` holds doc ids best first (`taser_lib.retrieval.runs.ranked_ids` turns a Run into them; the
        evaluation layer's `answer_hits` takes a Run directly). Every query in `queries` gets a list; one absent from
        `rankings` gets an empty list (it retrieved nothing). Rankings for unknown queries are an error.
        """
        unknown = set(rankings) - set(queries)
        if unknown:
            raise ValueError(f"rankings for {len(unknown)} queries not in the query set, e.g. {sorted(unknown)[:3]}")
        tops: dict[str, Sequence[str]] = {}
        for qid, query in queries.items():
            self._compiled(query)  # every query must have valid answers, retrieved or not
            ids = rankings.get(qid, ())
            if isinstance(ids, Mapping):  # a Run's {doc: score}: its iteration order is not a ranking
                raise TypeError("rankings must be ordered doc ids, not {doc: score}; use runs.ranked_ids")
            tops[qid] = ids[:k]
        self.prepare((d for qid, ids in tops.items() if not queries[qid].answers_are_patterns for d in ids),
                     progress=progress)
        return {qid: [self.has_answer(queries[qid], d) for d in ids] for qid, ids in tops.items()}
