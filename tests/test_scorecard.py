"""The claims files (notebooks/claims/*.yaml), their loader, the verdicts and the scorecard page."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from taser_book.claims import claims_files, load_claims, load_claims_file, load_claims_files, load_papers
from taser_lib.errors import ConfigError, FormatError
from taser_lib.evaluation.significance import paired_t_test, randomisation_test
from taser_book.results import save_result
from taser_book.scorecard import (ERROR, FAILS, HOLDS, NO_NOISE, NOT_RUN, NOT_TESTABLE, PLANNED, WITHIN_NOISE,
                                  build_scorecard, evaluate_claim, notebook_claims, profiles_with_results,
                                  write_scorecard_page)
from taser_book.scorecard import publish as publish_page

REPO = Path(__file__).resolve().parents[1]
CLAIMS_DIR = REPO / "notebooks" / "claims"

# The 56 claims of the scorecard as it stood before the claims moved into data files: none may get lost or renamed.
IDS_BEFORE_THE_MOVE = """
T-A3-params T-A1-params-shared T-A1-params-experts T1-taser-vs-dpr TA2-taser-vs-dpr-r100 T1-hybrid-beats-both
T1-dpr-below-bm25-squad T1-dpr-above-bm25-others T1-cocondenser-beats-bm25 T1-cocondenser-squad T1-hybrid-boost
T1-hybrid-gain-smaller T1-train-with-squad T-epoch-time TA1-shared-beats-dpr TA1-specialisation TA1-det-best
TA1-seq-beats-tok TA1-two-experts-enough TA1-hard-negatives TA1-hn-beats-dpr T2-eq-beats-dpr T2-eq-bm25-gap
TA4-eq-micro T2-beir-beats-dpr T2-beir-matches-bm25 T2-cocondenser-hotpotqa T2-offline-ood D-T2-train-match
D-T2-test-gap D-F1-overfit D-F1-distillation-closes-gap D-F1-distillation-train D-F2-diffuse-negatives
D-F5-diffuse-train D-F2-smaller-margins D-F8-distilled-margins D-F6-baseline-shift D-T1-ca-beats-de
D-T1-mse-underperforms D-T1-margin-mse D-T1-ours-best D-T1-distillation-beats-onehot D-T1-retrieval
D-T1-dl19-margin-mse D-T45-small-students D-T6-num-docs D-T7-colbert D-T7-colbert-beats-teacher
D-T8-label-smoothing D-T9-regularisers D-T12-negative-mining D-F4-gap-widens D-F4-distillation D-P1-svd
D-P3-sce-margin-mse
""".split()
# Claims added since, with the notebooks that produce them (issues 11 and 12): the scorecard lists these too.
IDS_ADDED = """
T-train-memory TA2-hybrid-helps-both D-T6-k20-over-k2 D-F2-distilled-margins D-T12-negatives-help-retrieval
D-P3-kl-entropy D-T3-disagreements-are-negatives D-T3-disagreements-overlap D-F2-diffuse-within D-F2-overlap
D-F7-early-peak D-F7-distilled-sharper X1-distill-beats-one-hot-rerank X2-distill-beats-taser-retrieval
X3-m3se-vs-softmax-ce TA1-det-best-i4 TA1-seq-beats-tok-i4 D-T1-ours-beat-rankdistil D-F2-diffuse-scale-free TA1-shared-not-worse D-T12-negatives-distilled
""".split()

PAPERS = "A: Paper A (2024)\nB: Paper B\n"


# ------------------------------------------------------------------------------------------------ helpers

def make_repo(tmp_path: Path, claims: dict[str, str], notebooks: tuple[str, ...] = ()) -> Path:
    """A repository root with notebooks/claims/<name>.yaml and empty notebooks/<name>.ipynb files."""
    root = tmp_path / "repo"
    folder = root / "notebooks" / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_papers.yaml").write_text(PAPERS)
    for name, text in claims.items():
        (folder / f"{name}.yaml").write_text(textwrap.dedent(text))
    for name in notebooks:
        write_notebook(root / "notebooks" / f"{name}.ipynb", f"# {name}")
    return root


def write_notebook(path: Path, source: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, path)


def publish(root: Path, profile: str, notebook: str, table: str, frame: pd.DataFrame) -> Path:
    """A result as a notebook run would leave it, recorded against the notebook so that it is not stale."""
    folder = root / "results" / profile / notebook
    save_result(folder, table, frame, {"profile": profile}, notebook=root / "notebooks" / f"{notebook}.ipynb")
    return folder


def verdicts(root: Path, profile: str = "cpu") -> dict[str, object]:
    claims = load_claims(root / "notebooks" / "claims")
    return {c.id: evaluate_claim(c, root / "results" / profile, root=root) for c in claims}


# ------------------------------------------------------------------------------------------------ the claims files

def test_every_claims_file_parses_and_every_claim_survived_the_move():
    files = load_claims_files(CLAIMS_DIR)
    assert files and all(f.claims or f.preconditions for f in files)   # testbed: preconditions only
    claims = load_claims(CLAIMS_DIR)
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(IDS_BEFORE_THE_MOVE + IDS_ADDED)
    assert {c.paper for c in claims} == set(load_papers(CLAIMS_DIR)) == {"TASER", "DE", "BEYOND"}
    for claim in claims:
        assert claim.statement and claim.paper_numbers and claim.where, claim.id
        assert claim.unit, f"{claim.id} has no unit: the book would show its numbers bare"
        assert claim.notebook == Path(claim.source.rsplit(":", 1)[0]).stem
    # the pages that exist publish, and show their claims, from these files
    for name in ("taser_architecture", "baselines"):
        assert (REPO / "notebooks" / f"{name}.ipynb").is_file()
        module = (REPO / "taser_book" / "pages" / f"{name}.py").read_text()
        assert f'PAGE = "{name}"' in module and "publish(results_dir, PAGE" in module
        assert list(notebook_claims(name)["id"]) == [c.id for c in claims if c.notebook == name]


def _produced_metric_names() -> set[str]:
    """Every metric name the library's answer-recall functions produce (ir-measures names are checked apart)."""
    from taser_lib.data.types import Query
    from taser_lib.evaluation import KS, macro_micro_accuracy, top_k_accuracy

    queries = {"q1": Query("q1", "who?", answers=["x"], meta={"relation": "P1"}),
               "q2": Query("q2", "what?", answers=["y"], meta={"relation": "P2"})}
    hits = {"q1": [True] * max(KS), "q2": [False] * max(KS)}
    return set(top_k_accuracy(hits)) | set(macro_micro_accuracy(hits, queries))


