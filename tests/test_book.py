"""The book: its table of contents, the committed results, the pages as the book shows them, and the built book
checked in a real browser (headless Chromium).

Two browser tests, each serving a book built in a temporary folder on 127.0.0.1 (the checkout's results/ and _build/
are not touched):
- smoke: every notebook runs at `smoke`, then the book is built from those results, and every page is opened;
- committed: the book is built from a copy of the committed results/ (what a fresh clone shows, no notebook runs), and
  the scorecard's verdicts and every notebook page's figure are checked.
They need the Debian packages `chromium` and `chromium-driver`. The smoke test leaves a screenshot of a figure page
in _build/screenshots/.
"""

from __future__ import annotations

import ast
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pandas as pd
import pytest
import yaml

from taser_book.book import book_notebook, build_book, run_times
from taser_book.reproduce import reproduce
from taser_book.results import save_result

REPO = Path(__file__).resolve().parents[1]
FIRST_NOTEBOOKS = ("notebooks/taser_architecture", "notebooks/baselines")
# Loaded from a CDN only by pages with LaTeX math; offline, the math shows as TeX source and nothing else breaks.
ALLOWED_EXTERNAL = ("cdn.jsdelivr.net/npm/mathjax",)


def toc_files(node=None) -> list[str]:
    """Every `file:` (and the root) of _toc.yml, in order."""
    if node is None:
        node = yaml.safe_load((REPO / "_toc.yml").read_text())
        return [node["root"], *toc_files(node)]
    found = []
    if isinstance(node, dict):
        if "file" in node:
            found.append(node["file"])
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []):
                found += toc_files(child)
    return found


def test_toc_lists_every_notebook_and_every_entry_exists():
    listed = toc_files()
    assert len(listed) == len(set(listed)), "a page is listed twice in _toc.yml"
    for entry in FIRST_NOTEBOOKS:
        assert entry in listed
    notebooks = {f"notebooks/{p.stem}" for p in (REPO / "notebooks").glob("*.ipynb")}
    assert not notebooks - set(listed), f"notebooks missing from _toc.yml: {sorted(notebooks - set(listed))}"
    missing = [f for f in listed if not any((REPO / f"{f}{ext}").is_file() for ext in (".md", ".ipynb"))]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"


def test_book_config_stays_offline():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"  # notebooks run through `taser reproduce` only
    launch = config["launch_buttons"]
    assert not launch["thebe"] and not any(launch[k] for k in ("binderhub_url", "jupyterhub_url", "colab_url"))
    assert not any(config["html"]["analytics"].values())
    assert not any(config["html"]["comments"].values())


# ------------------------------------------------------------------------------------------------ committed results

RESULTS_LIMIT_BYTES = 25 * 2 ** 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def _committed_results() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", "results"], cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    return [f for f in out.stdout.split("\0") if f]


_FIGURE_CALL = re.compile(r"\b(?:plot|draw)_\w+\(")


def test_every_figure_cell_of_a_current_page_shows_its_figure():
    """A committed page made with the current code shows a figure for every cell that draws one (since 446e978 the
    pages showed only their first figure cell, unnoticed: nothing looked for the others)."""
    from taser_book.runner import page_stale_reason

    undrawn = []
    for executed in sorted((REPO / "results").glob("*/*/notebook.ipynb")):
        if executed.parts[-3] in ("smoke",) or page_stale_reason(executed.parent, REPO):
            continue
        for index, cell in enumerate(nbformat.read(executed, as_version=4).cells):
            if cell.cell_type == "code" and _FIGURE_CALL.search(cell.source) and not any(
                    "image/png" in output.get("data", {}) for output in cell.get("outputs", [])):
                undrawn.append(f"{executed.relative_to(REPO)} cell {index}")
    assert not undrawn, "cells that draw a figure but show none:\n" + "\n".join(undrawn)


def test_every_missing_value_a_committed_page_shows_says_why():
    """A table cell without a value shows as "–" (never NaN or <NA>), and the page's sentence in
    book/missing_values.yaml says why under the table; a committed page whose tables have such cells needs one."""
    from taser_book.executed import _clean_outputs, load_missing_value_notes

    notes = load_missing_value_notes(REPO)
    unexplained = []
    for executed in sorted((REPO / "results").glob("*/*/notebook.ipynb")):
        if executed.parts[-3] == "smoke":
            continue
        for index, cell in enumerate(nbformat.read(executed, as_version=4).cells):
            if cell.cell_type != "code":
                continue
            shown = json.dumps(_clean_outputs(json.loads(json.dumps(cell.get("outputs", []))),
                                              notes.get(executed.parent.name)), ensure_ascii=False)
            if "missing-note" in shown and executed.parent.name not in notes:
                unexplained.append(f"{executed.relative_to(REPO)} cell {index}")
    assert not unexplained, ("tables with missing values and no sentence in book/missing_values.yaml saying why:\n"
                             + "\n".join(unexplained))
    stray = sorted(set(notes) - {p.stem for p in (REPO / "notebooks").glob("*.ipynb")})
    assert not stray, f"book/missing_values.yaml names pages that do not exist: {stray}"


def test_committed_results_stay_small_and_hold_no_weights():
    files = _committed_results()
    weights = [f for f in files if f.endswith(WEIGHT_SUFFIXES)]
    assert not weights, f"model weights committed under results/: {weights[:5]}"
    size = sum((REPO / f).stat().st_size for f in files if (REPO / f).is_file())
    assert size <= RESULTS_LIMIT_BYTES, f"results/ holds {size / 2 ** 20:.1f} MB in git, over the 25 MB limit"
    # CI's smoke output and interrupted or failed runs are never committed
    stray = [f for f in files if f.startswith("results/smoke/") or "/.staging/" in f or "/_failed/" in f]
    assert not stray, f"these do not belong in git: {stray[:5]}"


