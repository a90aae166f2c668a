"""The disagreement page's (de_qualitative) Table 3 summary as a reader sees it."""

from __future__ import annotations

import pandas as pd

from taser_book.analyses.disagreement import SUMMARY_STATISTICS


def summary_table(summary: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """`analyses.disagreement.disagreement_summary`'s (statistic, value) rows with each statistic in words
    (`SUMMARY_STATISTICS`; a name without words stays as it is) and each value at `digits` decimals, trailing zeros
    dropped (a count reads "50", not "50.000")."""
    return pd.DataFrame({"statistic": [SUMMARY_STATISTICS.get(name, name) for name in summary["statistic"]],
                         "value": [f"{round(float(value), digits):g}" for value in summary["value"]]})
