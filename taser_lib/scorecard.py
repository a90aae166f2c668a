"""The scorecard: every headline claim of both papers, the paper's numbers, ours, and whether the direction holds.

It reads only result tables written by `taser_lib.reproduce.save_result` under `results/<profile>/<notebook>/`.
Each claim names the notebook and table that hold its numbers, a few *quantities* (the `value` column of the one
row matching a filter), and a direction test over them (a `pandas.eval` expression such as `taser > dpr`).
With `over`, the test is applied to every value of that column present in all quantities (e.g. every dataset)
and holds only if it holds for each; `groups` restricts those values (the paper's datasets and their offline
stand-ins).

The contract for notebooks, so that their results can be scored:
- retrieval and re-ranking tables are long: columns `model`, `dataset`, `metric`, `value` (plus the keys a claim
  filters on, e.g. `split`, `size`, `k`); one row per number;
- values are on the paper's scale: TASER's R@K and nDCG@10 in percent, the second paper's MRR@10 / nDCG@10 as
  fractions, parameter counts as plain counts;
- dataset names are those of `taser data list` (`dpr-nq`, `dpr-squad1`, `beir-arguana`, ...; the offline SQuAD
  stand-in is `squad-open`); MS MARCO re-ranking is `msmarco-passage`, its full retrieval
  `msmarco-passage-retrieval`, TREC DL 2019 `trec-dl-2019`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .io import atomic_write_text
from .meta import run_metadata
from .results import META_NAME, PROFILE_ORDER, load_result

NO_RESULT = "no result yet"
PAPERS = {"TASER": "Cheng et al., TASER (2023)", "DE": "In defense of dual-encoders for neural ranking"}


class Q:
    """A quantity: the `column` value of the single row of a result table whose columns equal `where`.

    `notebook`, `table` and `column` default to the claim's."""

    def __init__(self, *, notebook: str | None = None, table: str | None = None, column: str | None = None,
                 **where: Any):
        self.notebook, self.table, self.column, self.where = notebook, table, column, where

    def __repr__(self) -> str:
        where = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
        return f"Q({where})"


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str                      # key of PAPERS
    where: str                      # table / figure / section of the paper
    statement: str
    paper_numbers: str              # the paper's numbers, as printed there
    notebook: str                   # notebook stem whose results hold ours
    table: str                      # result table name (save_result's `name`)
    quantities: Mapping[str, Q]
    test: str                       # pandas.eval expression over the quantity names
    over: str | None = None         # evaluate the test per value of this column
    groups: tuple[str, ...] | None = None  # restrict `over` to these values (None: every value present)
    column: str = "value"


_FIVE = "NQ/TQ/WQ/CT/SQuAD"
_SQUAD = ("dpr-squad1", "squad-open")
_BEIR4 = ("beir-arguana", "beir-dbpedia-entity", "beir-fever", "beir-hotpotqa")
_OFFLINE_OOD = ("scifact", "nfcorpus", "cranfield", "cisi")
_RERANK = ("msmarco-passage", "dpr-nq", "wikiqa", "trecqa")  # the paper's re-ranking sets and the offline stand-ins
_R20, _R100, _NDCG, _MRR = "R@20", "R@100", "nDCG@10", "MRR@10"


def _ret(model: str, metric: str = _R20, **more: Any) -> Q:
    return Q(model=model, metric=metric, **more)