def test_gitignore_publishes_results_but_not_weights_or_runs():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO).returncode == 0

    for published in ("results/cpu/baselines/retrieval.csv", "results/cpu/baselines/notebook.ipynb",
                      "results/gpu/baselines/meta.json", "results/bench/encoding.json", "results/cpu/reproduce_log.json"):
        assert not ignored(published), f"{published} would not be committed"
    for private in ("results/smoke/baselines/meta.json", "results/cpu/.staging/x/meta.json",
                    "results/cpu/_failed/baselines.ipynb", "results/cpu/.reproduce_log.json.lock",
                    "results/cpu/run/model.safetensors", "runs/cache/x",
                    ".cache/data/squad-open/corpus.jsonl", "results/bench-quick/encoding.json"):
        assert ignored(private), f"{private} would be committed"


READER_CANNOT_SEE = re.compile(r"\bissues?\b|targets? of the", re.IGNORECASE)


def test_pages_speak_only_of_what_a_reader_sees():
    found = []
    for path in sorted((REPO / "book").glob("*.md")) + sorted((REPO / "notebooks").glob("*.ipynb")):
        if path.suffix == ".ipynb":
            texts = [c.source for c in nbformat.read(path, as_version=4).cells]
        else:
            texts = [path.read_text()]
        found += [f"{path.relative_to(REPO)}: ...{m.string[max(0, m.start() - 40):m.end() + 40]}..."
                  for text in texts for m in READER_CANNOT_SEE.finditer(text)]
    assert not found, "pages mention what a reader cannot see:\n" + "\n".join(found)


def test_set_up_cells_are_collapsed():
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        assert cells[0].cell_type == "markdown" and cells[0].source.startswith("# "), f"{path.name}: claim first"
        params = [c for c in cells if "parameters" in c.metadata.get("tags", [])]
        assert params and "hide-input" in params[0].metadata["tags"], f"{path.name}: parameters cell not collapsed"
        first_code = next(c for c in cells if c.cell_type == "code" and c not in params)
        assert "hide-input" in first_code.metadata.get("tags", []), f"{path.name}: set-up cell not collapsed"


VISIBLE_CELL_LINES = 3  # a visible cell is one short library call and its result; longer code collapses


def test_visible_cells_are_short_calls():
    """The page shows the argument, not the plumbing: a code cell a reader sees unfolded is at most
    VISIBLE_CELL_LINES lines; training loops, reshaping and labelling collapse behind "show code"."""
    long = []
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type == "code" and not tags & {"hide-input", "remove-input", "remove-cell"}:
                lines = cell.source.strip().count("\n") + 1
                if lines > VISIBLE_CELL_LINES:
                    long.append(f"{path.name} cell {i}: {lines} lines")
    assert not long, "visible cells longer than a short call:\n" + "\n".join(long)


def _shows_one_call(source: str) -> bool:
    """A visible cell is one call whose result the page shows (a figure, a table): not a bare name (`cutoffs`), not
    a statement (an `if`, an assignment), not several."""
    body = ast.parse(source).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Call)


def test_a_visible_cell_is_one_call_that_shows_its_result():
    found = []
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type == "code" and not tags & {"hide-input", "remove-input", "remove-cell"} \
                    and not _shows_one_call(cell.source):
                found.append(f"{path.name} cell {i}: {cell.source[:60]!r}")
    assert not found, "visible cells that are not one call (collapse them, or make them one):\n" + "\n".join(found)
    assert not _shows_one_call("cutoffs") and not _shows_one_call("if x:\n    show(x)")
    assert not _shows_one_call("table = wide_table(x)") and _shows_one_call("wide_table(x)")


RESHAPING = re.compile(r"\.(pivot_table|pivot|assign|map|groupby|agg|drop|rename|set_index|reset_index|melt|round|div|"
                       r"query|sort_values|apply|isin)\(|\[[^\]]*==")


def test_visible_cells_do_not_reshape_tables():
    """Reshaping and labelling live in library helpers (`taser_book.tables.wide` and the page's own modules): a
    visible cell calls one and shows its result, so a reader sees the argument, not pandas."""
    found = []
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type == "code" and not tags & {"hide-input", "remove-input", "remove-cell"}:
                found += [f"{path.name} cell {i}: {m.group(0)}" for m in RESHAPING.finditer(cell.source)]
    assert not found, "visible cells reshape tables:\n" + "\n".join(found)


# ------------------------------------------------------------------------------------------------ the pages

def _executed(tmp_path, outputs_by_cell):
    """A source notebook (claim, tagged parameters and set-up cells) and an 'executed' copy with given outputs."""
    source = nbformat.v4.new_notebook()
    source.cells = [nbformat.v4.new_markdown_cell("# A claim\n\nThe paper says so."),
                    nbformat.v4.new_code_cell("profile = 'smoke'\nresults_dir = None",
                                              metadata={"tags": ["parameters", "hide-input"]}),
                    nbformat.v4.new_code_cell("import x", metadata={"tags": ["hide-input"]}),
                    nbformat.v4.new_code_cell("compute()")]
    executed = nbformat.from_dict(json.loads(json.dumps(source)))
    executed.cells[2].metadata["tags"] = []          # run before the cell was tagged: the source's tags win
    executed.cells.insert(2, nbformat.v4.new_code_cell("profile = 'cpu'", metadata={"tags": ["injected-parameters"]}))
    for index, outputs in outputs_by_cell.items():
        executed.cells[index].outputs = [nbformat.from_dict(o) for o in outputs]
    (tmp_path / "notebooks").mkdir()
    nbformat.write(source, tmp_path / "notebooks" / "nb.ipynb")
    nbformat.write(executed, tmp_path / "executed.ipynb")
    return tmp_path / "notebooks" / "nb.ipynb", tmp_path / "executed.ipynb"


