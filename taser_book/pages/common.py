"""What the page modules share: the training parameters a page hands to `runs.recipes.reranking_run`."""

from __future__ import annotations

from typing import Any

from ..profiles import PageSettings

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