CLAIMS: tuple[Claim, ...] = (
    # ------------------------------------------------------------------ TASER: parameters (Figure 1, Tables A1, A3)
    Claim("T-A3-params", "TASER", "Abstract, Table A3",
          "TASER (Det-R, T=2, I=2) needs about 60% of the bi-encoder's (DPR's) parameters",
          "128M vs 218M (0.59)", "taser_architecture", "params",
          {"taser": Q(arch="taser", routing="deterministic", experts=2), "dpr": Q(arch="dpr")},
          "taser / dpr <= 0.6", column="params"),
    Claim("T-A1-params-shared", "TASER", "Table A1",
          "TASER_Shared (I=1, no specialisation) has half of DPR's parameters",
          "109M vs 218M", "taser_architecture", "params",
          {"shared": Q(arch="taser", routing="shared", experts=1), "dpr": Q(arch="dpr")},
          "shared / dpr <= 0.51", column="params"),
    Claim("T-A1-params-experts", "TASER", "Table A1",
          "Each extra expert FFN costs parameters: learned routing with I=4 is bigger than I=2 yet smaller than DPR",
          "166M (I=4) vs 128M (I=2) vs 218M", "taser_architecture", "params",
          {"i4": Q(arch="taser", routing="sequence", experts=4), "i2": Q(arch="taser", routing="sequence", experts=2),
           "dpr": Q(arch="dpr")},
          "i4 > i2 and i4 < dpr", column="params"),
    # ------------------------------------------------------------------ TASER: in-domain (Tables 1, A2)
    Claim("T1-taser-vs-dpr", "TASER", "Table 1",
          "Initialised from BERT-base and trained alike, TASER is on par with or better than DPR on every dataset "
          "(test R@20, within 0.5 points)",
          f"TASER◊ 83.6/82.0/77.9/91.1/69.7 vs DPR◊ 82.5/81.8/77.8/91.2/67.0 ({_FIVE})",
          "taser_in_domain", "retrieval", {"taser": _ret("taser"), "dpr": _ret("dpr")},
          "taser >= dpr - 0.5", over="dataset"),
    Claim("TA2-taser-vs-dpr-r100", "TASER", "Table A2",
          "At R@100, TASER (BERT-base) beats DPR on every dataset",
          f"88.6/86.6/85.4/95.7/81.2 vs 88.0/86.4/84.7/95.5/79.8 ({_FIVE})",
          "taser_in_domain", "retrieval", {"taser": _ret("taser", _R100), "dpr": _ret("dpr", _R100)},
          "taser > dpr", over="dataset"),
    Claim("T1-hybrid-beats-both", "TASER", "Table 1 (Ma et al. rows), Eq. 6",
          "A dense retriever combined with BM25 beats both on every dataset (R@20; ours: the baselines notebook's "
          "dense model, zero-shot offline)",
          f"DPR_BM25 82.6/82.6/77.3/90.1/75.1 vs DPR 79.5/78.9/75.0/88.8/52.0, BM25 62.9/76.4/62.4/80.7/71.1 ({_FIVE})",
          "baselines", "retrieval", {"hybrid": _ret("hybrid"), "dense": _ret("dense"), "bm25": _ret("bm25")},
          "hybrid > dense and hybrid > bm25", over="dataset"),
    Claim("T1-dpr-below-bm25-squad", "TASER", "Table 1, Sec. 4.1",
          "SQuAD is where DPR underperforms BM25 (high lexical overlap between questions and passages)",
          "DPR◊ 67.0 (DPR without SQuAD 52.0) vs BM25 71.1", "taser_in_domain", "retrieval",
          {"dpr": _ret("dpr"), "bm25": _ret("bm25")}, "dpr < bm25", over="dataset", groups=_SQUAD),
    Claim("T1-dpr-above-bm25-others", "TASER", "Table 1",
          "On NQ, TriviaQA, WebQuestions and CuratedTREC DPR beats BM25",
          "DPR◊ 82.5/81.8/77.8/91.2 vs BM25 62.9/76.4/62.4/80.7", "taser_in_domain", "retrieval",
          {"dpr": _ret("dpr"), "bm25": _ret("bm25")}, "dpr > bm25", over="dataset",
          groups=("dpr-nq", "dpr-trivia", "dpr-webq", "dpr-curatedtrec")),
    Claim("T1-cocondenser-beats-bm25", "TASER", "Table 1, Abstract",
          "Initialised from coCondenser-Wiki, TASER surpasses BM25 on all five datasets (R@20)",
          f"TASER* 84.9/83.4/78.9/90.8/72.9 vs BM25 62.9/76.4/62.4/80.7/71.1 ({_FIVE})",
          "taser_in_domain", "retrieval", {"taser": _ret("taser-cocondenser"), "bm25": _ret("bm25")},
          "taser > bm25", over="dataset"),
    Claim("T1-cocondenser-squad", "TASER", "Sec. 4.1",
          "coCondenser-Wiki initialisation helps TASER, most on SQuAD (+3.2 R@20)",
          "SQuAD 72.9 vs 69.7", "taser_in_domain", "retrieval",
          {"coco": _ret("taser-cocondenser"), "taser": _ret("taser")}, "coco > taser", over="dataset",
          groups=("dpr-squad1",)),
    Claim("T1-hybrid-boost", "TASER", "Table A2",
          "Adding BM25 scores (Eq. 6) further improves TASER on every dataset",
          f"TASER◊_BM25 83.8/83.3/78.7/91.6/77.2 vs TASER◊ 83.6/82.0/77.9/91.1/69.7 ({_FIVE})",
          "taser_in_domain", "retrieval", {"hybrid": _ret("taser+bm25"), "taser": _ret("taser")},
          "hybrid > taser", over="dataset"),
    Claim("T1-hybrid-gain-smaller", "TASER", "Sec. 4.1",
          "The BM25 hybrid helps DPR more than TASER on SQuAD: TASER already captures more lexical overlap",
          "DPR 52.0→75.1 (+23.1, Ma et al.) vs TASER* 72.9→78.0 (+5.1), TASER◊ 69.7→77.2 (+7.5)",
          "taser_in_domain", "retrieval",
          {"dpr": _ret("dpr"), "dpr_h": _ret("dpr+bm25"), "taser": _ret("taser"), "taser_h": _ret("taser+bm25")},
          "(dpr_h - dpr) > (taser_h - taser)", over="dataset", groups=_SQUAD),
    Claim("T1-train-with-squad", "TASER", "Sec. 4.1",
          "Keeping SQuAD in multi-set training does not hurt and clearly improves SQuAD",
          "DPR† (with SQuAD) 63.1 vs DPR without SQuAD 52.0 on SQuAD; NQ 80.9 vs 79.5",
          "taser_in_domain", "retrieval",
          {"with_squad": _ret("dpr-no-hn"), "without": _ret("dpr-no-hn-no-squad")},
          "with_squad > without", over="dataset", groups=("dpr-squad1",)),
    Claim("T-epoch-time", "TASER", "Sec. 4.1",
          "One epoch of training and validation is faster for TASER than for DPR",
          "11 vs 15 minutes (-26%), 16 V100-32G", "taser_efficiency", "timing",
          {"taser": Q(model="taser", metric="epoch_seconds"), "dpr": Q(model="dpr", metric="epoch_seconds")},
          "taser < dpr"),
    # ------------------------------------------------------------------ TASER: routing variants (Table A1)
    Claim("TA1-shared-beats-dpr", "TASER", "Table A1",
          "TASER_Shared outperforms DPR with 50% of its parameters (single-set, test R@20)",
          "79.3 vs 78.4 (NQ)", "taser_routing", "retrieval",
          {"shared": _ret("shared", split="test"), "dpr": _ret("dpr", split="test")}, "shared > dpr",
          over="dataset"),
    Claim("TA1-specialisation", "TASER", "Table A1",
          "Task-aware specialisation (Det-R) improves over the fully shared encoder",
          "80.7 vs 79.3 (NQ)", "taser_routing", "retrieval",
          {"det": _ret("det-r", split="test"), "shared": _ret("shared", split="test")}, "det > shared",
          over="dataset"),
    Claim("TA1-det-best", "TASER", "Table A1, App. C",
          "Deterministic routing has the best test R@20 of all routing variants",
          "Det-R 80.7 vs Seq-R 80.6 (I=2) / 80.1 (I=4), Tok-R 79.8 / 79.8 (NQ)", "taser_routing", "retrieval",
          {"det": _ret("det-r", split="test"), "seq2": _ret("seq-r-2", split="test"),
           "seq4": _ret("seq-r-4", split="test"), "tok2": _ret("tok-r-2", split="test"),
           "tok4": _ret("tok-r-4", split="test")},
          "det >= seq2 and det >= seq4 and det >= tok2 and det >= tok4", over="dataset"),
    Claim("TA1-seq-beats-tok", "TASER", "Table A1, App. C",
          "Sequence-level routing beats token-level routing",
          "I=2: 80.6 vs 79.8; I=4: 80.1 vs 79.8 (NQ)", "taser_routing", "retrieval",
          {"seq2": _ret("seq-r-2", split="test"), "tok2": _ret("tok-r-2", split="test"),
           "seq4": _ret("seq-r-4", split="test"), "tok4": _ret("tok-r-4", split="test")},
          "seq2 > tok2 and seq4 > tok4", over="dataset"),
    Claim("TA1-two-experts-enough", "TASER", "Table A1, App. C",
          "More expert FFNs do not help: I=2 is sufficient",
          "Seq-R 80.6 (I=2) vs 80.1 (I=4); Tok-R 79.8 vs 79.8 (NQ)", "taser_routing", "retrieval",
          {"seq2": _ret("seq-r-2", split="test"), "seq4": _ret("seq-r-4", split="test"),
           "tok2": _ret("tok-r-2", split="test"), "tok4": _ret("tok-r-4", split="test")},
          "seq4 <= seq2 and tok4 <= tok2", over="dataset"),
    Claim("TA1-hard-negatives", "TASER", "Table A1, App. B",
          "Hard-negative mining (two rounds) improves Det-R TASER",
          "80.7 → 83.7 (+3.0, NQ)", "taser_routing", "retrieval",
          {"det_hn": _ret("det-r-hn", split="test"), "det": _ret("det-r", split="test")}, "det_hn > det",
          over="dataset"),
    Claim("TA1-hn-beats-dpr", "TASER", "Table A1",
          "With hard negatives, Det-R TASER beats DPR trained with hard negatives",
          "83.7 vs 81.3 (NQ)", "taser_routing", "retrieval",
          {"det_hn": _ret("det-r-hn", split="test"), "dpr_hn": _ret("dpr-hn", split="test")}, "det_hn > dpr_hn",
          over="dataset"),
    # ------------------------------------------------------------------ TASER: out of domain (Tables 2, A4)
    Claim("T2-eq-beats-dpr", "TASER", "Table 2",
          "On EntityQuestions TASER beats DPR (macro R@20 over relations)",
          "TASER◊ 64.7, TASER* 66.7 vs DPR_Multi 56.7", "taser_out_of_domain", "retrieval",
          {"taser": _ret("taser", "R@20 macro"), "dpr": _ret("dpr", "R@20 macro")}, "taser > dpr",
          over="dataset", groups=("entityquestions",)),
    Claim("T2-eq-bm25-gap", "TASER", "Table 2, Sec. 7",
          "BM25 still leads on EntityQuestions: a gap to BM25 remains out of domain",
          "BM25 71.2 vs TASER* 66.7", "taser_out_of_domain", "retrieval",
          {"bm25": _ret("bm25", "R@20 macro"), "taser": _ret("taser", "R@20 macro")}, "bm25 > taser",
          over="dataset", groups=("entityquestions",)),
    Claim("TA4-eq-micro", "TASER", "Table A4",
          "TASER beats DPR on EntityQuestions micro R@20 and R@100 too",
          "R@20 64.3 vs 56.6; R@100 76.2 vs 70.1", "taser_out_of_domain", "retrieval",
          {"taser": Q(model="taser", dataset="entityquestions"), "dpr": Q(model="dpr", dataset="entityquestions")},
          "taser > dpr", over="metric", groups=("R@20 micro", "R@100 micro")),
    Claim("T2-beir-beats-dpr", "TASER", "Table 2",
          "TASER improves over DPR on all four BEIR sets where DPR trails BM25 (nDCG@10)",
          "TASER◊ 32.8/31.4/59.6/50.7 vs DPR 17.5/26.3/56.2/39.1 (ArguAna/DBpedia/FEVER/HotpotQA)",
          "taser_out_of_domain", "retrieval", {"taser": _ret("taser", _NDCG), "dpr": _ret("dpr", _NDCG)},
          "taser > dpr", over="dataset", groups=_BEIR4),
    Claim("T2-beir-matches-bm25", "TASER", "Sec. 4.2",
          "TASER matches BM25 on ArguAna and DBpedia (nDCG@10, within 0.5 points)",
          "32.8 vs 31.5; 31.4 vs 31.3", "taser_out_of_domain", "retrieval",
          {"taser": _ret("taser", _NDCG), "bm25": _ret("bm25", _NDCG)}, "taser >= bm25 - 0.5", over="dataset",
          groups=("beir-arguana", "beir-dbpedia-entity")),
    Claim("T2-cocondenser-hotpotqa", "TASER", "Sec. 4.2",
          "Out of domain, coCondenser initialisation helps TASER only on HotpotQA",
          "54.5 vs 50.7 (on par or worse on the other three)", "taser_out_of_domain", "retrieval",
          {"coco": _ret("taser-cocondenser", _NDCG), "taser": _ret("taser", _NDCG)}, "coco > taser",
          over="dataset", groups=("beir-hotpotqa",)),
    Claim("T2-offline-ood", "TASER", "Table 2 (offline analogue)",
          "Our offline analogue of Table 2, not a number of the paper: TASER beats DPR out of domain on SciFact, "
          "NFCorpus, Cranfield and CISI (nDCG@10)",
          "— (the direction of Table 2)", "taser_out_of_domain", "retrieval",
          {"taser": _ret("taser", _NDCG), "dpr": _ret("dpr", _NDCG)}, "taser > dpr", over="dataset",
          groups=_OFFLINE_OOD),
    # ------------------------------------------------------------ DE: capacity vs generalisation (Fig. 1, 3; Table 2)
    Claim("D-T2-train-match", "DE", "Figure 1, Table 2",
          "With a large enough embedding (6 layers, 768), DE comes within 0.01 of CA's training MRR@10",
          "train 0.518 vs 0.522 (at 128: 0.317 vs 0.385)", "de_capacity", "mrr",
          {"ca": Q(model="ca", split="train"), "de": Q(model="de", split="train")}, "ca - de < 0.01",
          over="size", groups=("6-768",)),
    Claim("D-T2-test-gap", "DE", "Figure 1, Table 2",
          "At every size CA beats DE on the test set",
          "e.g. 6-768: 0.364 vs 0.310; 2-128: 0.309 vs 0.221; bert-base 0.368 vs 0.309", "de_capacity", "mrr",
          {"ca": Q(model="ca", split="test"), "de": Q(model="de", split="test")}, "ca > de", over="size"),
    Claim("D-F1-overfit", "DE", "Figure 1, Sec. 3.2",
          "DE's shortfall is a generalisation gap: its deficit to CA is larger on test than on train",
          "6-768: train 0.522 vs 0.518, test 0.364 vs 0.310 (holds in every row of Table 2)", "de_capacity", "mrr",
          {"ca_train": Q(model="ca", split="train"), "de_train": Q(model="de", split="train"),
           "ca_test": Q(model="ca", split="test"), "de_test": Q(model="de", split="test")},
          "(ca_test - de_test) > (ca_train - de_train)", over="size"),
    Claim("D-F1-distillation-closes-gap", "DE", "Figure 1, Sec. 5.1",
          "M3SE distillation largely closes the DE-CA test gap",
          "6-768 test: DIST 0.349 vs DE 0.310, CA 0.364", "de_capacity", "mrr",
          {"dist": Q(model="dist", split="test"), "de": Q(model="de", split="test")}, "dist > de", over="size"),
    Claim("D-F1-distillation-train", "DE", "Figure 1, Sec. 5.1",
          "At the largest embedding, distillation's test gain comes with a lower training MRR@10",
          "Figure 1 (left), 6-768: DIST below DE on train", "de_capacity", "mrr",
          {"dist": Q(model="dist", split="train"), "de": Q(model="de", split="train")}, "dist < de",
          over="size", groups=("6-768",)),
    # ------------------------------------------------------------------ DE: score distributions (Fig. 2, 5, 6, 8)
    Claim("D-F2-diffuse-negatives", "DE", "Figure 2",
          "CA collapses negatives into a narrow peak; DE's negative scores are more diffuse "
          "(spread of negative scores over the score range)",
          "Figure 2 (left vs middle); no number given", "de_score_distributions", "scores",
          {"ca": Q(model="ca", split="test", statistic="negative_spread"),
           "de": Q(model="de", split="test", statistic="negative_spread")}, "de > ca"),
    Claim("D-F5-diffuse-train", "DE", "Figure 5",
          "The same holds on the training set", "Figure 5; no number given", "de_score_distributions", "scores",
          {"ca": Q(model="ca", split="train", statistic="negative_spread"),
           "de": Q(model="de", split="train", statistic="negative_spread")}, "de > ca"),
    Claim("D-F2-smaller-margins", "DE", "Figure 2 (right)",
          "DE's normalised margins (s(q,d+) - s(q,d-))/ρ are smaller than CA's (median)",
          "Figure 2 (right); no number given", "de_score_distributions", "scores",
          {"ca": Q(model="ca", split="test", statistic="median_margin"),
           "de": Q(model="de", split="test", statistic="median_margin")}, "de < ca"),
    Claim("D-F8-distilled-margins", "DE", "Figures 2, 8",
          "Distillation moves DE's margins towards CA's: more mass on larger margins",
          "Figure 8; no number given", "de_score_distributions", "scores",
          {"dist": Q(model="dist", split="test", statistic="median_margin"),
           "de": Q(model="de", split="test", statistic="median_margin")}, "dist > de"),
    Claim("D-F6-baseline-shift", "DE", "Figure 6",
          "DE scores carry a large baseline shift that CA scores do not (|mean score|)",
          "DE scores ≈ 660-780 vs CA ≈ -30..20", "de_score_distributions", "scores",
          {"ca": Q(model="ca", split="test", statistic="mean_score"),
           "de": Q(model="de", split="test", statistic="mean_score")}, "abs(de) > abs(ca)"),
    # ------------------------------------------------------------------ DE: distillation (Tables 1, 4, 5)
    Claim("D-T1-ca-beats-de", "DE", "Table 1",
          "Trained on one-hot labels, CA beats DE at re-ranking (MRR@10)",
          "MSMARCO 0.370 vs 0.310; NQ 0.746 vs 0.676", "de_distillation", "rerank",
          {"ca": _ret("ca", _MRR), "de": _ret("de", _MRR)}, "ca > de", over="dataset", groups=_RERANK),
    Claim("D-T1-mse-underperforms", "DE", "Table 1, Sec. 5.1",
          "Plain logit matching (MSE) does worse than one-hot DE: teacher and student score scales differ",
          "MSMARCO 0.289 vs 0.310; NQ 0.659 vs 0.676", "de_distillation", "rerank",
          {"mse": _ret("mse", _MRR), "de": _ret("de", _MRR)}, "mse < de", over="dataset", groups=_RERANK),
    Claim("D-T1-margin-mse", "DE", "Table 1, Eq. 3",
          "Margin MSE (translation invariant) repairs logit matching",
          "MSMARCO 0.334 vs 0.289; NQ 0.673 vs 0.659", "de_distillation", "rerank",
          {"margin": _ret("margin-mse", _MRR), "mse": _ret("mse", _MRR)}, "margin > mse", over="dataset",
          groups=_RERANK),
    Claim("D-T1-ours-best", "DE", "Table 1, Eq. 1, 4",
          "M3SE and softmax CE beat every earlier distillation loss (MSE, margin MSE, RankDistil-B)",
          "MSMARCO 0.349 / 0.346 vs ≤ 0.334; NQ 0.699 / 0.682 vs ≤ 0.673", "de_distillation", "rerank",
          {"m3se": _ret("m3se", _MRR), "sce": _ret("softmax-ce", _MRR), "margin": _ret("margin-mse", _MRR),
           "mse": _ret("mse", _MRR), "rd": _ret("rankdistil-b", _MRR)},
          "m3se > margin and m3se > mse and m3se > rd and sce > margin and sce > mse and sce > rd",
          over="dataset", groups=_RERANK),
    Claim("D-T1-distillation-beats-onehot", "DE", "Table 1, Figure 1",
          "M3SE and softmax CE distillation beat one-hot training of the same DE, shrinking the gap to CA",
          "MSMARCO 0.349 / 0.346 vs 0.310 (CA 0.370); NQ 0.699 / 0.682 vs 0.676 (CA 0.746)",
          "de_distillation", "rerank",
          {"m3se": _ret("m3se", _MRR), "sce": _ret("softmax-ce", _MRR), "de": _ret("de", _MRR)},
          "m3se > de and sce > de", over="dataset", groups=_RERANK),
    Claim("D-T1-retrieval", "DE", "Table 1",
          "In full retrieval on MS MARCO, M3SE and softmax CE beat one-hot DE and margin MSE",
          "MRR@10 0.337 / 0.334 vs 0.281 (one-hot) / 0.319 (margin MSE)", "de_distillation", "rerank",
          {"m3se": _ret("m3se", _MRR), "sce": _ret("softmax-ce", _MRR), "de": _ret("de", _MRR),
           "margin": _ret("margin-mse", _MRR)},
          "m3se > de and sce > de and m3se > margin and sce > margin", over="dataset",
          groups=("msmarco-passage-retrieval",)),
    Claim("D-T1-dl19-margin-mse", "DE", "Table 1, App. C.11",
          "On TREC DL19, margin MSE has the best MRR@10 (the paper attributes this to false negatives in the labels)",
          "0.867 vs M3SE 0.852, softmax CE 0.846", "de_distillation", "rerank",
          {"margin": _ret("margin-mse", _MRR), "m3se": _ret("m3se", _MRR), "sce": _ret("softmax-ce", _MRR)},
          "margin > m3se and margin > sce", over="dataset", groups=("trec-dl-2019",)),
    Claim("D-T45-small-students", "DE", "Tables 4, 5",
          "With smaller students (6-128, 2-768), softmax CE and M3SE distillation still beat one-hot DE; MSE does not",
          "6-128: KL 0.273, M3SE 0.261 vs DE 0.249, MSE 0.180; 2-768: KL 0.311, M3SE 0.286 vs DE 0.281, MSE 0.259",
          "de_distillation", "students",
          {"sce": _ret("softmax-ce", _MRR), "m3se": _ret("m3se", _MRR), "de": _ret("de", _MRR),
           "mse": _ret("mse", _MRR)},
          "sce > de and m3se > de and mse < de", over="size"),
    Claim("D-T6-num-docs", "DE", "Table 6, App. C.7",
          "More teacher-scored documents per query help up to K=20, with diminishing returns after",
          "softmax CE 0.327/0.333/0.338/0.334, M3SE 0.323/0.326/0.349/0.325 at K=2/10/20/100", "de_num_docs",
          "rerank",
          {"k2": Q(k=2, metric=_MRR), "k20": Q(k=20, metric=_MRR), "k100": Q(k=100, metric=_MRR)},
          "k20 > k2 and k100 <= k20", over="model", groups=("softmax-ce", "m3se")),
    Claim("D-T7-colbert", "DE", "Table 7, Sec. 5.1",
          "Late interaction (ColBERT scoring) alone beats the dot-product DE",
          "MSMARCO MRR@10 0.356 vs 0.310", "de_colbert", "rerank",
          {"colbert": _ret("colbert", _MRR), "de": _ret("de", _MRR)}, "colbert > de", over="dataset"),
    Claim("D-T7-colbert-beats-teacher", "DE", "Table 7, Sec. 5.1",
          "ColBERT distilled with softmax CE exceeds its CA teacher",
          "MSMARCO MRR@10 0.376 vs 0.370; DL19 0.835 vs 0.829", "de_colbert", "rerank",
          {"colbert": _ret("colbert-softmax-ce", _MRR), "ca": _ret("ca", _MRR)}, "colbert > ca", over="dataset"),
    # ------------------------------------------------------------ DE: other regularisers (Tables 8, 9, 12; Fig. 4)
    Claim("D-T8-label-smoothing", "DE", "Table 8, App. C.9",
          "Label smoothing does not improve DE test MRR@10",
          "0.308 (α=0) vs 0.297 (0.1), 0.292 (0.9)", "de_label_smoothing", "smoothing",
          {"s0": Q(alpha=0.0, split="test"), "s1": Q(alpha=0.1, split="test"), "s9": Q(alpha=0.9, split="test")},
          "s1 <= s0 and s9 <= s0"),
    Claim("D-T9-regularisers", "DE", "Table 9, App. C.10",
          "No standard regulariser (embedding dropout, token dropout, MLM loss, focal loss) improves DE test MRR@10",
          "baseline 0.310 vs 0.299 / 0.291 / 0.299 / 0.307", "de_regularisation", "regularisation",
          {"base": Q(strategy="baseline", split="test"), "emb": Q(strategy="embedding-dropout", split="test"),
           "tok": Q(strategy="token-dropout", split="test"), "mlm": Q(strategy="mlm", split="test"),
           "focal": Q(strategy="focal", split="test")},
          "emb <= base and tok <= base and mlm <= base and focal <= base"),
    Claim("D-T12-negative-mining", "DE", "Table 12, App. C.12",
          "Extra in-batch and uniform negatives help one-hot DE slightly, not the distilled students",
          "one-hot 0.310 → 0.312; M3SE 0.349 → 0.324; KL 0.346 → 0.342", "de_negative_mining", "rerank",
          {"onehot": Q(model="de", negatives="none"), "onehot_mined": Q(model="de", negatives="mined"),
           "m3se": Q(model="m3se", negatives="none"), "m3se_mined": Q(model="m3se", negatives="mined"),
           "sce": Q(model="softmax-ce", negatives="none"), "sce_mined": Q(model="softmax-ce", negatives="mined")},
          "onehot_mined >= onehot and m3se_mined <= m3se and sce_mined <= sce"),
    Claim("D-F4-gap-widens", "DE", "Figure 4, App. C.2",
          "During training DE keeps improving on train while test stalls: its train-test gap widens",
          "Figure 4; no number given", "de_learning_curves", "summary",
          {"train_first": Q(model="de", point="first", split="train"),
           "test_first": Q(model="de", point="first", split="test"),
           "train_last": Q(model="de", point="last", split="train"),
           "test_last": Q(model="de", point="last", split="test")},
          "(train_last - test_last) > (train_first - test_first)"),
    Claim("D-F4-distillation", "DE", "Figure 4, App. C.2",
          "Distillation ends lower than DE on train but higher on test",
          "Figure 4; no number given", "de_learning_curves", "summary",
          {"dist_train": Q(model="dist", point="last", split="train"),
           "de_train": Q(model="de", point="last", split="train"),
           "dist_test": Q(model="dist", point="last", split="test"),
           "de_test": Q(model="de", point="last", split="test")},
          "dist_train < de_train and dist_test > de_test"),
    # ------------------------------------------------------------------ DE: theory, checked numerically
    Claim("D-P1-svd", "DE", "Proposition 1, Sec. 3.1",
          "Any finite score matrix is exactly a dual encoder of dimension rank(S) (SVD); max abs error",
          "exact", "de_propositions", "checks", {"err": Q(check="svd_reconstruction")}, "err < 1e-6"),
    Claim("D-P3-sce-margin-mse", "DE", "Proposition 3",
          "For K=2, softmax CE equals the binary KL of the sigmoid margins, and τ²·∂ℓ_sce → (1/8)·∂ℓ_mmse "
          "as τ grows; max abs errors",
          "exact identity; limit as τ → ∞", "de_propositions", "checks",
          {"kl": Q(check="sce_vs_binary_kl"), "grad": Q(check="gradient_limit")}, "kl < 1e-6 and grad < 1e-3"),
)


