"""The front page's key claims (book/headline.yaml, `book.headline_section`) and the scorecard's order: the claims
first. The Chromium checks of both on the built book are in tests/test_book.py."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from taser_book.book import HeadlineRow, headline_ours, headline_section, load_headline, ours_numbers
from taser_book.claims import load_claims
from taser_lib.errors import ConfigError, FormatError

REPO = Path(__file__).resolve().parents[1]


def test_every_key_claim_is_a_claim_and_shows_quantities_it_has():
    rows = load_headline(REPO)
    assert {r.paper for r in rows} == {"TASER", "DE"} and len(rows) >= 6
    claims = {c.id: c for c in load_claims(REPO / "notebooks" / "claims")}
    for row in rows:
        assert row.claim in claims, row.claim
        named = set(claims[row.claim].quantities)
        assert set(row.show) <= named, f"{row.claim}: shows {set(row.show) - named}, which the claim does not measure"
        assert 1 <= row.lead < len(row.show) or len(row.show) == 1


def test_ours_reads_the_group_asked_for_at_fixed_decimals():
    ours = "2-128: dist=0.6112, de=0.6014, ca=0.3449; 6-384: dist=0.8496, de=0.8547, ca=0.8928 (test MRR@10)"
    assert ours_numbers(ours) == {"dist": (0.6112, ""), "de": (0.6014, ""), "ca": (0.3449, "")}
    assert ours_numbers(ours, "6-384")["ca"] == (0.8928, "")
    assert ours_numbers(ours, "6-32") is None
    row = HeadlineRow("DE", "x", "says", "paper", "metric", {"dist": "DIST", "de": "DE", "ca": "CA"}, group="6-384",
                      digits=3)
    assert headline_ours(row, ours) == "DIST 0.850 vs DE 0.855, CA 0.893"
    two = HeadlineRow("DE", "x", "s", "p", "m", {"dist": "DIST", "de": "DE", "ca": "CA"}, lead=2, digits=2)
    assert headline_ours(two, ours) == "DIST 0.61, DE 0.60 vs CA 0.34"
    params = HeadlineRow("TASER", "x", "s", "p", "m", {"taser": "TASER", "dpr": "DPR"})
    assert headline_ours(params, "taser=127.8M, dpr=217.8M (parameters)") == "TASER 127.8M vs DPR 217.8M"
    assert headline_ours(params, "squad-open: taser=64 (x)") == "not run"  # a quantity missing: not half a row
    assert headline_ours(params, "") == "not run"


def test_the_section_links_each_verdict_to_its_claim_and_names_the_rerun():
    card = pd.DataFrame([{"id": "T1-a", "notebook": "taser_in_domain", "ours (cpu)": "squad-open: taser=63.82, "
                          "dpr=63.76 (%)", "verdict (cpu)": "within noise"}])
    row = HeadlineRow("TASER", "T1-a", "TASER on par with DPR", "83.6 vs 82.5 (NQ, R@20 of 21M)",
                      "SQuAD-open, R@1 of 3.5k", {"taser": "TASER", "dpr": "DPR"})
    text = headline_section(card, [row], {"TASER": "TASER (Cheng et al., 2023)"}, "cpu")
    line = next(ln for ln in text.splitlines() if ln.startswith("| Cheng et al."))
    assert "TASER 63.8 vs DPR 63.8 (SQuAD-open, R@1 of 3.5k)" in line
    assert 'href="../notebooks/taser_in_domain.html#claim-T1-a">within noise</a>' in line
    assert "taser reproduce --profile cpu --only PAGE" in text
    with pytest.raises(ConfigError, match="T1-b"):
        headline_section(card, [HeadlineRow("TASER", "T1-b", "s", "p", "m", {"taser": "T"})], {}, "cpu")


@pytest.mark.parametrize("text, message", [
    ("TASER:\n  - {claim: a, says: b, paper: c, metric: d}\n", "headline.yaml:2: field 'show' missing"),
    ("TASER:\n  - {claim: a, says: b, paper: c, metric: d, show: {x: X}, colour: red}\n",
     "headline.yaml:2: field 'colour' unknown"),
    ("TASER:\n  - {claim: a, says: b, paper: c, metric: d, show: {x: X}, digits: two}\n",
     "headline.yaml:2: field 'digits' expected int"),
    ("TASER: a claim\n", "headline.yaml:1: field 'TASER' expected a list"),
    ("- a\n", "headline.yaml:1: expected a mapping"),
])
def test_a_malformed_headline_names_the_file_line_and_field(tmp_path, text, message):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "headline.yaml").write_text(text)
    with pytest.raises(FormatError, match=re.escape(message)):
        load_headline(tmp_path)


def test_the_scorecard_puts_each_papers_claims_before_the_guide_and_the_preconditions(tmp_path):
    from taser_book.scorecard import write_scorecard_page

    out = tmp_path / "scorecard.md"
    write_scorecard_page(REPO / "results", out, root=REPO)
    headings = [ln for ln in out.read_text().splitlines() if ln.startswith("## ")]
    assert headings[0] == "## Summary"
    papers = [h for h in headings if h not in ("## Summary", "## How to read the verdicts", "## Preconditions")]
    assert papers and headings.index(papers[-1]) < headings.index("## How to read the verdicts")
    if "## Preconditions" in headings:
        assert headings.index("## How to read the verdicts") < headings.index("## Preconditions")


def test_a_verdict_that_needs_a_precondition_names_it_in_words_and_links_its_row():
    from taser_book.claims import load_preconditions
    from taser_book.scorecard import precondition_anchor, precondition_clause, verdict_in_words

    pres = load_preconditions(REPO / "notebooks" / "claims")
    assert precondition_clause("The wall clock was quiet enough to compare epoch times: for TASER (x)") == \
        "the wall clock was quiet enough to compare epoch times"
    assert precondition_clause("DE-trained: x") == "DE-trained"  # an acronym keeps its case
    name = next(iter(pres))
    shown = verdict_in_words(f"not testable here: needs {name} · stale", pres)
    assert f'href="#{precondition_anchor(name)}"' in shown and precondition_clause(pres[name].statement)[:20] in shown
    assert shown.endswith("· stale")
    assert verdict_in_words("holds (p = 0.002)", pres) == "holds (p = 0.002)"
