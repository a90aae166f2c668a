"""The book: its table of contents, and the built book checked in a real browser (headless Chromium).

The browser test runs every notebook at `smoke` into a temporary results folder (the checkout's results/ and _build/
are not touched), builds the book from them, serves it on 127.0.0.1 and opens every page. It needs the Debian
packages `chromium` and `chromium-driver`. It leaves a screenshot of a figure page in _build/screenshots/.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from taser_lib.reproduce import reproduce

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


# ------------------------------------------------------------------------------------------------ the built book

@pytest.fixture(scope="session")
def built_book(tmp_path_factory) -> Path:
    """Every notebook at smoke, then the book, in a temporary folder: once per session."""
    listed = toc_files()
    absent = [f for f in listed if f.startswith("notebooks/") and not (REPO / f"{f}.ipynb").is_file()]
    if absent:
        pytest.fail(f"_toc.yml lists notebooks that do not exist yet: {absent}")
    out = tmp_path_factory.mktemp("book")
    status = reproduce("smoke", root=REPO, results_root=out / "results", out_dir=out)
    assert status == 0, f"taser reproduce --profile smoke failed (see the summary above; log: {out}/_build/book.log)"
    html = out / "_build" / "html"
    assert (html / "index.html").is_file()
    return html


@pytest.fixture(scope="session")
def server(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
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
    # An explicit driver path: Selenium Manager (which would download drivers) is never consulted.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
    shutil.rmtree(profile_dir, ignore_errors=True)


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
};
"""


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
        if entry.startswith("notebooks/"):
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
    from taser_lib.scorecard import CLAIMS
    assert rows >= len(CLAIMS)
    assert urlparse(browser.current_url).path.endswith("scorecard.html")
