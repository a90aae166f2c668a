"""The book's ways in (taser_book/book.py): both papers' tables and figures on the front page, the chapter pages'
claims, each linked to the claim's anchor on its page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from taser_book.book import (PageVerdicts, PaperItem, chapter_verdicts, insert_before_heading, load_paper_items,
                             paper_refs, papers_section)
from taser_lib.errors import ConfigError
from taser_book.scorecard import claim_anchor

REPO = Path(__file__).resolve().parents[1]


def claims(*rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "where", "claim", "paper", "ours", "verdict", "ER", "detail"])


PAGE = PageVerdicts("cpu", claims(
    ("D-T2-gap", "Figure 1, Table 2", "CA beats DE on test", "0.36 vs 0.31", "ca=0.4", "holds (p = 0.01)", "", ""),
    ("D-T4-small", "Tables 4 and 5", "smaller students", "…", "x=1", "not testable here: needs ca-trained", "", ""),
))


def test_paper_refs_expand_lists_of_tables_and_figures():
    assert paper_refs("Tables 4 and 5 (MS MARCO)") == {("Table", "4"), ("Table", "5")}
    assert paper_refs("Table 1, Eq. 1, 4") == {("Table", "1")}          # equation numbers are not tables
    assert paper_refs("Tables 2 and A4; Figure 2 (right)") == {("Table", "2"), ("Table", "A4"), ("Figure", "2")}
    assert paper_refs("Table 12") == {("Table", "12")} and ("Table", "1") not in paper_refs("Table 12")
    assert paper_refs("Sec. 4.1") == set()


def test_the_papers_section_links_each_table_to_its_page_and_its_own_claims():
    titles = {"DE": "In defense"}
    items = [PaperItem("DE", "Table 2", "capacity", "de_capacity"), PaperItem("DE", "Table 5", "small", "de_capacity"),
             PaperItem("DE", "Figure 9", "none", "de_future")]
    text = papers_section(titles, items, {"de_capacity": PAGE})
    row2, row5, row9 = [line for line in text.split("\n") if line.startswith("| Table") or line.startswith("| Figure")]
    anchor = claim_anchor("D-T2-gap")
    assert f'href="../notebooks/de_capacity.html#{anchor}"' in row2 and "holds (p = 0.01)" in row2
    assert "D-T4-small" not in row2                                     # Table 2's row shows Table 2's claims
    assert "D-T4-small" in row5 and "not testable here" in row5 and "D-T2-gap" not in row5
    assert "de\\_future (not written yet)" in row9 and "not run yet" in row9
    assert "(both-papers)=" in text


def test_chapter_rows_get_their_claims_and_other_lines_stay():
    text = "\n".join(["intro |", "| notebook | reproduces | status |", "| --- | --- | --- |",
                      "| [Capacity](../notebooks/de_capacity.ipynb) | Table 2 | in this book |",
                      "| [Later](../notebooks/de_later.ipynb) | Table 9 | in this book |",
                      "| [Other](../notebooks/other.ipynb) | x | planned |"])
    out = chapter_verdicts(text, {"de_capacity": PAGE, "de_later": None}).split("\n")
    assert out[0] == "intro |" and out[1] == "| notebook | reproduces | claims and verdicts |"
    assert out[3].startswith("| [Capacity](../notebooks/de_capacity.ipynb) | Table 2 | `cpu`: <a href=")
    assert out[3].count("<a href=") == 2 and out[3].endswith(" |")      # every claim of the page, linked
    assert out[4].endswith("| not run yet |") and out[5] == "| [Other](../notebooks/other.ipynb) | x | planned |"


def test_a_page_of_preconditions_shows_them_in_its_chapter_row_and_under_its_title(tmp_path):
    import nbformat

    from taser_book.book import book_notebook

    pre = pd.DataFrame([{"precondition": "probe-ca-leads-de", "what it says": "the CA leads", "status": "not met",
                         "per setting": "squad-open, 200 questions: not met; wikiqa, all questions: met",
                         "measured": "gap=-0.5"}])
    page = PageVerdicts("cpu", claims(), pre)
    text = "| notebook | reproduces | status |\n| --- | --- | --- |\n| [Testbed](../notebooks/testbed.ipynb) | x | in this book |"
    row = chapter_verdicts(text, {"testbed": page}).split("\n")[2]
    assert "`cpu`, preconditions: <a href=" in row and f"#{claim_anchor('probe-ca-leads-de')}" in row
    assert row.endswith(" not met |")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Testbed\n\nWhat it probes."),
                                         nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell('notebook_preconditions("testbed", results_dir)',
                                                                   outputs=[nbformat.v4.new_output(
                                                                       "execute_result", data={"text/html": "<table>"},
                                                                       execution_count=1)])])
    nbformat.write(nb, tmp_path / "testbed.ipynb")
    book_notebook(tmp_path / "testbed.ipynb", tmp_path / "testbed.ipynb", tmp_path / "page.ipynb",
                  meta={"profile": "cpu"}, claims=claims(), preconditions=pre)
    cells = nbformat.read(tmp_path / "page.ipynb", as_version=4).cells
    title = cells[0].source
    assert f'<span id="{claim_anchor("probe-ca-leads-de")}"></span>' in title
    assert "| not met for squad-open, 200 questions — met for wikiqa, all questions |" in title
    same = pre.assign(status="met", **{"per setting": "a, 200: met; b, 200: met"})
    book_notebook(tmp_path / "testbed.ipynb", tmp_path / "testbed.ipynb", tmp_path / "same.ipynb",
                  meta={"profile": "cpu"}, claims=claims(), preconditions=same)
    assert "| met | met for all 2 settings |" in nbformat.read(tmp_path / "same.ipynb", as_version=4).cells[0].source
    assert title.index("Preconditions measured") < title.index("What it")
    # the notebook_preconditions(...) cell shows each precondition as an item, not a table of five prose columns
    assert cells[2].outputs[0]["data"]["text/markdown"] == (
        "- **probe-ca-leads-de** (not met for squad-open, 200 questions — met for wikiqa, all questions). "
        "the CA leads. Measured: gap=-0.5.")
    assert cells[1].outputs == []
    # a page module's cell (taser_book/pages) shows them the same way
    nb.cells[2].source = "page.preconditions()"
    nbformat.write(nb, tmp_path / "moved.ipynb")
    book_notebook(tmp_path / "moved.ipynb", tmp_path / "moved.ipynb", tmp_path / "moved-page.ipynb",
                  meta={"profile": "cpu"}, claims=claims(), preconditions=pre)
    moved = nbformat.read(tmp_path / "moved-page.ipynb", as_version=4).cells
    assert moved[2].outputs[0]["data"]["text/markdown"] == cells[2].outputs[0]["data"]["text/markdown"]


def test_sections_go_before_their_heading_or_at_the_end():
    page = "# Title\n\nText.\n\n## Citing\n\nCite."
    assert insert_before_heading(page, "## New\n\nX.") == "# Title\n\nText.\n\n## New\n\nX.\n\n## Citing\n\nCite."
    assert insert_before_heading("# Title", "## New", "## Absent") == "# Title\n\n## New\n"


def test_the_repository_lists_every_table_and_figure_of_both_papers():
    titles, items = load_paper_items(REPO)
    assert set(titles) == {"TASER", "DE"}
    notebooks = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    assert {i.notebook for i in items} <= notebooks
    listed = {(i.paper, ref) for i in items for ref in paper_refs(i.ref)}
    # the tables and figures the papers' captions number (../shared/papers/): TASER 1, 2, A1-A4 and Figure 1; the
    # dual-encoder paper's Figures 1-8 and Tables 1-12
    taser = {("Table", t) for t in ("1", "2", "A1", "A2", "A3", "A4")} | {("Figure", "1")}
    de = {("Table", str(t)) for t in range(1, 13)} | {("Figure", str(f)) for f in range(1, 9)}
    assert {r for p, r in listed if p == "TASER"} == taser
    assert {r for p, r in listed if p == "DE"} == de


@pytest.mark.parametrize("text, message", [
    ("DE: [unclosed", "papers.yaml:1: not valid YAML"),
    ("DE: {title: x}", "paper 'DE' needs a title and a list of items"),
    ("DE: {title: x, items: [{ref: Table 1, what: y}]}", "paper 'DE', item 1: field 'notebook' is missing"),
])
def test_a_malformed_papers_file_is_a_located_error(tmp_path, text, message):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "papers.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_paper_items(tmp_path)
    assert load_paper_items(tmp_path / "elsewhere") == ({}, [])