def _is_known_metric(name: str, produced: set[str], documented: set[str]) -> bool:
    import ir_measures

    if name in produced or name in documented:
        return True
    try:
        ir_measures.parse_measure(name)
        return True
    except Exception:  # noqa: BLE001 - ir-measures raises several kinds on names it does not know
        return False


def test_every_metric_a_claim_reads_is_one_the_library_produces():
    produced = _produced_metric_names()
    assert {"macro R@20", "micro R@100", "R@20"} <= produced
    # the names the claims once used are not produced anywhere: the check would have caught them
    assert not _is_known_metric("R@20 macro", produced, set())
    assert not _is_known_metric("R@100 micro", produced, set())
    checked = 0
    for claims_file in load_claims_files(CLAIMS_DIR):
        for claim in claims_file.claims:
            quantities = [*claim.quantities.values(), *((claim.noise.quantities or {}).values() if claim.noise else [])]
            names = [q.where["metric"] for q in quantities if "metric" in q.where]
            if claim.over == "metric":
                names += list(claim.groups or ())
            for name in names:
                checked += 1
                assert _is_known_metric(str(name), produced, set(claims_file.metrics)), \
                    f"{claim.id} ({claims_file.path.name}) reads metric {name!r}, which nothing produces"
    assert checked > 50


# ------------------------------------------------------------------------------------------------ validation

GOOD = """\
claims:
  - id: X-1
    paper: A
    where: Table 1
    statement: a beats b
    paper_numbers: 2 vs 1
    table: t
    quantities:
      a: {model: a}
      b: {model: b}
    test: a > b
"""
EXACT = "    exact: the fixture's numbers\n"   # judged on its numbers alone (a claim with no noise test must say why)


