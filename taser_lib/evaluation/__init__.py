"""Evaluation: answer recall R@K (DPR rule), ir-measures ranking metrics, paired significance tests.

    >>> from taser_lib.evaluation import answer_recall, evaluate
    >>> answer_recall(AnswerMatcher(corpus), queries, run)  # {"R@1": ..., "R@5": ..., "R@20": ..., "R@100": ...}
    >>> evaluate(run, qrels)                                 # {"nDCG@10": ..., "RR@10": ..., "R@100": ...}
"""

from .answer_recall import (KS, answer_hits, answer_recall, hits_at_k, hits_scorer, macro_micro_accuracy,
                            top_k_accuracy)
from .metrics import MEASURES, evaluate, per_query, qrels_scorer
from .significance import TestResult, paired_t_test, randomisation_test

__all__ = [
    "KS", "MEASURES", "TestResult", "answer_hits", "answer_recall", "evaluate", "hits_at_k", "hits_scorer",
    "macro_micro_accuracy", "paired_t_test", "per_query", "qrels_scorer", "randomisation_test", "top_k_accuracy",
]
