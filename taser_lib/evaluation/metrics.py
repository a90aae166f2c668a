"""Ranking metrics for qrels datasets via ir-measures: any measure string it parses ("nDCG@10", "RR@10" or its
alias "MRR@10", "R@100", "AP", ...). Aggregates are over every query in the qrels; ir-measures scores a judged
query that the run does not contain as 0 (like `trec_eval -c`), and ignores run queries without judgements."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ir_measures

from ..data.types import Qrels, Run

MEASURES: tuple[str, ...] = ("nDCG@10", "RR@10", "R@100")


def _parse(measures: Sequence[str]) -> dict[str, ir_measures.Measure]:
    if isinstance(measures, str):
        raise TypeError("measures must be a sequence of measure strings, e.g. ['nDCG@10']")
    parsed = {}
    for name in measures:
        try:
            parsed[name] = ir_measures.parse_measure(name)
        except (ValueError, NameError, SyntaxError) as err:
            raise ValueError(f"ir-measures cannot parse measure {name!r}: {err}") from None
    if len(set(parsed.values())) < len(parsed):
        raise ValueError(f"measures {list(measures)} name the same measure twice")
    return parsed


def evaluate(run: Run, qrels: Qrels, measures: Sequence[str] = MEASURES) -> dict[str, float]:
    """{measure string as given: aggregate value}."""
    parsed = _parse(measures)
    values = ir_measures.calc_aggregate(list(parsed.values()), qrels, run)
    return {name: float(values[m]) for name, m in parsed.items()}


def per_query(run: Run, qrels: Qrels, measures: Sequence[str] = MEASURES) -> dict[str, dict[str, float]]:
    """{measure string: {query id: value}} for significance tests and plots."""
    parsed = _parse(measures)
    names = {m: name for name, m in parsed.items()}
    out: dict[str, dict[str, float]] = {name: {} for name in parsed}
    for metric in ir_measures.iter_calc(list(parsed.values()), qrels, run):
        out[names[metric.measure]][metric.query_id] = float(metric.value)
    return out


def qrels_scorer(qrels: Qrels, measure: str) -> Callable[[Run], dict[str, float]]:
    """Run -> per-query values of one measure, e.g. the `score` of a `retrieval.hybrid.DevSet`."""
    return lambda run: per_query(run, qrels, [measure])[measure]