# ----------------------------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class Verdict:
    ours: str    # our numbers, per group
    holds: str   # "yes", "no", "no (fails on ...)", NO_RESULT or "error: ..."


def _matches(series: pd.Series, value: Any) -> pd.Series:
    """Column equals value; numbers compare as numbers (CSV turns 2 into 2.0 next to missing values)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == str(value)


def _fmt(x: float) -> str:
    if abs(x) >= 1e5:
        return f"{x / 1e6:.1f}M"
    return f"{x:.4g}"


class _Tables:
    """Result tables of one profile, each read once."""

    def __init__(self, profile_dir: Path, folders: Mapping[str, Path] | None = None):
        self.dir, self.cache, self.folders = profile_dir, {}, dict(folders or {})

    def get(self, notebook: str, table: str) -> pd.DataFrame | None:
        key = (notebook, table)
        if key not in self.cache:
            folder = self.folders.get(notebook, self.dir / notebook)
            data = load_result(folder, table) if (folder / META_NAME).is_file() else None
            self.cache[key] = pd.DataFrame([data]) if isinstance(data, dict) else data
        return self.cache[key]


def evaluate_claim(claim: Claim, profile_dir: str | os.PathLike,
                   folders: Mapping[str, str | os.PathLike] | None = None) -> Verdict:
    """Our numbers for `claim` in one profile's results, and whether its direction holds. `folders` maps a
    notebook to the folder holding its tables when that is not `profile_dir/<notebook>` (a running notebook)."""
    tables = _Tables(Path(profile_dir), {k: Path(v) for k, v in (folders or {}).items()})
    frames: dict[str, pd.DataFrame] = {}
    for name, q in claim.quantities.items():
        frame = tables.get(q.notebook or claim.notebook, q.table or claim.table)
        if frame is None:
            return Verdict(NO_RESULT, NO_RESULT)
        column = q.column or claim.column
        needed = [column, *q.where, *([claim.over] if claim.over else [])]
        absent = [c for c in needed if c not in frame.columns]
        if absent:
            return Verdict("", f"error: {q.notebook or claim.notebook}/{q.table or claim.table} has no column "
                               f"{', '.join(absent)}")
        mask = pd.Series(True, index=frame.index)
        for key, value in q.where.items():
            mask &= _matches(frame[key], value)
        frames[name] = frame[mask]

    if claim.over:
        present = [set(f[claim.over].astype(str)) for f in frames.values()]
        groups = sorted(set.intersection(*present)) if present else []
        if claim.groups is not None:
            groups = [g for g in claim.groups if g in groups]
        if not groups:
            return Verdict(NO_RESULT, NO_RESULT)
    else:
        groups = [None]

    parts, outcomes = [], []
    for group in groups:
        values = {}
        for name, frame in frames.items():
            rows = frame if group is None else frame[frame[claim.over].astype(str) == group]
            column = claim.quantities[name].column or claim.column
            if len(rows) == 0:
                return Verdict(NO_RESULT, NO_RESULT)
            if len(rows) > 1:
                return Verdict("", f"error: {len(rows)} rows match {name} {claim.quantities[name]!r}"
                                   + (f" for {claim.over}={group}" if group else ""))
            value = pd.to_numeric(rows[column], errors="coerce").iloc[0]
            if value is None or math.isnan(value):
                return Verdict("", f"error: {name} is not a number")
            values[name] = float(value)
        outcomes.append(bool(pd.eval(claim.test, local_dict=values, engine="python")))
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())
        parts.append(f"{group}: {shown}" if group is not None else shown)

    holds = "yes" if all(outcomes) else "no"
    if claim.over and len(groups) > 1 and not all(outcomes):
        failed = [g for g, ok in zip(groups, outcomes) if not ok]
        holds += f" (fails on {', '.join(failed)})"
    return Verdict("; ".join(parts), holds)


def notebook_claims(notebook: str, results_dir: str | os.PathLike | None = None,
                    claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """The paper's claims whose numbers `notebook` produces, beside ours from `results_dir` (the notebook's own
    result folder, e.g. while it runs) when given: the "paper's table beside ours" cell of a notebook."""
    rows = []
    for claim in claims:
        if claim.notebook != notebook:
            continue
        row = {"id": claim.id, "where": claim.where, "claim": claim.statement, "paper": claim.paper_numbers}
        if results_dir is not None:
            folder = Path(results_dir)
            verdict = evaluate_claim(claim, folder.parent, folders={notebook: folder})
            row.update({"ours": verdict.ours, "direction holds": verdict.holds})
        rows.append(row)
    return pd.DataFrame(rows)


def profiles_with_results(results_root: str | os.PathLike) -> list[str]:
    """Profiles under results_root with at least one published notebook result, smoke/cpu/full first."""
    root = Path(results_root)
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir()
             if p.is_dir() and not p.name.startswith((".", "_")) and any(p.glob(f"*/{META_NAME}"))]
    return sorted(found, key=lambda p: (PROFILE_ORDER.index(p) if p in PROFILE_ORDER else len(PROFILE_ORDER), p))


def build_scorecard(results_root: str | os.PathLike, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """One row per claim: id, paper, where, claim, paper's numbers, then `ours (<profile>)` and `holds (<profile>)`
    for each profile that ran (a single `ours` / `holds` pair saying "no result yet" when none did)."""
    profiles = profiles_with_results(results_root)
    rows = []
    for claim in claims:
        row = {"id": claim.id, "paper": claim.paper, "where": claim.where, "claim": claim.statement,
               "paper's numbers": claim.paper_numbers, "notebook": claim.notebook}
        if not profiles:
            row.update({"ours": NO_RESULT, "holds": NO_RESULT})
        for profile in profiles:
            verdict = evaluate_claim(claim, Path(results_root) / profile)
            row[f"ours ({profile})"] = verdict.ours
            row[f"holds ({profile})"] = verdict.holds
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_scorecard_page(results_root: str | os.PathLike, out_md: str | os.PathLike,
                         claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """Write the book's scorecard page (MyST markdown) from results_root; returns the scorecard table."""
    card = build_scorecard(results_root, claims)
    profiles = profiles_with_results(results_root)
    lines = [
        "# Scorecard",
        "",
        "Every headline claim of both papers, the paper's numbers, ours, and whether the claim's *direction* "
        "holds in our results. This page is generated from `results/<profile>/` by `taser book` "
        f"(last generated {run_metadata()['time_utc']}); it reads only the result tables the notebooks saved.",
        "",
        "- **smoke** results come from tiny slices and only show that the pipeline runs: their numbers mean "
        "nothing. **cpu** runs the offline data with the packaged MiniLM model, which is not the papers' setting "
        "(see [Reproducing](reproduce.md)). **full** is paper scale.",
        "- *holds* evaluates the direction test of each claim (in `taser_lib/scorecard.py`) on our numbers; "
        f"a claim whose notebook has not run, or did not compute it at that profile, says *{NO_RESULT}*.",
        "",
    ]
    if profiles:
        lines += ["| profile | holds | does not hold | no result yet | error |", "| --- | --- | --- | --- | --- |"]
        for p in profiles:
            col = card[f"holds ({p})"]
            counts = [(col == "yes").sum(), ((col == "no") | col.str.startswith("no (")).sum(),
                      (col == NO_RESULT).sum(), col.str.startswith("error").sum()]
            lines.append(f"| {p} | " + " | ".join(str(c) for c in counts) + " |")
        lines.append("")
    else:
        lines += [f"No profile has run yet: every claim says *{NO_RESULT}*. Run `taser reproduce --profile cpu`.",
                  ""]
    value_columns = [c for c in card.columns if c.startswith(("ours", "holds"))]
    for paper, title in PAPERS.items():
        part = card[card["paper"] == paper]
        lines += [f"## {title}", ""]
        header = ["id", "where", "claim", "paper", *value_columns]
        lines += ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
        for _, r in part.iterrows():
            cells = [r["id"], r["where"], r["claim"], r["paper's numbers"], *(r[c] for c in value_columns)]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    atomic_write_text(out_md, "\n".join(lines))
    return card
