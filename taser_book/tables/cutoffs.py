"""The recall cutoff that stands for the paper's on a smaller corpus.

TASER reports R@20 over DPR's Wikipedia, 21,015,324 passages: the top 20 are about one passage in a million. Over
SQuAD-open's ~3,500 passages the top 20 are one in 176, and the untrained retriever already finds an answer there
for about 94% of the questions, so trained retrievers can differ on only a few percent of them. `matched_cutoff`
picks, from the cutoffs a table reports, the one whose share of the corpus is closest to the paper's on a log scale
(R@1 over 3,500 passages, R@20 over DPR's Wikipedia itself); `mark_matched_cutoff` flags its rows, so that a claim
can be decided on it while the paper's own cutoff stays in the side-by-side table.

    >>> matched_cutoff(3526, [1, 5, 20, 100])
    1
    >>> matched_cutoff(21_015_324, [1, 5, 20, 100])
    20
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

DPR_WIKI_PASSAGES = 21_015_324  # DPR's 100-word Wikipedia passages (psgs_w100.tsv), the corpus of TASER's tables
PAPER_CUTOFF = 20                # TASER's headline metric, R@20 (Table 1)
MATCHED_COLUMN = "decides"       # the flag `mark_matched_cutoff` adds


def corpus_share(cutoff: int, n_passages: int) -> float:
    """The share of a corpus of `n_passages` passages that the top `cutoff` cover."""
    if n_passages <= 0:
        raise ValueError(f"n_passages: a corpus needs at least one passage, got {n_passages}")
    return cutoff / n_passages


def matched_cutoff(n_passages: int, cutoffs: Sequence[int], *, paper_cutoff: int = PAPER_CUTOFF,
                   paper_passages: int = DPR_WIKI_PASSAGES) -> int:
    """The cutoff of `cutoffs` whose share of `n_passages` is closest, on a log scale, to `paper_cutoff` over
    `paper_passages` (ties: the smaller cutoff)."""
    if not cutoffs:
        raise ValueError("cutoffs: give at least one recall cutoff")
    target = math.log(corpus_share(paper_cutoff, paper_passages))
    return min(sorted(cutoffs), key=lambda k: abs(math.log(corpus_share(k, n_passages)) - target))


def cutoff_table(n_passages: Mapping[str, int], cutoffs: Sequence[int], *, paper_cutoff: int = PAPER_CUTOFF,
                 paper_passages: int = DPR_WIKI_PASSAGES) -> pd.DataFrame:
    """One row per dataset: its passages, the matched cutoff and the share of the corpus it covers, beside the
    paper's (`paper_cutoff` over `paper_passages`). Shares are in passages per million."""
    rows = []
    for dataset, n in n_passages.items():
        k = matched_cutoff(n, cutoffs, paper_cutoff=paper_cutoff, paper_passages=paper_passages)
        rows.append({"dataset": dataset, "passages": int(n), "metric": f"R@{k}",
                     "share (per million)": round(1e6 * corpus_share(k, n), 2),
                     f"R@{paper_cutoff} share (per million)": round(1e6 * corpus_share(paper_cutoff, n), 2),
                     "paper's share (per million)": round(1e6 * corpus_share(paper_cutoff, paper_passages), 2)})
    return pd.DataFrame(rows)


def mark_matched_cutoff(rows: pd.DataFrame, n_passages: Mapping[str, int], cutoffs: Sequence[int], *,
                        paper_cutoff: int = PAPER_CUTOFF, paper_passages: int = DPR_WIKI_PASSAGES,
                        others: bool | None = None) -> pd.DataFrame:
    """`rows` (columns dataset and metric, R@K) with a boolean column `decides`: True on the rows of each dataset's
    matched cutoff. A dataset missing from `n_passages` is an error (its rows would silently decide nothing), unless
    `others=False`: then its rows decide nothing on purpose (a set judged by another metric, e.g. nDCG@10 on the
    out-of-domain sets beside the QA sets). The rows keep their order."""
    missing = sorted(set(rows["dataset"]) - set(n_passages))
    if missing and others is not False:
        raise ValueError(f"n_passages: no corpus size for dataset(s) {', '.join(map(str, missing))}")
    chosen = {d: f"R@{matched_cutoff(n, cutoffs, paper_cutoff=paper_cutoff, paper_passages=paper_passages)}"
              for d, n in n_passages.items()}
    return rows.assign(**{MATCHED_COLUMN: rows["metric"].to_numpy() == rows["dataset"].map(chosen).to_numpy()})
