"""What the page modules share: the result's saving and claims (`PageResult`), the training parameters a page hands
to `runs.recipes.reranking_run`, and the sentences several pages print about their runs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pandas as pd

from taser_lib.evaluation.query_sets import shared_query_counts

from ..profiles import PageSettings
from ..scorecard import notebook_claims, publish
from ..runs.testbed import reinitialised_checkpoint

class PageResult:
    """What every page's result does alike: save its tables and judge the page's claims on them. A result sets
    `page` (its page's name) and has `tables()`, `parameters()`, `settings` and `results_dir`."""

    page: str

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        return publish(results_dir, self.page, tables=self.tables(), parameters=self.parameters(),
                       settings=self.settings)

    def claims(self) -> pd.DataFrame:
        """The paper's claims of this page beside ours, judged on the saved tables (without a results folder: the
        claims alone)."""
        return notebook_claims(self.page, self.results_dir)


# The settings every re-ranking run of a dual-encoder page reads, in the order its parameters are recorded.
TRAINING = ("model", "pooling", "precision", "max_query_length", "max_passage_length", "batch_size",
            "eval_batch_size", "epochs", "learning_rate")
SIZES = ("n_train", "n_queries", "n_docs")


def reranking_params(settings: PageSettings, *, sizes: tuple[str, ...] = SIZES, extra: tuple[str, ...] = (),
                     **replace: Any) -> dict[str, Any]:
    """{setting: value} of `settings` that a page's re-ranking runs take: the model and training settings, the
    `sizes` (training questions, test questions, documents), then the `extra` settings the page's runs read as well
    (e.g. "cross_encoder_model"); `replace` gives a setting another value (e.g. model=a re-initialised checkpoint).

    >>> reranking_params(page_settings("de_margins", "smoke"))["n_train"]   # doctest: +SKIP
    8
    """
    names = (*TRAINING, *sizes, *extra)
    unknown = sorted(set(replace) - set(names))
    if unknown:
        raise TypeError(f"reranking_params: {', '.join(unknown)} not among the settings it gives ({', '.join(names)})")
    return {name: replace.get(name, getattr(settings, name)) for name in names}


def teacher_line(teacher: Any) -> str:
    """The CA teacher's training steps and dev nDCG@10 (`teacher`: its finished run), as the pages print it."""
    return f"CA teacher: {teacher.result['final_step']} training steps, dev nDCG@10 {teacher.metric:.3f}"


def questions_compared(before: pd.DataFrame, kept: pd.DataFrame, labels: Mapping[str, str]) -> str:
    """On how many test questions the models are compared: one number when it is the same for all, else each
    model's (`before`, `kept`: the per-query rows before and after `query_sets.shared_queries`)."""
    compared = shared_query_counts(before, kept).groupby("model")["shared"].max()
    return (f"every model is compared on the same {compared.min()} test questions" if compared.nunique() == 1 else
            "test questions compared: " + ", ".join(f"{labels.get(m, m)} {n}" for m, n in compared.items()))


def distill_params(settings: PageSettings, **replace: Any) -> dict[str, Any]:
    """What a dual-encoder page hands every run, the CA teacher's and its students': `reranking_params` with the CA's
    checkpoint (`cross_encoder_model`), then the teacher's own sizes (`teacher`)."""
    return {**reranking_params(settings, extra=("cross_encoder_model",), **replace), "teacher": settings.teacher_params}


def start_model(settings: PageSettings) -> str:
    """One start for the CA and every DE: `model`, or `model` with its top `reinit_layers` re-initialised."""
    if not settings.reinit_layers:
        return settings.model
    return str(reinitialised_checkpoint(settings.model, settings.reinit_layers))


def reinit_params(settings: PageSettings) -> dict[str, Any]:
    """`distill_params` from `start_model` (the CA too starts there when re-initialised), and the re-ranking loop."""
    start = start_model(settings)
    return {**distill_params(settings, model=start,
                             cross_encoder_model=start if settings.reinit_layers else settings.cross_encoder_model),
            "rerank_loop": settings.rerank_loop}