@pytest.mark.parametrize("text, line, field, message", [
    (GOOD.replace("    paper: A\n", ""), 2, "X-1.paper", "is missing"),
    (GOOD.replace("    table: t\n", "    table: t\n    colour: red\n"), 8, "X-1.colour", "unknown field"),
    (GOOD.replace("test: a > b", "test: a > c"), 11, "X-1.test", "unknown name 'c'"),
    (GOOD.replace("test: a > b", "test: a + b"), 11, "X-1.test", "not a comparison"),
    (GOOD.replace("test: a > b", "test: __import__('os')"), 11, "X-1.test", "may be called"),
    (GOOD.replace("paper: A", "paper: C"), 3, "X-1.paper", "unknown paper 'C'"),
    (GOOD + "    groups: [x]\n", 12, "X-1.groups", "needs 'over'"),
    (GOOD.replace("a: {model: a}", "a: {model: [a, b]}"), 9, "X-1.quantities.a.model", "text or a number"),
    (GOOD.replace("      a: {model: a}", "      2a: {model: a}"), 9, "X-1.quantities.2a", "identifier"),
    (GOOD + "    noise: {key: query_id, test: wilcoxon, compare: [a > b]}\n", 12, "X-1.noise.test", "randomisation"),
    (GOOD + "    noise: {key: query_id, test: t-test, compare: [a + b]}\n", 12, "X-1.noise.compare", "one comparison"),
    (GOOD + "    noise: {test: t-test, compare: [a > b]}\n", 12, "X-1.noise.key", "is missing"),
    (GOOD + "    noise: {key: seed, test: t-test, compare: [a > b], alpha: 2}\n", 12, "X-1.noise.alpha", "between"),
    (GOOD + GOOD.split("claims:\n")[1], 12, "X-1.id", "duplicate id"),
    (GOOD.replace("    where: Table 1\n", "    where: Table 1\n    where: Table 2\n"), 5, "where", "twice"),
    (GOOD.replace("test: a > b", "test: a > b\n  - {"), None, None, "invalid YAML"),
    ("claims: {id: X}\n", 1, "claims", "must be a list"),
    ("preconditions:\n  p:\n    statement: s\n    table: t\n    quantities: {a: {model: a}}\n    test: a > 1\n"
     "    reads_trained_runs: sometimes\n" + GOOD, 7, "preconditions.p.reads_trained_runs", "true or false"),
])
def test_a_bad_claim_names_file_line_and_field(tmp_path, text, line, field, message):
    root = make_repo(tmp_path, {"nb": text})
    with pytest.raises(FormatError, match=message) as err:
        load_claims(root / "notebooks" / "claims")
    assert err.value.path == str(root / "notebooks" / "claims" / "nb.yaml")
    if line is not None:
        assert err.value.line == line
    if field is not None:
        assert err.value.field == field


def test_ids_are_unique_across_files(tmp_path):
    root = make_repo(tmp_path, {"one": GOOD, "two": GOOD})
    with pytest.raises(FormatError, match=r"duplicate id \(also in .*one.yaml:2\)") as err:
        load_claims(root / "notebooks" / "claims")
    assert err.value.path.endswith("two.yaml") and err.value.line == 2


def test_claims_files_skip_the_papers_file(tmp_path):
    root = make_repo(tmp_path, {"nb": GOOD})
    assert [p.name for p in claims_files(root / "notebooks" / "claims")] == ["nb.yaml"]
    loaded = load_claims_file(root / "notebooks" / "claims" / "nb.yaml")
    assert loaded.notebook == "nb" and [c.id for c in loaded.claims] == ["X-1"]
    claim = loaded.claims[0]
    assert claim.column == "value" and claim.noise is None and claim.source.endswith("nb.yaml:2")


# ------------------------------------------------------------------------------------------------ verdicts

