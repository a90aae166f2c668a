"""Evaluation: answer recall R@K (DPR rule), ir-measures ranking and re-ranking metrics, per-query records,
paired significance tests and seed summaries.

    >>> from taser_lib.evaluation import answer_recall, evaluate
    >>> answer_recall(AnswerMatcher(corpus), queries, run)  # {"R@1": ..., "R@5": ..., "R@20": ..., "R@100": ...}
    >>> evaluate(run, qrels)                                 # {"nDCG@10": ..., "RR@10": ..., "R@100": ...}
    >>> rerank_metrics(rset, scores)                         # {"MRR@10": ..., "nDCG@10": ...}
    >>> compare_runs("runs/a", "runs/b", metric="nDCG@10")   # from their test_per_query.csv
    >>> summarise_seeds(rows, by=["model", "metric"], digits=1)
"""

from .answer_recall import (KS, answer_hits, answer_recall, hits_at_k, hits_scorer, macro_micro_accuracy,
                            top_k_accuracy)
from .metrics import MEASURES, evaluate, per_query, qrels_scorer
from .records import (PerQuery, per_query_path, read_per_query, record_evaluation, select_metric,
                      write_per_query)
from .reranking import RERANK_MEASURES, record_test_metrics, rerank_metrics, rerank_per_query, scores_to_run
from .retrieval import PassageEmbeddings, RecallEvaluator
from .seeds import mean_std, summarise_seeds
from .significance import (Comparison, TestResult, adjust_p_values, compare_runs, compare_seed_groups,
                           compare_systems, paired_t_test, randomisation_test)

__all__ = [
    "KS", "MEASURES", "RERANK_MEASURES", "Comparison", "PassageEmbeddings", "PerQuery", "RecallEvaluator",
    "TestResult", "adjust_p_values", "answer_hits", "answer_recall", "compare_runs", "compare_seed_groups",
    "compare_systems", "evaluate", "hits_at_k", "hits_scorer", "macro_micro_accuracy", "mean_std",
    "paired_t_test", "per_query", "per_query_path", "qrels_scorer", "randomisation_test", "read_per_query",
    "record_evaluation", "record_test_metrics", "rerank_metrics", "rerank_per_query", "scores_to_run",
    "select_metric", "summarise_seeds", "top_k_accuracy", "write_per_query",
]