def test_book_pages_drop_stderr_progress_bars_and_collapse_set_up(tmp_path):
    stream = lambda name, text: {"output_type": "stream", "name": name, "text": text}  # noqa: E731
    source, executed = _executed(tmp_path, {
        3: [stream("stderr", "UserWarning: something\n  warnings.warn(\n")],
        4: [stream("stderr", "encode: 50%|#####     | 1/2 [00:01<00:01, 1.0it/s]\r"),
            stream("stdout", "training 10%|#         | 1/10\rtraining 100%|##########| 10/10\nalpha = 1.1\n"),
            stream("stdout", "  3%|3         | 1/30 [00:00<00:02, 12.1it/s]\n"),
            {"output_type": "execute_result", "execution_count": 1, "metadata": {},
             "data": {"text/plain": "   a\n0  1"}}],
    })
    out = tmp_path / "page.ipynb"
    meta = {"profile": "cpu", "wall_seconds": 150.0, "start_time_utc": "2025-01-02T03:04:05+00:00",
            "hardware": {"summary": "Some CPU (2 cores)"}, "git_revision": "0123456789abcdef+dirty"}
    book_notebook(source, executed, out, stale="notebook notebooks/nb.ipynb changed since the result was made",
                  meta=meta)
    nb = nbformat.read(out, as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    # the notebook's own defaults leave the page (the injected cell says what ran); the injected cell and the set-up
    # cell, whose warnings (stderr) are gone, show nothing: one collapsed cell, one "show code" bar
    assert not any("parameters" in t for t in tags) and len(nb.cells) == 3
    assert "hide-input" in tags[1] and "injected-parameters" in tags[1] and nb.cells[1].outputs == []
    assert nb.cells[1].source == "profile = 'cpu'\n\nimport x"
    assert tags[2] == []
    kinds = [(o["output_type"], o.get("text")) for o in nb.cells[2].outputs]
    assert kinds == [("stream", "alpha = 1.1\n"), ("execute_result", None)]  # what a terminal shows, bars aside
    head = nb.cells[0].source
    assert head.startswith("# A claim\n")
    assert "profile `cpu`, 2025-01-02, 2.5 min on Some CPU (2 cores), revision `0123456789ab+dirty`" in head
    assert "```{admonition} Stale result\n:class: warning" in head and "notebooks/nb.ipynb changed" in head
    assert "taser reproduce --profile cpu --only nb" in head
    assert head.index("admonition") < head.index("The paper says so.")

    book_notebook(source, None, out)                                  # never run: the source, saying so
    nb = nbformat.read(out, as_version=4)
    assert "Not run yet" in nb.cells[0].source and "Stale" not in nb.cells[0].source


def test_a_cell_whose_code_changed_since_it_ran_keeps_its_tags_and_quiet_set_up_runs_merge(tmp_path):
    """An executed cell whose source is no longer in the notebook (a declared result-preserving change rewrote it)
    keeps the tags it ran with: the parameters and set-up cells stay collapsed rather than unfold on the page. Only
    consecutive collapsed cells that show nothing merge; one with an output stays a cell of its own."""
    source, executed = _executed(tmp_path, {})
    nb = nbformat.read(executed, as_version=4)
    nb.cells[3].source = "import x_as_it_was"             # set-up code since rewritten in the source
    nb.cells[3].metadata["tags"] = ["hide-input"]
    nb.cells.insert(4, nbformat.v4.new_code_cell("plot()", metadata={"tags": ["hide-input"]},
                                                 outputs=[nbformat.v4.new_output("stream", text="a figure\n")]))
    nb.cells.insert(5, nbformat.v4.new_code_cell("more_set_up()", metadata={"tags": ["hide-input"]}))
    nbformat.write(nb, executed)
    out = tmp_path / "page.ipynb"
    book_notebook(source, executed, out, meta={"profile": "cpu"})
    cells = nbformat.read(out, as_version=4).cells
    assert [c.source for c in cells[1:]] == ["profile = 'cpu'\n\nimport x_as_it_was", "plot()", "more_set_up()",
                                              "compute()"]
    assert all("hide-input" in c.metadata.get("tags", []) for c in cells[1:4]) and cells[4].metadata.get("tags",
                                                                                                         []) == []


def test_a_page_without_claims_gets_no_claims_footer(tmp_path):
    source, executed = _executed(tmp_path, {})
    nb = nbformat.read(executed, as_version=4)
    nb.cells[4].source = 'publish(results_dir, "nb", {"t": table})'
    nb.cells[4].metadata["tags"] = ["hide-input"]
    nb.cells[4].outputs = [nbformat.v4.new_output("stream", text="0 claims judged\n")]
    nbformat.write(nb, executed)
    out = tmp_path / "page.ipynb"
    book_notebook(source, executed, out, meta={"profile": "cpu"}, claims=pd.DataFrame(columns=["id", "verdict"]))
    cells = nbformat.read(out, as_version=4).cells
    assert not any("claims judged" in json.dumps(c.get("outputs", [])) for c in cells)
    assert cells[-1].source.endswith('publish(results_dir, "nb", {"t": table})')   # one quiet set-up bar with it


def test_run_times_table_lists_each_notebook_and_profile(tmp_path):
    source, _ = _executed(tmp_path, {})
    for profile, seconds in (("cpu", 600.0), ("smoke", 30.0)):
        folder = tmp_path / "results" / profile / "nb"
        save_result(folder, "t", {"a": 1}, notebook=source)
        meta = json.loads((folder / "meta.json").read_text())
        meta.update(profile=profile, wall_seconds=seconds, start_time_utc="2025-01-02T00:00:00+00:00")
        (folder / "meta.json").write_text(json.dumps(meta))
    (tmp_path / "results" / "bench").mkdir()                       # not a profile
    for package in ("taser_lib", "taser_book"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    table = run_times(tmp_path, tmp_path / "results")
    assert list(zip(table["profile"], table["minutes"])) == [("smoke", 0.5), ("cpu", 10.0)]
    assert set(table["date"]) == {"2025-01-02"} and table["machine"].str.contains("cores").all()
    assert list(table["up to date"]) == ["yes", "yes"]
    with open(tmp_path / "taser_lib" / "io.py", "a") as f:
        f.write("\n# edited\n")
    assert table.shape[0] == 2 and run_times(tmp_path, tmp_path / "results")["up to date"].str.startswith(
        "no: library file taser_lib/io.py changed").all()


def test_the_run_times_page_says_what_each_page_decides(tmp_path):
    import pandas as pd

    from taser_book.book import claims_judged, write_runs_page

    card = pd.DataFrame({"notebook": ["nb", "nb", "nb", "other"],
                         "verdict (cpu)": ["holds", "not testable here", "within noise", "fails"]})
    assert claims_judged(card, "nb", "cpu") == "2 of 3 judged (1 not testable here)"
    assert claims_judged(card, "other", "cpu") == "1 of 1 judged"
    assert claims_judged(card, "nb", "gpu") == claims_judged(card, "none", "cpu") == claims_judged(None, "nb", "cpu")
    assert claims_judged(None, "nb", "cpu") == "–"
    source, _ = _executed(tmp_path, {})
    save_result(tmp_path / "results" / "cpu" / "nb", "t", {"a": 1}, notebook=source)
    for package in ("taser_lib", "taser_book"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    write_runs_page(tmp_path, tmp_path / "results", tmp_path / "runs.md", card)
    row = next(line for line in (tmp_path / "runs.md").read_text().splitlines() if line.startswith("| [nb]"))
    assert "| 2 of 3 judged (1 not testable here) |" in row and row.endswith("| yes |")
    assert "Not up to date" not in (tmp_path / "runs.md").read_text()
    # a stale page: "no" in its row (a short column), and the reason in a list below the table
    with open(tmp_path / "taser_lib" / "io.py", "a") as f:
        f.write("\n# edited\n")
    write_runs_page(tmp_path, tmp_path / "results", tmp_path / "runs.md", card)
    lines = (tmp_path / "runs.md").read_text().splitlines()
    assert next(line for line in lines if line.startswith("| [nb]")).endswith("| no |")
    reasons = lines[lines.index("Not up to date, and why:") + 2:]
    assert reasons[0].startswith("- [nb](../notebooks/nb.ipynb): library file taser_lib/io.py changed")


def test_the_run_times_page_names_machines_without_trademark_marks():
    from taser_book.book import machine_label

    assert machine_label("Intel(R) Xeon(R) Processor (2 cores)") == "Intel Xeon Processor (2 cores)"
    assert machine_label("Intel(R) Core(TM) i7-8700 CPU (6 cores)") == "Intel Core i7-8700 CPU (6 cores)"
    assert machine_label("AMD EPYC (2 cores)") == "AMD EPYC (2 cores)"


def test_the_run_times_page_names_each_profiles_machine_once():
    import pandas as pd

    from taser_book.book import machines_sentence

    xeon, epyc = "Intel(R) Xeon(R) Processor (2 cores)", "AMD EPYC (2 cores)"
    rows = pd.DataFrame({"notebook": ["a", "b", "c"], "machine": [xeon, epyc, xeon]})
    assert machines_sentence(rows) == (
        "Every page below ran on Intel Xeon Processor (2 cores), except b (AMD EPYC (2 cores)).")
    assert machines_sentence(rows.iloc[[0, 2]]) == "Every page below ran on Intel Xeon Processor (2 cores)."
    assert machines_sentence(pd.DataFrame({"notebook": ["a"], "machine": [""]})) == (
        "Every page below ran on an unrecorded machine.")


# ------------------------------------------------------------------------------------------------ the built book

# The pages the smoke book runs through `taser reproduce` (papermill, result files, the book, Chromium): one of each
# kind (a figure drawn from a model's config; training a CA teacher and distilled students; BM25, dense and hybrid
# retrieval). nbval runs every notebook at smoke (make test's `notebooks`), and the committed-results book below
# renders every page, so running all of them here again would only repeat their evaluation.
SMOKE_BOOK_NOTEBOOKS = ["taser_architecture", "de_margins", "baselines"]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """SMOKE_BOOK_NOTEBOOKS at smoke, then the whole book, in a temporary folder: once per session."""
    listed = toc_files()
    absent = [f for f in listed if f.startswith("notebooks/") and not (REPO / f"{f}.ipynb").is_file()]
    if absent:
        pytest.fail(f"_toc.yml lists notebooks that do not exist yet: {absent}")
    out = tmp_path_factory.mktemp("book")
    # two kernels at a time, one core each (the pytest process only waits meanwhile)
    status = reproduce("smoke", only=SMOKE_BOOK_NOTEBOOKS, jobs=2, root=REPO, results_root=out / "results",
                       out_dir=out)
    assert status == 0, f"taser reproduce --profile smoke failed (see the summary above; log: {out}/_build/book.log)"
    html = out / "_build" / "html"
    assert (html / "index.html").is_file()
    return html


@pytest.fixture(scope="session")
def server(built_book):
    yield from _serve(built_book)


def _serve(folder: Path):
    handler = functools.partial(_QuietHandler, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("headless Chromium is needed: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile_dir = tempfile.mkdtemp(prefix="taser-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1600", f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for the no-error checks
    # An explicit driver path: Selenium Manager (which would download drivers) is never consulted.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile_dir, ignore_errors=True)


# Timers, paths of the machine that ran a notebook, echoed path objects, staging folders, pandas' missing-value marks
_DEBRIS = re.compile(r"\b\d+ s so far|PosixPath\(|\.staging|(?<![\w.])/(?:work|tmp|root|home)/|\bNaN\b|<NA>")
# Debris the notebooks printed until 2026-11-28: run-folder names (a hash means nothing to a reader), a dict's repr,
# pandas' cut-table footer. Checked on every page made since (a current page); a stale page keeps its old outputs
# until it is rerun, and the book marks it stale.
_DEBRIS_CURRENT = re.compile(r"\b(?:retriever|cross-encoder|distill|colbert)-[0-9a-f]{12}\b|\{'[^']+': |"
                             r"\b\d+ rows × \d+ columns")

# A printed data frame with more columns than the text column holds scrolls sideways inside its output (the pages'
# tests of significance: 12 columns), up to this many times the column's width; a number never splits over two lines.
WIDE_FRAME = 1.5

_PAGE_STATE = """
const imgs = Array.from(document.querySelectorAll('article img'));
return {
  title: document.title,
  h1: Array.from(document.querySelectorAll('article h1')).map(e => e.textContent.trim()),
  images: imgs.map(i => ({src: i.currentSrc || i.src, complete: i.complete, width: i.naturalWidth})),
  errors: document.querySelectorAll('.output.traceback, .output_error, .output.error').length,
  stderr: Array.from(document.querySelectorAll('.output.stderr')).map(e => e.textContent),
  outputs: document.querySelectorAll('.cell_output').length,
  external: Array.from(document.querySelectorAll('script[src], link[rel=stylesheet][href], img[src]'))
              .map(e => e.src || e.href).filter(u => !u.startsWith(location.origin)),
  wide: (() => { const art = document.querySelector('article'); if (!art) return [];
                 return Array.from(art.querySelectorAll('*'))
                   .filter(e => e.scrollWidth > art.clientWidth + 2 && getComputedStyle(e).overflowX !== 'visible')
                   .filter(e => !(e.querySelector('table.dataframe') && e.scrollWidth <= WIDE_FRAME * art.clientWidth))
                   .map(e => `${e.tagName}.${e.className} ${e.scrollWidth}px`); })(),
  split_numbers: (() => { const out = [];
                 document.querySelectorAll('article td, article th').forEach(cell => {
                   const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT); let node;
                   while ((node = walk.nextNode())) { const re = /[0-9]+(?:[.,][0-9]+)*/g; let m;
                     while ((m = re.exec(node.data))) { const r = document.createRange();
                       r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
                       if (r.getClientRects().length > 1) out.push(m[0]); } } });
                 return out; })(),
  raw_math: (() => { const t = (document.querySelector('article') || document.body).innerText, b = String.fromCharCode(92);
              return t.split(b + '(').length + t.split(b + '[').length - 2; })(),
  raw_math_nav: (() => { const n = document.querySelector('nav.bd-docs-nav'); if (!n) return 0;
                  const t = n.innerText, b = String.fromCharCode(92);
                  return t.split(b + '(').length + t.split('$').length - 2; })(),
  verdict_box: !!Array.from(document.querySelectorAll('article strong'))
                 .find(e => e.textContent.trim() === 'Claims and verdicts'),
};
""".replace("WIDE_FRAME", str(WIDE_FRAME))


@pytest.mark.slow
def test_book_pages_render_in_chromium(built_book, server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/index.html")  # the book's front door redirects to the root page
    WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith("/book/intro.html"))

    figure_page = None
    for entry in toc_files():
        url = f"{server}/{entry}.html"
        browser.get(url)
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        # wait for every image to finish (loaded or failed) before judging it
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('article img')).every(i => i.complete)"))
        state = browser.execute_script(_PAGE_STATE)
        assert "404" not in state["title"] and state["h1"], f"{url} did not render a page: {state['title']!r}"
        external = [u for u in state["external"] if not any(a in u for a in ALLOWED_EXTERNAL)]
        assert not external, f"{url} loads resources from outside the book: {external}"
        broken = [i["src"] for i in state["images"] if not i["complete"] or i["width"] == 0]
        assert not broken, f"{url}: images that did not load: {broken}"
        if entry.startswith("notebooks/") and entry.split("/", 1)[1] not in SMOKE_BOOK_NOTEBOOKS:
            text = browser.execute_script("return document.querySelector('article').textContent")
            assert "Not run yet" in text, f"{url} has no smoke result and does not say so"
        elif entry.startswith("notebooks/"):
            assert state["outputs"] > 0, f"{url} shows no cell output: the executed notebook was not used"
            assert state["errors"] == 0, f"{url} shows an error output"
            tracebacks = [t for t in state["stderr"] if "Traceback" in t]
            assert not tracebacks, f"{url} shows a traceback on stderr: {tracebacks[0][:300]}"
            if state["images"] and figure_page is None:
                figure_page = entry
                shots = REPO / "_build" / "screenshots"
                shots.mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(str(shots / f"{Path(entry).name}.png"))
    assert figure_page is not None, "no notebook page shows a figure"

    # The scorecard page is the generated one, with a row per claim.
    browser.get(f"{server}/book/scorecard.html")
    rows = browser.execute_script("return document.querySelectorAll('article table tbody tr').length")
    from taser_book.scorecard import CLAIMS
    assert rows >= len(CLAIMS)
    assert urlparse(browser.current_url).path.endswith("scorecard.html")


# ------------------------------------------------------------------------------------------------ committed results

BOOK_SECONDS_LIMIT = 60  # `taser book` on a fresh clone: every page with real numbers in under a minute


@pytest.fixture(scope="session")
def committed_book(tmp_path_factory) -> Path:
    """The book built from a copy of the committed results/, as on a fresh clone: no notebook runs."""
    # The cpu profile's results are committed by running `taser reproduce --profile cpu` and committing results/;
    # until a checkout holds them there is nothing to render, and this test says so instead of failing.
    # $TASER_BOOK_RESULTS tries the test on another results folder laid out the same way.
    results = Path(os.environ.get("TASER_BOOK_RESULTS", REPO / "results"))
    if not (results / "cpu").is_dir():
        pytest.skip(f"{results}/cpu is not committed yet: run `taser reproduce --profile cpu` and commit results/")
    out = tmp_path_factory.mktemp("committed")
    shutil.copytree(results, out / "results",
                    ignore=shutil.ignore_patterns(".staging", "_failed", "smoke", ".old-*", "bench-quick"))
    started = time.perf_counter()
    index = build_book(REPO, out / "results", out_dir=out)
    seconds = time.perf_counter() - started
    assert index.is_file()
    print(f"taser book on the committed results: {seconds:.1f} s")
    assert seconds < BOOK_SECONDS_LIMIT, f"building the book took {seconds:.0f} s, over {BOOK_SECONDS_LIMIT} s"
    return index.parent


@pytest.fixture(scope="session")
def committed_server(committed_book):
    yield from _serve(committed_book)


_VERDICT_WORDS = ("holds", "fails", "within noise")


@pytest.mark.slow
def test_committed_results_render_with_verdicts_and_figures(committed_book, committed_server, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    def load(entry: str) -> dict:
        browser.get(f"{committed_server}/{entry}.html")
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('article img')).every(i => i.complete)"))
        return browser.execute_script(_PAGE_STATE)

    browser.get_log("browser")  # the console so far belongs to other tests' books: start this book's with it empty
    # the scorecard shows verdicts computed from the committed results, not only "planned" / "not run"
    load("book/scorecard")
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('article table td')).map(e => e.textContent.trim())")
    verdicts = [c for c in cells if any(c.startswith(w) for w in _VERDICT_WORDS)]
    assert verdicts, "the scorecard shows no verdict (holds, fails, within noise) from the committed results"

    # every notebook page with a committed result (a profile other than CI's smoke) shows its executed outputs with
    # at least one figure that loaded; a page without one says that it has not been run yet
    for entry in toc_files():
        if not entry.startswith("notebooks/"):
            continue
        state = load(entry)
        assert "404" not in state["title"] and state["h1"], f"{entry} did not render"
        stem = entry.split("/", 1)[1]
        if not any((REPO / "results" / p / stem / "notebook.ipynb").is_file() for p in ("cpu", "gpu", "full")):
            text = browser.execute_script("return document.querySelector('article').textContent")
            assert "Not run yet" in text, f"{entry} has no committed result and does not say so"
            continue
        assert state["outputs"] > 0, f"{entry} shows no cell output: no committed result for it"
        loaded = [i for i in state["images"] if i["complete"] and i["width"] > 0]
        assert loaded, f"{entry} shows no figure"
        assert not state["stderr"], f"{entry} shows stderr output: {state['stderr'][0][:200]}"
        stem_claims = REPO / "notebooks" / "claims" / f"{stem}.yaml"
        if stem_claims.is_file() and "claims:" in stem_claims.read_text():
            assert state["verdict_box"], f"{entry} does not open with its claims and verdicts"

    # every page: no console error, math rendered offline (no raw TeX delimiters), nothing scrolls sideways
    from taser_book.runner import page_stale_reason

    def current(stem: str) -> bool:
        folders = [REPO / "results" / p / stem for p in ("cpu", "gpu", "full")]
        return any((f / "meta.json").is_file() and page_stale_reason(f, REPO) is None for f in folders)

    browser.get(f"{committed_server}/index.html")  # the root redirect too (it has no icon link: /favicon.ico)
    WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith("/book/intro.html"))
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"index.html: console errors {errors[:3]}"
    for entry in ["book/scorecard", *toc_files()]:
        state = load(entry)
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"{entry}: console errors {errors[:3]}"
        assert state["raw_math"] == 0, f"{entry} shows raw TeX ({state['raw_math']} delimiters)"
        assert state["raw_math_nav"] == 0, f"{entry}: the sidebar shows raw TeX (a title with math: write it in Unicode)"
        assert not state["wide"], f"{entry} has elements wider than the text column: {state['wide'][:3]}"
        assert not state["split_numbers"], f"{entry} splits numbers over two lines: {state['split_numbers'][:5]}"
        assert not state["external"], f"{entry} loads {state['external'][:3]} from outside the book"
        text = browser.execute_script(
            "return Array.from(document.querySelectorAll('article .cell_output')).map(e => e.innerText).join(' ')")
        debris = sorted({m.group(0) for m in _DEBRIS.finditer(text)})
        assert not debris, f"{entry} shows notebook debris: {debris[:5]}"
        if entry.startswith("notebooks/") and current(entry.split("/", 1)[1]):
            debris = sorted({m.group(0) for m in _DEBRIS_CURRENT.finditer(text)})
            assert not debris, f"{entry} shows notebook debris: {debris[:5]}"

    # every claim link of the scorecard, the front page and the chapter pages lands on that claim's row of an
    # existing page; from the front page, every table and figure of both papers is one click from its page
    from taser_book.book import load_paper_items

    targets: dict[str, set[str]] = {}
    for entry in ("book/scorecard", "book/intro", "book/taser", "book/dual_encoders"):
        load(entry)
        hrefs = browser.execute_script(
            "return Array.from(document.querySelectorAll('article a')).map(a => a.href)"
            ".filter(h => h.includes('#claim-'))")
        assert hrefs, f"{entry} links no claim to its page"
        for href in hrefs:
            page, _, anchor = href.partition("#")
            targets.setdefault(page, set()).add(anchor)
    for page, anchors in sorted(targets.items()):
        browser.get(page)
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
        assert "404" not in browser.title, f"a claim links to {page}, which does not exist"
        missing = [a for a in sorted(anchors) if not browser.execute_script(
            "return !!document.getElementById(arguments[0])", a)]
        assert not missing, f"{page} has no anchor for the claims linked to it: {missing[:5]}"
    _, items = load_paper_items(REPO)
    load("book/intro")
    linked = set(browser.execute_script(
        "return Array.from(document.querySelectorAll('article a')).map(a => a.pathname)"))
    unlinked = [f"{i.paper} {i.ref}" for i in items if f"/notebooks/{i.notebook}.html" not in linked]
    assert items and not unlinked, f"the front page does not link these tables and figures to a page: {unlinked}"

    # the generated run-times page lists the committed cpu runs
    load("book/runs")
    text = browser.execute_script("return document.querySelector('article').textContent")
    assert "cpu" in text and "minutes" in text


@pytest.mark.slow
def test_the_front_page_and_the_scorecard_show_the_claims_first(committed_book, committed_server, browser):
    """At 1280 x 900 the front page's key claims (book/headline.yaml) fit the first screen, each with a verdict that
    links to its claim; the scorecard's first claim row is within the first 1,500 px; at 390 x 844 neither page is
    wider than the screen."""
    from selenium.webdriver.support.ui import WebDriverWait

    from taser_book.book import load_headline

    def view(entry: str, width: int, height: int) -> None:
        browser.set_window_size(width, height)
        chrome = browser.execute_script("return [outerWidth - innerWidth, outerHeight - innerHeight]")
        browser.set_window_size(width + chrome[0], height + chrome[1])  # the viewport, not the window, at that size
        browser.get(f"{committed_server}/{entry}.html")
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")

    try:
        view("book/intro", 1280, 900)
        headline = browser.execute_script("""
            const t = document.querySelector('article .headline table'); if (!t) return null;
            const rows = Array.from(t.querySelectorAll('tbody tr'));
            return {bottom: t.getBoundingClientRect().bottom, height: innerHeight, rows: rows.length,
                    verdicts: rows.map(r => (r.querySelector('a[href*="#claim-"]') || {}).textContent || '')};""")
        assert headline is not None, "the front page has no table of key claims"
        assert headline["rows"] == len(load_headline(REPO))
        assert headline["bottom"] <= headline["height"], \
            f"the key claims end at {headline['bottom']:.0f} px, below the first screen ({headline['height']} px)"
        assert all(v.strip() for v in headline["verdicts"]), "a key claim has no verdict linked to its claim"
        view("book/scorecard", 1280, 900)
        first = browser.execute_script("""
            const a = Array.from(document.querySelectorAll('article table td a[href*="#claim-"]'))[0];
            return a ? a.getBoundingClientRect().top + scrollY : null;""")
        assert first is not None and first <= 1500, f"the scorecard's first claim row is at {first} px"
        for entry in ("book/intro", "book/scorecard"):
            view(entry, 390, 844)
            widths = browser.execute_script("return [document.documentElement.scrollWidth, innerWidth]")
            assert widths[0] <= widths[1], f"{entry} is {widths[0]} px wide on a {widths[1]} px screen"
    finally:
        browser.set_window_size(1280, 1600)


_FIT = """
const art = document.querySelector('article'); const column = art.clientWidth;
const wide = Array.from(art.querySelectorAll('table, img, svg, .cell_output pre'))
  .filter(e => e.getBoundingClientRect().width > column + 2 || e.scrollWidth > e.clientWidth + 2)
  .map(e => `${e.tagName}.${e.className} ${Math.round(Math.max(e.getBoundingClientRect().width, e.scrollWidth))}px`);
const split = [];
art.querySelectorAll('th').forEach(th => { const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT); let node;
  while ((node = walk.nextNode())) { const re = /[A-Za-z]+/g; let m;
    while ((m = re.exec(node.data))) { const r = document.createRange(); r.setStart(node, m.index);
      r.setEnd(node, m.index + m[0].length);
      if (Array.from(r.getClientRects()).filter(x => x.width > 0).length > 1) split.push(m[0]); } } });
return {page: document.documentElement.scrollWidth, screen: innerWidth, column, wide, split};
"""


@pytest.mark.slow
def test_every_page_fits_a_laptop_and_a_phone(committed_book, committed_server, browser):
    """At 1280 x 900 no table or figure is wider than the text column (none needs a scroll bar of its own); at
    390 x 844 no page is wider than the screen (a wide table scrolls inside itself) and no header word is split."""
    from selenium.webdriver.support.ui import WebDriverWait

    problems = []
    try:
        for width, height in ((1280, 900), (390, 844)):
            browser.set_window_size(width, height)
            chrome = browser.execute_script("return [outerWidth - innerWidth, outerHeight - innerHeight]")
            browser.set_window_size(width + chrome[0], height + chrome[1])
            for entry in toc_files():
                browser.get(f"{committed_server}/{entry}.html")
                WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
                found = browser.execute_script(_FIT)
                if width == 1280 and found["wide"]:
                    problems.append(f"{entry} at {width}: wider than the {found['column']}-px column: {found['wide']}")
                if found["page"] > found["screen"]:
                    problems.append(f"{entry} at {width}: the page is {found['page']} px on a {found['screen']} px screen")
                if found["split"]:
                    problems.append(f"{entry} at {width}: header words split over lines: {found['split']}")
    finally:
        browser.set_window_size(1280, 1600)
    assert not problems, "\n".join(problems)


def test_book_pages_drop_timers_paths_and_missing_value_marks():
    from taser_book.executed import _clean_outputs

    stream = {"output_type": "stream", "name": "stdout",
              "text": "teacher: cross-encoder-1; 3 s so far\nquestions compared: 500\nwall time 12 s\n"}
    table = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
             "data": {"text/plain": "run  /work/main/runs/cache/retriever-0cde  NaN",
                      "text/html": "<td>/tmp/x/runs/cache/retriever-0cde</td><td>NaN</td><td>&lt;NA&gt;</td>"}}
    echoed = {"output_type": "execute_result", "execution_count": 2, "metadata": {},
              "data": {"text/plain": "[PosixPath('../results/cpu/.staging/x/a.csv')]"}}
    kept = _clean_outputs(json.loads(json.dumps([stream, table, echoed])))
    assert len(kept) == 2 and kept[0]["text"].strip() == "questions compared: 500"
    assert kept[1]["data"]["text/plain"] == "run  retriever-0cde  –\n– no value (the page does not say why)"
    assert kept[1]["data"]["text/html"].startswith("<td>retriever-0cde</td><td>–</td><td>–</td>\n")
    # with the page's sentence from book/missing_values.yaml, under the table; a table without a gap gets none
    kept = _clean_outputs(json.loads(json.dumps([table])), "DPR has no <routing>.")
    assert kept[0]["data"]["text/plain"].endswith("\n– DPR has no <routing>.")
    assert kept[0]["data"]["text/html"].endswith('<p class="missing-note">– DPR has no &lt;routing&gt;.</p>\n')
    whole = {**table, "data": {"text/plain": "a  1", "text/html": "<td>1</td>"}}
    assert _clean_outputs([whole], "DPR has no routing.")[0]["data"] == {"text/plain": "a  1", "text/html": "<td>1</td>"}


def test_book_tables_drop_pandas_row_numbers_and_keep_a_real_index():
    import pandas as pd

    from taser_book.executed import _clean_outputs

    def shown(frame: pd.DataFrame) -> str:
        out = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
               "data": {"text/plain": frame.to_string(), "text/html": frame.to_html()}}
        return _clean_outputs([out])[0]["data"]["text/html"]

    numbered = pd.DataFrame({"model": ["CA", "DE"], "MRR@10": [0.849, 0.739]})
    html = shown(numbered)  # pandas' own RangeIndex: its column and the empty header cell above it go
    assert "<th>0</th>" not in html and "<th></th>" not in html
    assert re.findall(r"<th>(.*?)</th>", html) == ["model", "MRR@10"]
    assert "<td>CA</td>" in html and "<td>0.739</td>" in html
    # a real index stays: named, labelled, or numbers that are not the rows' own 0, 1, 2, ...
    for kept in (numbered.set_index("model"), numbered.rename_axis("row"), numbered.set_axis([1, 2]),
                 pd.DataFrame({"a": [1]}, index=pd.MultiIndex.from_tuples([(0, "x")]))):
        assert shown(kept) == kept.to_html(), kept