DIRECTIONS = """\
claims:
  - id: P-params
    paper: A
    where: Table A3
    statement: small is at most 60% of big
    paper_numbers: 128M vs 218M
    table: params
    column: params
    quantities:
      small: {arch: taser, experts: 2}
      big: {arch: dpr}
    test: small / big <= 0.6
    exact: parameter counts
  - id: P-per-dataset
    paper: A
    where: Table 1
    statement: taser within half a point of dpr on every dataset
    paper_numbers: 83.6 vs 82.5
    table: retrieval
    quantities:
      taser: {model: taser, metric: R@20}
      dpr: {model: dpr, metric: R@20}
    test: taser >= dpr - 0.5
    exact: the fixture's numbers
    unit: test R@20, %
    over: dataset
  - id: P-needs-bm25
    paper: A
    where: Table 1
    statement: bm25 beats dpr on squad
    paper_numbers: 71.1 vs 67.0
    table: retrieval
    quantities:
      dpr: {model: dpr, metric: R@20}
      bm25: {model: bm25, metric: R@20}
    test: bm25 > dpr
    over: dataset
    groups: [squad-open]
"""
PLANNED_FILE = GOOD.replace("X-1", "F-1").replace("paper: A", "paper: B")


@pytest.fixture
def directions(tmp_path):
    root = make_repo(tmp_path, {"nb": DIRECTIONS, "future": PLANNED_FILE}, notebooks=("nb",))
    publish(root, "cpu", "nb", "params", pd.DataFrame({
        "arch": ["dpr", "taser", "taser"], "experts": [None, 2, 1], "params": [218_000_000, 128_000_000, 109_000_000]}))
    publish(root, "cpu", "nb", "retrieval", pd.DataFrame({
        "model": ["taser", "dpr", "taser", "dpr"], "dataset": ["squad-open", "squad-open", "nq", "nq"],
        "metric": ["R@20"] * 4, "value": [80.0, 70.0, 60.0, 70.0]}))
    publish(root, "smoke", "nb", "params", pd.DataFrame({
        "arch": ["dpr", "taser"], "experts": [None, 2], "params": [100, 90]}))
    return root


def test_verdicts_hold_fail_not_run_and_planned(directions):
    cpu = verdicts(directions, "cpu")
    assert cpu["P-params"].status == HOLDS and cpu["P-params"].ours == "small=128.0M, big=218.0M"
    assert cpu["P-params"].detail == f"{NO_NOISE}: exact (parameter counts)" and cpu["P-params"].p_value is None
    # per dataset: fails on nq (60 < 70 - 0.5), holds on squad-open
    assert cpu["P-per-dataset"].status == FAILS
    assert cpu["P-per-dataset"].detail.startswith("fails on nq")
    assert "squad-open: taser=80, dpr=70" in cpu["P-per-dataset"].ours
    assert cpu["P-per-dataset"].ours.endswith("dpr=70 (test R@20, %)")  # the unit once, after every group's numbers
    assert cpu["P-needs-bm25"].status == NOT_RUN            # the table has no bm25 row
    assert "squad-open" in cpu["P-needs-bm25"].detail
    assert cpu["F-1"].status == PLANNED                     # notebooks/future.ipynb does not exist
    smoke = verdicts(directions, "smoke")
    assert smoke["P-params"].status == FAILS                # 90 / 100 > 0.6
    assert smoke["P-per-dataset"].status == NOT_RUN         # no retrieval table at smoke
    assert "no result nb/retrieval" in smoke["P-per-dataset"].detail
    # once the notebook is written, its claims are no longer planned but not run
    write_notebook(directions / "notebooks" / "future.ipynb", "pass")
    assert verdicts(directions, "cpu")["F-1"].status == NOT_RUN
    assert not any(v.stale for v in cpu.values())


def test_a_claim_with_no_noise_test_and_no_exact_numbers_is_not_testable(directions):
    """A difference between trained models cannot be told from noise without a test: a claim that neither declares one
    nor says why its numbers are exact is not judged, and shows its numbers."""
    folder = directions / "notebooks" / "claims"
    text = (folder / "nb.yaml").read_text()
    (folder / "nb.yaml").write_text(text.replace("    exact: the fixture's numbers\n", ""))
    verdict = verdicts(directions)["P-per-dataset"]
    assert verdict.status == NOT_TESTABLE and verdict.detail.startswith(NO_NOISE)
    assert "squad-open: taser=80, dpr=70" in verdict.ours and verdict.observed == "needs a noise test"
    assert verdicts(directions)["P-params"].status == HOLDS    # exact: judged on its numbers alone
    (folder / "nb.yaml").write_text(text.replace("    exact: parameter counts\n", "    exact: parameter counts\n"
                                                 "    noise: {key: seed, test: t-test, compare: [small <= big]}\n"))
    with pytest.raises(FormatError, match="P-params.exact' a claim with a noise test is not exact") as err:
        load_claims(folder)
    assert err.value.path.endswith("nb.yaml") and err.value.line is not None


