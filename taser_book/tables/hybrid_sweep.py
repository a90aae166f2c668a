"""The hybrid weight of TASER Eq. 6 swept for several dense models and seeds (TASER Appendix D): the dev curve of
each (model, seed), and each model's alpha chosen on its curve averaged over seeds.

    >>> dev = {("taser", 13): [(squad_dev, {"dense": run, "bm25": bm25_run})], ("taser", 14): [...], ...}
    >>> sweep = alpha_sweep(dev)          # model, seed, alpha, metric, value (percent); alpha 0.0 = dense alone
    >>> best_alphas(sweep)                # {"taser": 1.1, ...}: argmax of the seed-mean curve over [0.5, 2.0]
    >>> fused_runs(test_runs, bm25_test, best_alphas(sweep))   # {("taser+bm25", 13): Run, ...} at each one's alpha

How it reads the paper. Appendix D searches alpha in [0.5, 2.0] by 0.1 on the combined dev sets (one alpha for all
datasets), for each hybrid it reports (TASER◊_BM25, TASER*_BM25); Ma et al.'s DPR_BM25 rows have their own. So every
dense model gets its own alpha here, pooled over the given dev sets like `retrieval.hybrid.choose_alpha`. A model
trained with several seeds gets one alpha for all of them, the argmax of its dev curve averaged over the seeds (the
paper trains one model; choosing per seed would fit the noise of each). Ties go to the smallest alpha, as in
`choose_alpha`. The alpha is chosen on the baselines' selection metric: R@20 by answer matching for QA sets, nDCG@10
otherwise. QA curves can hold other cut-offs beside it (`qa_ks`), for where R@20 sits at its ceiling (SQuAD-open's
small corpus): they are shown, never used to choose.

The curve also holds alpha 0.0, which is *not* Eq. 6 with alpha 0: it is the dense run's own score (the reference
the hybrid must beat). Eq. 6 at alpha 0 ranks the dense candidates the same way but fills the top K' from BM25's
list with ties, so the two could differ by tie order only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Dataset, Run
from taser_lib.retrieval.hybrid import ALPHAS, fuse
from taser_lib.evaluation.answer_recall import answer_hits, hits_at_k
from taser_book.analyses.baselines import is_qa
from taser_lib.evaluation.metrics import per_query
from .seeded import Key

DENSE_ALONE = 0.0  # the curve's alpha for the dense run by itself (module docstring)


def _per_query(dataset: Dataset, run: Run, matcher: AnswerMatcher | None, qa_ks: Sequence[int]
               ) -> dict[str, dict[str, float]]:
    """{metric: {query id: value}}: R@k for every k of `qa_ks` (QA sets, answer matching) or nDCG@10 (qrels)."""
    if matcher is not None:
        hits = answer_hits(matcher, dataset.queries, run, max(qa_ks), progress=False)
        hits = {qid: hits.get(qid, []) for qid in dataset.queries}  # a query the run lacks is a miss
        return {f"R@{k}": hits_at_k(hits, k) for k in qa_ks}
    judged = {q: d for q, d in dataset.qrels.items() if any(g > 0 for g in d.values())}
    values = per_query(run, judged, ["nDCG@10"])["nDCG@10"]
    return {"nDCG@10": {q: values.get(q, 0.0) for q in judged}}


def alpha_sweep(dev: Mapping[Key, Sequence[tuple[Dataset, Mapping[str, Run]]]], alphas: Sequence[float] = ALPHAS,
                k_prime: int = 100, qa_ks: Sequence[int] = (20,)) -> pd.DataFrame:
    """One row per (model, seed, alpha, metric): the dev metric of Eq. 6 at that alpha over the pooled queries of the
    model's dev sets, in percent, plus rows at alpha 0.0 with the dense run alone. `dev` maps (model, seed) to its
    dev sets, each (dataset, {"dense": run, "bm25": run}). Metrics: R@k for each k of `qa_ks` on QA sets (the
    selection metric R@20 among them), nDCG@10 on qrels sets; a model's dev sets must all be of one kind. The fused
    runs are those of `retrieval.hybrid.choose_alpha` (all candidates of the top K' of each retriever)."""
    rows = []
    for (model, seed), sets in dev.items():
        if not sets:
            raise ValueError(f"{model} seed {seed}: no dev sets")
        kinds = {is_qa(dataset) for dataset, _ in sets}
        if len(kinds) > 1:
            raise ValueError(f"{model} seed {seed}: QA sets and qrels sets are scored by different metrics; sweep "
                             f"them apart")
        matchers = [AnswerMatcher(dataset.corpus) if is_qa(dataset) else None for dataset, _ in sets]
        for alpha in (DENSE_ALONE, *alphas):
            pooled: dict[str, list[float]] = {}
            for (dataset, runs), matcher in zip(sets, matchers):
                run = runs["dense"] if alpha == DENSE_ALONE else fuse(runs["dense"], runs["bm25"], alpha,
                                                                      k_prime=k_prime)
                for metric, values in _per_query(dataset, run, matcher, qa_ks).items():
                    pooled.setdefault(metric, []).extend(values.values())
            rows += [{"model": model, "seed": seed, "alpha": float(alpha), "metric": metric,
                      "value": 100 * float(np.mean(values))} for metric, values in pooled.items()]
    return pd.DataFrame(rows, columns=["model", "seed", "alpha", "metric", "value"])


def seed_curves(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep averaged over seeds: model, alpha, metric, mean, std (ddof 1; NaN for one seed), seeds."""
    grouped = sweep.groupby(["model", "alpha", "metric"], sort=False, dropna=False)["value"]
    return grouped.agg(mean="mean", std="std", seeds="count").reset_index()


def best_alphas(sweep: pd.DataFrame, among: Sequence[float] = ALPHAS, metric: str | None = None
                ) -> dict[str, float]:
    """{model: the alpha of `among` with the highest seed-mean dev `metric`}; ties go to the smallest alpha.
    `metric` None: the selection metric, R@20 where the sweep has it, else nDCG@10."""
    if metric is None:
        metric = "R@20" if (sweep["metric"] == "R@20").any() else "nDCG@10"
    rows = sweep[sweep["metric"] == metric]
    curves = seed_curves(rows)
    grid = {round(float(a), 6) for a in among}
    curves = curves[curves["alpha"].round(6).isin(grid)]
    out = {}
    for model, curve in curves.groupby("model", sort=False):
        best = curve["mean"].max()
        out[str(model)] = float(curve.loc[curve["mean"] == best, "alpha"].min())
    missing = sorted(set(rows["model"].astype(str)) - set(out))
    if missing:
        raise ValueError(f"no alpha of {sorted(grid)} in the sweep of {missing}")
    return out


def fused_runs(runs: Mapping[Key, Run], sparse: Run, alphas: Mapping[str, float], k: int = 100,
               suffix: str = "+bm25") -> dict[Key, Run]:
    """Eq. 6 of every dense run of `runs` ({(model, seed): Run}) with one sparse run, each at its model's alpha:
    {(model + suffix, seed): fused run}. A model without an alpha is an error."""
    missing = sorted({model for model, _ in runs} - set(alphas))
    if missing:
        raise KeyError(f"no alpha for {missing}; alphas are given for {sorted(alphas)}")
    return {(model + suffix, seed): fuse(run, sparse, alphas[model], k=k) for (model, seed), run in runs.items()}