@pytest.mark.parametrize("text, message", [
    ("de_negatives: [a, b]\n", "page 'de_negatives': the note must be a non-empty sentence"),
    ("- a\n", "expected a mapping of page names"),
    ("a: 'unclosed\n", "missing_values.yaml:"),
])
def test_a_malformed_missing_values_file_is_a_located_error(tmp_path, text, message):
    from taser_book.executed import load_missing_value_notes
    from taser_lib.errors import ConfigError

    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "missing_values.yaml").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_missing_value_notes(tmp_path)


def test_every_reference_has_a_doi_or_a_url_and_names_in_unicode():
    """book/references.bib: each entry links to the work (a DOI, or a URL where the venue has none), and accented
    names are written in Unicode (pybtex's alpha labels mangle LaTeX accents: Baudi{\\v{s}} gave 'BaudivsvSedivy15')."""
    text = (REPO / "book" / "references.bib").read_text(encoding="utf-8")
    entries = re.split(r"(?m)^@", text)[1:]
    assert len(entries) >= 20
    for entry in entries:
        key = entry.split("{", 1)[1].split(",", 1)[0]
        assert re.search(r"(?m)^\s*(doi|url)\s*=\s*\{\S+\}", entry), f"{key}: no doi or url"
        assert not re.search(r"\\[\"'`^~vcu]", entry), f"{key}: a LaTeX accent (write the name in Unicode)"