def test_malformed_tables_are_errors(tmp_path):
    root = make_repo(tmp_path, {"nb": GOOD}, notebooks=("nb",))
    publish(root, "cpu", "nb", "t", pd.DataFrame({"model": ["a", "a", "b"], "value": [1, 2, 0]}))
    verdict = verdicts(root)["X-1"]
    assert verdict.status == ERROR and verdict.detail.startswith("2 rows match a")
    publish(root, "cpu", "nb", "t", pd.DataFrame({"name": ["a", "b"], "value": [1, 0]}))
    assert verdicts(root)["X-1"].detail == "nb/t has no column model"


PER_QUERY = """\
claims:
  - id: N-1
    paper: A
    where: Table 1
    statement: taser beats dpr
    paper_numbers: 83.6 vs 82.5
    table: retrieval
    quantities:
      taser: {model: taser, metric: R@20}
      dpr: {model: dpr, metric: R@20}
    test: taser > dpr
    over: dataset
    noise:
      key: query_id
      test: randomisation
      table: per_query
      compare: [taser > dpr]
"""


def _per_query_result(root: Path, taser: np.ndarray, dpr: np.ndarray) -> None:
    queries = [f"q{i}" for i in range(len(taser))]
    long = pd.DataFrame({"model": ["taser"] * len(taser) + ["dpr"] * len(dpr), "dataset": "squad-open",
                         "metric": "R@20", "query_id": queries * 2, "value": np.concatenate([taser, dpr])})
    publish(root, "cpu", "nb", "per_query", long)
    means = long.groupby("model")["value"].mean()
    publish(root, "cpu", "nb", "retrieval", pd.DataFrame({
        "model": ["taser", "dpr"], "dataset": "squad-open", "metric": "R@20",
        "value": [means["taser"], means["dpr"]]}))


def test_a_paired_randomisation_test_decides_within_noise(tmp_path):
    root = make_repo(tmp_path, {"nb": PER_QUERY}, notebooks=("nb",))
    rng = np.random.default_rng(0)
    dpr = (rng.random(60) < 0.5).astype(float) * 100
    taser = dpr.copy()
    taser[:3] = 100.0 - taser[:3]              # a few queries differ, in both directions
    taser[3] = 100.0 if taser[3] == 0 else taser[3]
    _per_query_result(root, taser, dpr)
    keys = [f"q{i}" for i in range(60)]
    expected = randomisation_test(dict(zip(keys, taser)), dict(zip(keys, dpr)))
    assert expected.p_value >= 0.05
    verdict = verdicts(root)["N-1"]
    assert verdict.status == WITHIN_NOISE
    assert verdict.p_value == pytest.approx(expected.p_value)
    assert "paired randomisation test, alpha 0.05" in verdict.detail
    assert f"taser > dpr: within noise, observed taser < dpr, p = {expected.p_value:.3g} over 60 values of " \
           "'query_id'" in verdict.detail
    assert verdict.short == f"within noise: squad-open: taser < dpr (p = {expected.p_value:.2g})"  # its direction


def test_a_separated_difference_holds_or_fails(tmp_path):
    root = make_repo(tmp_path, {"nb": PER_QUERY}, notebooks=("nb",))
    dpr = np.zeros(40)
    taser = np.full(40, 100.0)
    taser[:5] = 0.0
    _per_query_result(root, taser, dpr)
    verdict = verdicts(root)["N-1"]
    assert verdict.status == HOLDS and verdict.p_value < 0.05
    _per_query_result(root, dpr, taser)         # the other way round: clearly worse
    verdict = verdicts(root)["N-1"]
    assert verdict.status == FAILS and verdict.p_value < 0.05


