"""A notebook run by hand (`papermill NB OUT` in a shell) says in the shell where its results went, or that it saved
none; under `taser reproduce` (TASER_REPRODUCE set for its kernels) the runner says it instead."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest

CELL = ("import pandas as pd\nfrom taser_book.scorecard import publish\n"
        "publish(results_dir, 'tiny', {'table': pd.DataFrame({'a': [1, 2]})})\n")


@pytest.mark.parametrize("saved", [False, True])
def test_papermill_by_hand_says_in_the_shell_where_the_results_went(tmp_path, saved):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("results_dir = None"),
                                         nbformat.v4.new_code_cell(CELL)])
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "results"
    extra = ["-p", "results_dir", str(out)] if saved else []
    env = {k: v for k, v in os.environ.items() if k != "TASER_REPRODUCE"}
    done = subprocess.run([sys.executable, "-m", "papermill", str(path), str(tmp_path / "out.ipynb"), *extra],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    shell = done.stdout + done.stderr
    if saved:
        assert f"taser: tiny: 1 table(s) saved in {out.resolve()}" in shell
        assert (out / "table.csv").is_file()
    else:
        assert "taser: tiny: results_dir is None, so nothing was saved" in shell
    quiet = subprocess.run([sys.executable, "-m", "papermill", str(path), str(tmp_path / "out2.ipynb"), *extra],
                           capture_output=True, text=True, env={**env, "TASER_REPRODUCE": "1"}, timeout=300)
    assert quiet.returncode == 0 and "taser: tiny:" not in quiet.stdout + quiet.stderr