def test_a_missing_noise_table_is_not_run(tmp_path):
    root = make_repo(tmp_path, {"nb": PER_QUERY}, notebooks=("nb",))
    publish(root, "cpu", "nb", "retrieval", pd.DataFrame({
        "model": ["taser", "dpr"], "dataset": "squad-open", "metric": "R@20", "value": [2.0, 1.0]}))
    verdict = verdicts(root)["N-1"]
    assert verdict.status == NOT_RUN and "no noise table nb/per_query" in verdict.detail
    assert verdict.ours == "squad-open: taser=2, dpr=1"


SHARE = """\
claims:
  - id: B-1
    paper: B
    where: Table 3
    statement: most disagreement pairs are negatives
    paper_numbers: qualitative
    table: summary
    quantities:
      share: {statistic: negative_share}
    test: share > 0.5
    noise:
      key: query_id
      test: randomisation
      table: per_query
      quantities:
        share: {statistic: negative}
      compare: [share > 0.5]
"""


@pytest.mark.parametrize("negatives", [9, 6])
def test_a_share_against_a_constant_is_an_exact_sign_test(tmp_path, negatives):
    """A comparison with a number on one side flips the sign of each question's difference: over 0/1 values
    that is the exact two-sided binomial (sign) test."""
    from scipy.stats import binomtest
    root = make_repo(tmp_path, {"nb": SHARE}, notebooks=("nb",))
    indicator = [1.0] * negatives + [0.0] * (10 - negatives)
    publish(root, "cpu", "nb", "per_query", pd.DataFrame({
        "query_id": [f"q{i}" for i in range(10)], "statistic": "negative", "value": indicator}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"statistic": ["negative_share"],
                                                         "value": [negatives / 10]}))
    verdict = verdicts(root)["B-1"]
    expected = binomtest(negatives, 10, 0.5).pvalue
    assert verdict.p_value == pytest.approx(expected)
    assert verdict.status == (HOLDS if expected < 0.05 else WITHIN_NOISE)
    assert "over 10 values of 'query_id'" in verdict.detail


SEEDS = """\
claims:
  - id: S-1
    paper: B
    where: Figure 1
    statement: ca beats de on test at every size
    paper_numbers: 0.364 vs 0.310
    table: mrr
    quantities:
      ca: {model: ca, split: test}
      de: {model: de, split: test}
    test: ca > de
    over: size
    noise:
      key: seed
      test: t-test
      compare: [ca > de]
"""


def test_seeds_give_the_mean_and_a_paired_t_test(tmp_path):
    root = make_repo(tmp_path, {"nb": SEEDS}, notebooks=("nb",))
    ca = {"6-768": [0.36, 0.37, 0.35], "2-128": [0.30, 0.32, 0.28]}
    de = {"6-768": [0.30, 0.32, 0.31], "2-128": [0.31, 0.29, 0.30]}
    rows = [{"model": model, "size": size, "split": "test", "seed": seed, "value": v}
            for model, by_size in (("ca", ca), ("de", de)) for size, values in by_size.items()
            for seed, v in zip((1, 2, 3), values)]
    publish(root, "cpu", "nb", "mrr", pd.DataFrame(rows))
    verdict = verdicts(root)["S-1"]
    big = paired_t_test(dict(enumerate(ca["6-768"])), dict(enumerate(de["6-768"])))
    small = paired_t_test(dict(enumerate(ca["2-128"])), dict(enumerate(de["2-128"])))
    assert big.p_value < 0.05 <= small.p_value
    # 6-768 is separated and holds; 2-128 cannot be told apart over three seeds
    assert verdict.status == WITHIN_NOISE
    assert "6-768: ca=0.36, de=0.31" in verdict.ours         # the mean over seeds
    assert f"2-128: ca > de: within noise, observed ca > de, p = {small.p_value:.3g} over 3 values of 'seed'" \
        in verdict.detail
    assert "paired t-test" in verdict.detail and "±" in verdict.detail


def test_a_stale_result_is_marked(directions):
    assert not verdicts(directions)["P-params"].stale
    write_notebook(directions / "notebooks" / "nb.ipynb", "# edited since the result was made")
    verdict = verdicts(directions)["P-params"]
    assert verdict.status == HOLDS and "changed" in verdict.stale and verdict.short == "holds · stale"


def test_a_changed_figure_function_leaves_the_verdict_current_and_any_other_library_file_does_not(directions):
    meta_path = directions / "results" / "cpu" / "nb" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["library_files"] = {"taser_book/plots/retrieval.py": "0" * 64}     # a figure function changed since
    meta_path.write_text(json.dumps(meta))
    assert not verdicts(directions)["P-params"].stale
    meta["library_files"]["taser_lib/losses.py"] = "0" * 64               # a library file that computes numbers
    meta_path.write_text(json.dumps(meta))
    assert "taser_lib/losses.py" in verdicts(directions)["P-params"].stale


# ------------------------------------------------------------------------------------------------ the page

def test_the_page_shows_verdicts_per_profile(directions):
    page = directions / "scorecard.md"
    card = write_scorecard_page(directions / "results", page, root=directions)
    assert profiles_with_results(directions / "results") == ["smoke", "cpu"]
    assert list(card["id"]) == ["P-params", "P-per-dataset", "P-needs-bm25", "F-1"]
    text = page.read_text()
    assert "| profile | holds | fails | within noise | not testable here | not run | planned | stale | testable |" \
        in text
    assert "| smoke | 0 | 1 | 0 | 0 | 2 | 1 | 0 | 1 of 4 |" in text and "| cpu | 1 | 1 | 0 | 0 | 1 | 1 | 0 | 2 of 4 |" in text
    assert "## Paper A (2024)" in text and "## Paper B" in text and "### cpu" in text
    assert "| claim | verdict | ER | paper | ours |" in text
    assert ('| <a href="../notebooks/nb.html#claim-P-params">P-params</a> | holds |  | 128M vs 218M | '
            'small=128.0M, big=218.0M |') in text    # each claim links to its row on its page
    assert ":::{dropdown}" in text and "small is at most 60% of big." in text
    assert "issue" not in text.lower()
    # a stale result says so in the table and in the summary
    write_notebook(directions / "notebooks" / "nb.ipynb", "# edited")
    write_scorecard_page(directions / "results", page, root=directions)
    text = page.read_text()
    assert '| <a href="../notebooks/nb.html#claim-P-params">P-params</a> | holds · stale |' in text and \
        "| cpu | 1 | 1 | 0 | 0 | 1 | 1 | 2 | 2 of 4 |" in text


def test_the_page_without_results_lists_every_claim(tmp_path):
    page = tmp_path / "scorecard.md"
    card = write_scorecard_page(tmp_path / "nothing", page, root=REPO)
    assert sorted(card["id"]) == sorted(IDS_BEFORE_THE_MOVE + IDS_ADDED)
    assert set(card["verdict"]) <= {PLANNED, NOT_RUN}
    assert (card["verdict"] == PLANNED).sum() == sum(
        not (REPO / "notebooks" / f"{nb}.ipynb").is_file() for nb in card["notebook"])
    text = page.read_text()
    assert all(f'#claim-{i}">{i}</a> |' in text for i in IDS_BEFORE_THE_MOVE)
    assert "No profile has results yet" in text and "issue" not in text.lower()


def test_the_page_builds_with_sphinx(directions, tmp_path):
    """The generated Markdown is valid MyST for the book's extensions: no warning, the tables and dropdown render."""
    src = tmp_path / "site"
    src.mkdir()
    write_scorecard_page(directions / "results", src / "index.md", root=directions, link_pages=False)
    (src / "reproduce.md").write_text("---\norphan: true\n---\n# Reproducing\n")
    (src / "conf.py").write_text("extensions = ['myst_parser', 'sphinx_design']\n"
                                 "myst_enable_extensions = ['colon_fence']\nexclude_patterns = ['_build']\n")
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E", str(src), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    assert html.count("<table") == 1 + 2 * 2      # the summary, then a table per paper per profile
    assert "sd-dropdown" in html and "holds" in html and "P-per-dataset" in html


def test_notebook_claims_reads_the_notebooks_claims_file(directions):
    folder = directions / "results" / "cpu" / "nb"
    table = notebook_claims("nb", folder, root=directions)
    assert list(table.columns) == ["id", "where", "claim", "paper", "ours", "verdict", "ER", "detail"]
    assert list(table["id"]) == ["P-params", "P-per-dataset", "P-needs-bm25"]
    assert list(table["verdict"]) == [HOLDS, FAILS, NOT_RUN]
    assert notebook_claims("no_such_notebook", root=directions).empty


def test_publish_saves_a_pages_tables_then_judges_its_claims_on_them(directions):
    folder = directions / "results" / "cpu" / "nb2"
    (directions / "notebooks" / "claims" / "nb2.yaml").write_text(GOOD.replace("X-1", "N-1") + EXACT)
    table = publish_page(folder, "nb2", {"t": pd.DataFrame({"model": ["a", "b"], "value": [2.0, 1.0]}),
                                         "extra": {"alpha": 0.5}},
                         parameters={"profile": "cpu", "seed": 13}, table_parameters={"extra": {"source": "x"}},
                         root=directions)
    meta = json.loads((folder / "meta.json").read_text())
    assert set(meta["tables"]) == {"t", "extra"} and meta["parameters"] == {"profile": "cpu", "seed": 13,
                                                                             "source": "x"}
    assert meta["tables"]["t"]["parameters"] == {"profile": "cpu", "seed": 13}
    assert meta["tables"]["extra"]["parameters"] == {"source": "x"}
    assert list(table["id"]) == ["N-1"] and list(table["verdict"]) == [HOLDS]  # judged on the table just saved
    assert publish_page(folder, "no_claims_file", {"t": pd.DataFrame({"x": [1]})}, root=directions) is None
    with pytest.raises(ConfigError, match="does not save"):
        publish_page(folder, "nb2", {"t": pd.DataFrame({"x": [1]})}, table_parameters={"other": {}}, root=directions)


def test_a_new_notebook_needs_only_its_claims_file(directions):
    """No library edit: a claims file beside a new notebook is on the scorecard."""
    (directions / "notebooks" / "claims" / "extra.yaml").write_text(GOOD.replace("X-1", "E-1") + EXACT)
    write_notebook(directions / "notebooks" / "extra.ipynb", "pass")
    publish(directions, "cpu", "extra", "t", pd.DataFrame({"model": ["a", "b"], "value": [2.0, 1.0]}))
    card = build_scorecard(directions / "results", root=directions).set_index("id")
    assert card.loc["E-1", "verdict (cpu)"] == HOLDS and card.loc["E-1", "verdict (smoke)"] == NOT_RUN
    meta = json.loads((directions / "results" / "cpu" / "extra" / "meta.json").read_text())
    assert "tables" in meta


@pytest.mark.parametrize("meta", sorted((REPO / "results" / "cpu").glob("*/meta.json")), ids=lambda p: p.parent.name)
def test_committed_results_give_every_claim_a_verdict(meta):
    """A claims file must fit the tables its notebook writes at every profile: at `cpu` a table has one row per
    seed, which a claim without a noise section over `seed` cannot reduce to one number (it read `error`)."""
    table = notebook_claims(meta.parent.name, meta.parent)
    errors = table[table["verdict"].astype(str).str.startswith(ERROR)]
    assert errors.empty, errors[["id", "detail"]].to_string()


def test_judging_on_several_processes_gives_the_same_scorecard(directions):
    """`taser book` judges the claims of different pages in parallel; the verdicts must not depend on it."""
    (directions / "notebooks" / "claims" / "extra.yaml").write_text(GOOD.replace("X-1", "E-1") + EXACT)
    write_notebook(directions / "notebooks" / "extra.ipynb", "pass")
    publish(directions, "cpu", "extra", "t", pd.DataFrame({"model": ["a", "b"], "value": [2.0, 1.0]}))
    serial = build_scorecard(directions / "results", root=directions, workers=1)
    parallel = build_scorecard(directions / "results", root=directions, workers=2)
    pd.testing.assert_frame_equal(serial, parallel)
    assert set(serial["notebook"]) >= {"extra"} and serial["notebook"].nunique() >= 2
