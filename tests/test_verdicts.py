"""Known answers for the verdict machinery: each test kind on synthetic tables where the claim is true, false,
equal or untestable, hand-computed p-values for small cases, preconditions, and the effect ratio."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from taser_book.claims import load_claims, load_claims_files
from taser_lib.errors import FormatError
from taser_lib.evaluation import randomisation_test
from taser_book.analyses import hypothesis
from taser_book.scorecard import (FAILS, HOLDS, NOT_TESTABLE, WITHIN_NOISE, build_scorecard, evaluate_claim,
                                 write_scorecard_page)
from test_scorecard import make_repo, publish


def judge(root: Path, profile: str = "cpu") -> dict:
    card = build_scorecard(root / "results", root=root)
    claims = load_claims(root / "notebooks" / "claims")
    return {c.id: evaluate_claim(c, root / "results" / profile, root=root) for c in claims} | {"_card": card}


# ------------------------------------------------------------------------------------------- hand-computed p-values

def test_one_sided_randomisation_is_exact_for_three_differences():
    # 8 sign patterns of (1, 2, 3); only the observed one has a mean >= 2
    assert hypothesis.one_sided([1.0, 2.0, 3.0], greater_than=0.0) == pytest.approx(1 / 8)
    assert hypothesis.one_sided([1.0, 2.0, 3.0], less_than=0.0) == pytest.approx(1.0)
    # shifted by a bound: d - 1 = (0, 1, 2): patterns with mean >= 1 are (+,+,+) and (-,+,+) -> 2 of 8
    assert hypothesis.one_sided([1.0, 2.0, 3.0], greater_than=1.0) == pytest.approx(2 / 8)


def test_binomial_nine_of_ten():
    test = hypothesis.binomial([1] * 9 + [0], 0.5)
    assert test.effect == 0.9 and test.n == 10
    assert test.p_value == pytest.approx(2 * 11 / 1024)       # P(X >= 9) + P(X <= 1) with X ~ Bin(10, 1/2)


def test_two_sample_permutation_is_exact_for_five_values():
    # C(5, 2) = 10 splits; |difference of means| >= 2.5 only for {1, 2} and {4, 5}
    test = hypothesis.two_sample([1.0, 2.0], [3.0, 4.0, 5.0])
    assert test.effect == pytest.approx(-2.5) and test.p_value == pytest.approx(0.2)


def test_equivalence_is_two_one_sided_t_tests():
    d = np.array([0.001, 0.003, 0.002, 0.004])
    se = d.std(ddof=1) / math.sqrt(len(d))
    lower = stats.t.sf((d.mean() + 0.01) / se, len(d) - 1)    # H1: mean > -0.01
    upper = stats.t.cdf((d.mean() - 0.01) / se, len(d) - 1)   # H1: mean < +0.01
    test = hypothesis.equivalence(d, 0.01, method="t-test")
    assert test.p_value == pytest.approx(max(lower, upper))
    assert test.p_value < 0.05
    assert hypothesis.outside_margin(d, 0.01, method="t-test").p_value > 0.5


def test_bootstrap_p_counts_the_far_side():
    replicates = np.concatenate([np.full(10, -0.1), np.full(989, 0.2)])
    test = hypothesis.bootstrap(replicates, observed=0.2)
    assert test.p_value == pytest.approx(2 * 11 / 1000)
    assert hypothesis.bootstrap(-replicates, observed=-0.2).p_value == pytest.approx(2 * 11 / 1000)


# ------------------------------------------------------------------------------------------- claims on tables

PAIRED = """\
claims:
  - id: K-paired
    paper: A
    where: Table 1
    statement: a beats b
    paper_numbers: 0.40 vs 0.30
    paper_values: {a: 0.40, b: 0.30}
    table: summary
    quantities:
      a: {model: a}
      b: {model: b}
    test: a > b
    noise:
      key: query_id
      test: randomisation
      table: per_query
      compare: [a > b]
"""


def paired_tables(root: Path, a: np.ndarray, b: np.ndarray, pooled: tuple[float, float] | None = None) -> None:
    """Per-query values of a and b, and a summary table (their means, or the given pooled numbers)."""
    keys = [f"q{i}" for i in range(len(a))]
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"model": ["a"] * len(a) + ["b"] * len(b), "query_id": keys * 2, "value": np.concatenate([a, b])}))
    point = pooled if pooled is not None else (float(a.mean()), float(b.mean()))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b"], "value": list(point)}))


def test_a_true_claim_holds_and_swapping_the_systems_fails_it(tmp_path):
    rng = np.random.default_rng(1)
    b = rng.random(40)
    a = b + 0.1 + 0.01 * rng.standard_normal(40)
    root = make_repo(tmp_path / "one", {"nb": PAIRED}, notebooks=("nb",))
    paired_tables(root, a, b)
    verdict = judge(root)["K-paired"]
    assert verdict.status == HOLDS and verdict.short.startswith("holds (p = ")
    # ER: our mean improvement 0.1 over the paper's 0.10
    assert verdict.effect_ratio == pytest.approx(float(np.mean(a - b)) / 0.1)
    swapped = make_repo(tmp_path / "two", {"nb": PAIRED}, notebooks=("nb",))
    paired_tables(swapped, b, a)
    verdict = judge(swapped)["K-paired"]
    assert verdict.status == FAILS
    assert verdict.observed == "a < b" and verdict.short.startswith("fails: a < b (p = ")
    assert verdict.effect_ratio < 0


def test_equal_systems_are_within_noise(tmp_path):
    root = make_repo(tmp_path, {"nb": PAIRED}, notebooks=("nb",))
    values = np.random.default_rng(2).random(30)
    paired_tables(root, values, values.copy())
    assert judge(root)["K-paired"].status == WITHIN_NOISE


def test_the_direction_comes_from_the_tested_means_not_from_a_pooled_number(tmp_path):
    """The summary's pooled number says a > b, every question says a < b: the claim fails (it held before)."""
    root = make_repo(tmp_path, {"nb": PAIRED}, notebooks=("nb",))
    b = np.linspace(0.4, 0.6, 30)
    paired_tables(root, b - 0.05, b, pooled=(0.7, 0.5))
    verdict = judge(root)["K-paired"]
    assert verdict.status == FAILS and verdict.observed == "a < b"


EQUIVALENCE = """\
claims:
  - id: K-within
    paper: A
    where: Table 2
    statement: a comes within 0.01 of b
    paper_numbers: 0.518 vs 0.522
    table: seeds
    quantities:
      a: {model: a}
      b: {model: b}
    test: abs(a - b) <= 0.01
    noise:
      key: seed
      test: equivalence
      margin: 0.01
      compare: [a == b]
"""


def seed_table(root: Path, a: list[float], b: list[float]) -> None:
    seeds = list(range(13, 13 + len(a)))
    publish(root, "cpu", "nb", "seeds", pd.DataFrame(
        {"model": ["a"] * len(a) + ["b"] * len(b), "seed": seeds * 2, "value": a + b}))


@pytest.mark.parametrize("a, b, status", [
    ([0.520, 0.521, 0.519, 0.520], [0.521, 0.520, 0.520, 0.521], HOLDS),      # within the margin, tightly
    ([0.906, 0.900, 0.910, 0.904], [0.574, 0.570, 0.580, 0.571], FAILS),      # 0.33 apart: outside it
    ([0.52, 0.50, 0.55, 0.49], [0.51, 0.53, 0.50, 0.52], WITHIN_NOISE),       # too noisy to tell
])
def test_an_equivalence_claim_is_two_one_sided_tests(tmp_path, a, b, status):
    root = make_repo(tmp_path, {"nb": EQUIVALENCE}, notebooks=("nb",))
    seed_table(root, a, b)
    verdict = judge(root)["K-within"]
    assert verdict.status == status, verdict.detail
    assert "equivalence (TOST, t-test) within ±0.01" in verdict.detail
    if status == FAILS:
        assert "outside ±0.01" in verdict.observed


NON_INFERIOR = PAIRED.replace("K-paired", "K-par").replace("test: a > b\n", "test: a >= b - 0.5\n").replace(
    "      test: randomisation\n", "      test: non-inferiority\n      margin: 0.5\n").replace(
    "compare: [a > b]", "compare: [a >= b]")


@pytest.mark.parametrize("shift, status", [(-0.1, HOLDS), (-1.0, FAILS), (-0.5, WITHIN_NOISE)])
def test_on_par_is_non_inferiority_with_the_margin_inside_the_test(tmp_path, shift, status):
    root = make_repo(tmp_path, {"nb": NON_INFERIOR}, notebooks=("nb",))
    rng = np.random.default_rng(3)
    b = rng.random(200) * 10
    paired_tables(root, b + shift + 0.05 * rng.standard_normal(200), b)
    verdict = judge(root)["K-par"]
    assert verdict.status == status, verdict.detail


SHARE = """\
claims:
  - id: K-most
    paper: A
    where: Table 3
    statement: most are negatives
    paper_numbers: qualitative
    table: summary
    quantities:
      share: {statistic: share}
    test: share > 0.5
    noise:
      key: query_id
      test: binomial
      table: per_query
      quantities:
        share: {statistic: negative}
      compare: [share > 0.5]
"""


@pytest.mark.parametrize("successes, status", [(40, HOLDS), (10, FAILS), (26, WITHIN_NOISE)])
def test_a_share_gets_an_exact_binomial_test(tmp_path, successes, status):
    root = make_repo(tmp_path, {"nb": SHARE}, notebooks=("nb",))
    values = [1.0] * successes + [0.0] * (50 - successes)
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"statistic": "negative", "query_id": [f"q{i}" for i in range(50)], "value": values}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"statistic": ["share"], "value": [successes / 50]}))
    verdict = judge(root)["K-most"]
    assert verdict.status == status
    assert verdict.p_value == pytest.approx(stats.binomtest(successes, 50, 0.5).pvalue)


ABOVE_BASE = SHARE.replace("K-most", "K-above-base").replace(
    "      share: {statistic: share}\n    test: share > 0.5",
    "      share: {statistic: share}\n      base: {statistic: base}\n    test: share > base").replace(
    "compare: [share > 0.5]", "compare: [share > base]")


@pytest.mark.parametrize("successes, status", [(49, HOLDS), (44, WITHIN_NOISE), (30, FAILS)])
def test_a_share_is_tested_against_a_base_rate_the_claim_reads(tmp_path, successes, status):
    """'share > base': the reference share is another quantity of the claim (a base rate from its table), so a share
    of negatives that is "most" only because most pairs are negatives is not a holds."""
    root = make_repo(tmp_path, {"nb": ABOVE_BASE}, notebooks=("nb",))
    values = [1.0] * successes + [0.0] * (50 - successes)
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"statistic": "negative", "query_id": [f"q{i}" for i in range(50)], "value": values}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"statistic": ["share", "base"],
                                                        "value": [successes / 50, 0.85]}))
    verdict = judge(root)["K-above-base"]
    assert verdict.status == status, verdict.detail
    assert verdict.p_value == pytest.approx(stats.binomtest(successes, 50, 0.85).pvalue)


def test_a_binomial_reference_must_be_a_share_or_a_claim_quantity(tmp_path):
    bad = ABOVE_BASE.replace("compare: [share > base]", "compare: [share > other]")
    with pytest.raises(FormatError, match="compare"):
        judge(make_repo(tmp_path, {"nb": bad}, notebooks=("nb",)))


TWO_GROUPS = PAIRED.replace("K-paired", "K-groups").replace("test: randomisation", "test: two-sample")


def test_unpaired_groups_get_a_two_sample_test(tmp_path):
    root = make_repo(tmp_path, {"nb": TWO_GROUPS}, notebooks=("nb",))
    a, b = np.linspace(0.6, 0.9, 12), np.linspace(0.1, 0.4, 15)
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"model": ["a"] * 12 + ["b"] * 15, "query_id": [f"a{i}" for i in range(12)] + [f"b{i}" for i in range(15)],
         "value": np.concatenate([a, b])}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b"], "value": [a.mean(), b.mean()]}))
    assert judge(root)["K-groups"].status == HOLDS


BOOTSTRAP = PAIRED.replace("K-paired", "K-pooled").replace("    paper_values: {a: 0.40, b: 0.30}\n", "").replace(
    "key: query_id", "key: replicate").replace("test: randomisation", "test: bootstrap").replace(
    "table: per_query", "table: replicates")


def test_a_pooled_statistic_is_judged_by_its_bootstrap_replicates(tmp_path):
    root = make_repo(tmp_path, {"nb": BOOTSTRAP}, notebooks=("nb",))
    rng = np.random.default_rng(4)
    a, b = 2.0 + 0.1 * rng.standard_normal(500), 1.0 + 0.1 * rng.standard_normal(500)
    publish(root, "cpu", "nb", "replicates", pd.DataFrame(
        {"model": ["a"] * 500 + ["b"] * 500, "replicate": list(range(500)) * 2, "value": np.concatenate([a, b])}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b"], "value": [2.0, 1.0]}))
    verdict = judge(root)["K-pooled"]
    assert verdict.status == HOLDS and verdict.p_value == pytest.approx(2 / 501)


# ------------------------------------------------------------------------------------------- preconditions

WITH_PRECONDITION = """\
preconditions:
  teacher-leads:
    statement: the teacher leads
    table: summary
    quantities:
      teacher: {model: teacher}
      b: {model: b}
    test: teacher > b
""" + PAIRED.replace("    paper_values: {a: 0.40, b: 0.30}\n", "    requires: [teacher-leads]\n")


@pytest.mark.parametrize("teacher, status", [(0.9, HOLDS), (0.1, NOT_TESTABLE)])
def test_an_unmet_precondition_makes_the_claim_not_testable_with_its_measurement(tmp_path, teacher, status):
    root = make_repo(tmp_path, {"nb": WITH_PRECONDITION}, notebooks=("nb",))
    rng = np.random.default_rng(5)
    b = rng.random(40) * 0.5
    a = b + 0.2
    paired_tables(root, a, b)
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b", "teacher"],
                                                        "value": [a.mean(), b.mean(), teacher]}))
    verdict = judge(root)["K-paired"]
    assert verdict.status == status
    if status == NOT_TESTABLE:
        assert "precondition 'teacher-leads' not met" in verdict.detail and "teacher=0.1" in verdict.detail
        assert verdict.ours.startswith("a=")
        page = tmp_path / "scorecard.md"
        write_scorecard_page(root / "results", page, root=root)
        text = page.read_text()
        assert "| 0 | 0 | 0 | 1 | 0 | 0 | 0 | 0 of 1 |" in text
        assert "## Preconditions" in text and "| precondition | cpu | claims |" in text
        assert '| <span id="pre-teacher-leads"></span>teacher-leads | not met | K-paired |' in text  # the table to scan
        # the claim's verdict says which precondition in words, linked to its row
        assert 'not testable here: needs <a href="#pre-teacher-leads" title="teacher-leads">the teacher leads</a>' \
            in text
        assert "- **teacher-leads**. the teacher leads. Test: `teacher > b`." in text   # and each in full below it
        assert "  - cpu: *not met*: teacher=0.1, b=" in text


@pytest.mark.parametrize("gain", [0.2, -0.2])
def test_a_claim_not_testable_for_its_premise_still_shows_what_its_test_saw(tmp_path, gain):
    """The claim's own test, run regardless of the unmet premise: its direction and p beside *not testable here*,
    and a significant reversal counted in the scorecard's summary; the status stays *not testable here*."""
    root = make_repo(tmp_path, {"nb": WITH_PRECONDITION}, notebooks=("nb",))
    b = np.random.default_rng(5).random(40) * 0.5
    a = b + gain
    paired_tables(root, a, b)
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b", "teacher"],
                                                        "value": [a.mean(), b.mean(), 0.0]}))
    verdict = judge(root)["K-paired"]
    keys = [f"q{i}" for i in range(40)]
    p = randomisation_test(dict(zip(keys, a)), dict(zip(keys, b))).p_value
    assert verdict.status == NOT_TESTABLE and verdict.direction_p == pytest.approx(p) and p < 0.05
    seen = "a > b" if gain > 0 else "a < b"
    assert verdict.direction == seen and verdict.reversal == (gain < 0)
    assert verdict.short == (f"not testable here: needs teacher-leads; observed {seen} (p = {p:.2g}"
                             + (", a significant reversal)" if gain < 0 else ")"))
    page = tmp_path / "scorecard.md"
    write_scorecard_page(root / "results", page, root=root)
    said = ("Significant reversals at cpu: 1, 1 of them in *not testable here* rows" if gain < 0
            else "Significant reversals at cpu: 0.")
    assert said in page.read_text()


PER_GROUP_PRECONDITION = """\
preconditions:
  trained:
    statement: the comparator trained
    table: steps
    column: selected step
    quantities:
      step: {model: ca, aggregate: min}
    test: step > 0
    over: size
claims:
  - id: K-sizes
    paper: A
    where: Table 2
    statement: ca beats de at every size
    paper_numbers: 0.36 vs 0.31
    requires: [trained]
    table: seeds
    quantities:
      ca: {model: ca}
      de: {model: de}
    test: ca > de
    over: size
    noise: {test: t-test, key: seed, compare: [ca > de]}
"""


def test_a_precondition_per_group_excludes_only_its_unmet_groups(tmp_path):
    root = make_repo(tmp_path, {"nb": PER_GROUP_PRECONDITION}, notebooks=("nb",))
    publish(root, "cpu", "nb", "steps", pd.DataFrame({
        "model": "ca", "size": ["2-384"] * 3 + ["6-384"] * 3, "seed": [13, 14, 15] * 2,
        "selected step": [0, 0, 40, 50, 40, 50]}))
    rows = []
    for size, ca, de in (("2-384", [0.3, 0.31, 0.32], [0.6, 0.62, 0.61]), ("6-384", [0.5, 0.52, 0.51],
                                                                          [0.4, 0.41, 0.43])):
        rows += [{"model": m, "size": size, "seed": s, "value": v}
                 for m, vals in (("ca", ca), ("de", de)) for s, v in zip((13, 14, 15), vals)]
    publish(root, "cpu", "nb", "seeds", pd.DataFrame(rows))
    verdict = judge(root)["K-sizes"]
    assert verdict.status == HOLDS, verdict.detail           # 2-384 (CA at step 0, DE far ahead) is not judged
    assert list(verdict.groups) == ["6-384"]
    assert "size 2-384 not testable" in verdict.detail
    page = tmp_path / "scorecard.md"
    write_scorecard_page(root / "results", page, root=root)
    assert "</span>trained | not met for 2-384; met for 6-384 | K-sizes |" in page.read_text()


def test_settings_are_worded_by_status_and_names_with_commas_stay_readable():
    from taser_book.scorecard import settings_by_status

    assert settings_by_status([("2-32", "met"), ("2-64", "not met"), ("6-32", "met")]) == (
        "met for 2-32, 6-32; not met for 2-64")
    assert settings_by_status([("a, 200", "met"), ("a, all", "met"), ("b, 200", "not met")]) == (
        "met for a, 200; a, all — not met for b, 200")
    assert settings_by_status([("2-32", "met"), ("6-32", "met")]) == "" == settings_by_status([])


def test_requires_must_name_a_precondition_or_a_claim(tmp_path):
    root = make_repo(tmp_path, {"nb": PAIRED.replace("    paper_values: {a: 0.40, b: 0.30}\n",
                                                     "    requires: [no-such-thing]\n")}, notebooks=("nb",))
    with pytest.raises(FormatError, match="neither a precondition nor a claim id"):
        load_claims_files(root / "notebooks" / "claims")


def _claim(cid: str, requires: list[str]) -> str:
    return PAIRED.replace("  - id: K-paired\n", f"  - id: {cid}\n").replace(
        "    paper_values: {a: 0.40, b: 0.30}\n", f"    requires: [{', '.join(requires)}]\n" if requires else "")


def test_claims_may_share_a_premise_but_not_require_themselves(tmp_path):
    # a diamond: K-top needs K-left and K-right, which both need K-base (and K-top needs K-base directly too)
    diamond = "claims:\n" + "".join(_claim(c, r).split("claims:\n", 1)[1] for c, r in (
        ("K-base", []), ("K-left", ["K-base"]), ("K-right", ["K-base"]), ("K-top", ["K-left", "K-right", "K-base"])))
    root = make_repo(tmp_path / "a", {"nb": diamond}, notebooks=("nb",))
    assert len(load_claims_files(root / "notebooks" / "claims")[0].claims) == 4
    loop = "claims:\n" + "".join(_claim(c, r).split("claims:\n", 1)[1] for c, r in (
        ("K-base", ["K-top"]), ("K-mid", ["K-base"]), ("K-top", ["K-mid"])))
    root = make_repo(tmp_path / "b", {"nb": loop}, notebooks=("nb",))
    with pytest.raises(FormatError, match="requires itself: K-base -> K-top -> K-mid -> K-base"):
        load_claims_files(root / "notebooks" / "claims")


def test_a_premise_from_another_page_counts_only_while_both_results_are_current(tmp_path):
    premise = _claim("K-premise", [])
    dependent = _claim("K-dependent", ["K-premise"])
    root = make_repo(tmp_path, {"a": premise, "b": dependent}, notebooks=("a", "b"))
    rng = np.random.default_rng(5)
    b = rng.random(30)
    for nb in ("a", "b"):
        keys = [f"q{i}" for i in range(30)]
        publish(root, "cpu", nb, "per_query", pd.DataFrame(
            {"model": ["a"] * 30 + ["b"] * 30, "query_id": keys * 2, "value": np.concatenate([b + 0.2, b])}))
        publish(root, "cpu", nb, "summary", pd.DataFrame({"model": ["a", "b"], "value": [b.mean() + 0.2, b.mean()]}))
    assert judge(root)["K-dependent"].status == HOLDS          # both current: the premise carries over
    (root / "notebooks" / "b.ipynb").write_text((root / "notebooks" / "b.ipynb").read_text().replace("# b", "# b2"))
    verdict = judge(root)["K-dependent"]
    assert verdict.status == NOT_TESTABLE and "result of b is stale" in verdict.detail


def _premise_on_page_a(tmp_path):
    """A repository whose page a measures K-premise and whose page b's K-dependent requires it, both holding."""
    premise = _claim("K-premise", [])
    dependent = _claim("K-dependent", ["K-premise"])
    root = make_repo(tmp_path, {"a": premise, "b": dependent}, notebooks=("a", "b"))
    b = np.random.default_rng(5).random(30)
    for nb in ("a", "b"):
        keys = [f"q{i}" for i in range(30)]
        publish(root, "cpu", nb, "per_query", pd.DataFrame(
            {"model": ["a"] * 30 + ["b"] * 30, "query_id": keys * 2, "value": np.concatenate([b + 0.2, b])}))
        publish(root, "cpu", nb, "summary", pd.DataFrame({"model": ["a", "b"], "value": [b.mean() + 0.2, b.mean()]}))
    return root


def test_a_premise_from_another_page_counts_only_for_results_made_on_one_machine(tmp_path):
    """A run cache does not travel: a teacher of the same recipe trained on another machine is another model, so a
    premise measured on a page made elsewhere does not carry over."""
    import json

    root = _premise_on_page_a(tmp_path)

    def made_on(nb, summary):
        path = root / "results" / "cpu" / nb / "meta.json"
        meta = json.loads(path.read_text())
        path.write_text(json.dumps({**meta, "hardware": {**meta.get("hardware", {}), "summary": summary}}))

    made_on("a", "AMD EPYC (2 cores)")
    made_on("b", "AMD EPYC (2 cores)")
    assert judge(root)["K-dependent"].status == HOLDS
    made_on("b", "Intel(R) Xeon(R) Processor (2 cores)")
    verdict = judge(root)["K-dependent"]
    assert verdict.status == NOT_TESTABLE and "made on AMD EPYC (2 cores)" in verdict.detail
    assert "b's was made on Intel(R) Xeon(R) Processor (2 cores)" in verdict.detail


def test_a_premise_from_another_page_counts_where_both_read_one_run_cache_whatever_the_machines(tmp_path):
    """`taser reproduce` records the run cache a page read (`run_cache`): two pages of one cache read the same
    runs even when a session on another machine evaluated one of them; two caches are other runs on one machine."""
    import json

    root = _premise_on_page_a(tmp_path)

    def made(nb, summary, cache):
        path = root / "results" / "cpu" / nb / "meta.json"
        meta = json.loads(path.read_text())
        path.write_text(json.dumps({**meta, "hardware": {"summary": summary}, "run_cache": cache}))

    made("a", "AMD EPYC (2 cores)", "c1")
    made("b", "Intel(R) Xeon(R) Processor (2 cores)", "c1")
    assert judge(root)["K-dependent"].status == HOLDS
    made("b", "AMD EPYC (2 cores)", "c2")
    verdict = judge(root)["K-dependent"]
    assert verdict.status == NOT_TESTABLE and "read another run cache" in verdict.detail


def test_a_precondition_that_reads_no_trained_run_carries_over_between_machines(tmp_path):
    import json

    untrained = """\
preconditions:
  below-ceiling:
    statement: the untrained model is below the ceiling
    table: summary
    quantities:
      b: {model: b}
    test: b < 0.9
    reads_trained_runs: false
claims: []
"""
    root = make_repo(tmp_path, {"a": untrained, "b": _claim("K-dependent", ["below-ceiling"])}, notebooks=("a", "b"))
    b = np.random.default_rng(5).random(30) * 0.5
    for nb, machine in (("a", "AMD EPYC (2 cores)"), ("b", "Intel(R) Xeon(R) Processor (2 cores)")):
        keys = [f"q{i}" for i in range(30)]
        publish(root, "cpu", nb, "per_query", pd.DataFrame(
            {"model": ["a"] * 30 + ["b"] * 30, "query_id": keys * 2, "value": np.concatenate([b + 0.2, b])}))
        publish(root, "cpu", nb, "summary", pd.DataFrame({"model": ["a", "b"], "value": [b.mean() + 0.2, b.mean()]}))
        path = root / "results" / "cpu" / nb / "meta.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "hardware": {"summary": machine}}))
    assert judge(root)["K-dependent"].status == HOLDS
    flipped = untrained.replace("    reads_trained_runs: false\n", "")
    (root / "notebooks" / "claims" / "a.yaml").write_text(flipped)
    assert judge(root)["K-dependent"].status == NOT_TESTABLE


def test_a_listed_group_without_results_is_named_in_the_verdict(tmp_path):
    claims = PAIRED.replace("    test: a > b\n", "    test: a > b\n    over: dataset\n    groups: [here, elsewhere]\n")
    root = make_repo(tmp_path, {"nb": claims}, notebooks=("nb",))
    rng = np.random.default_rng(3)
    b = rng.random(30)
    a = b + 0.2
    keys = [f"q{i}" for i in range(30)]
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"model": ["a"] * 30 + ["b"] * 30, "dataset": "here", "query_id": keys * 2, "value": np.concatenate([a, b])}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b"], "dataset": "here",
                                                        "value": [a.mean(), b.mean()]}))
    verdict = judge(root)["K-paired"]
    assert verdict.status == HOLDS and list(verdict.groups) == ["here"]
    assert verdict.detail.startswith("judged on here only: no result here for elsewhere")


def test_the_claims_files_preconditions_are_declared_and_measured():
    """Every precondition of the checkout names a test over measured quantities, and the claims that the issue
    named rest on one."""
    files = load_claims_files(Path(__file__).resolve().parents[1] / "notebooks" / "claims")
    claims = {c.id: c for f in files for c in f.claims}
    names = {n for f in files for n in f.preconditions}
    assert {"early-off-init", "cas-trained", "cutoff-below-ceiling", "quiet-clock"} <= names
    assert "teacher-leads-students" in claims["D-T1-distillation-beats-onehot"].requires
    # the paper compares its CA and DE trained on the same data; every claim about trained students needs them moved
    assert "ca-de-same-data" in claims["D-T1-ca-beats-de"].requires
    assert {"capacity-same-data", "cas-beat-first-stage"} <= set(claims["D-T2-test-gap"].requires)
    assert all("distillation-students-moved" in claims[c].requires for c in ("D-T1-ours-best", "D-T7-colbert",
                                                                               "D-T8-label-smoothing"))
    # ColBERT's page trains its own one-hot DE (one seed): it must have moved there too, not only on de_distillation
    assert {"colbert-teacher-leads-de", "colbert-students-moved"} <= set(claims["D-T7-colbert-beats-teacher"].requires)
    assert "colbert-students-moved" in claims["D-T7-colbert"].requires
    # Table 6 compares distilled students too: a teacher worth distilling, as Table 1's loss comparisons need
    assert "teacher-leads-students" in claims["D-T6-k20-over-k2"].requires
    # Tables 4, 5's students start from the default cut to L layers, scored on the page as `zero-shot` at each size
    assert {"teacher-leads-students", "small-students-moved"} <= set(claims["D-T45-small-students"].requires)
    assert "retrievers-trained" in claims["T1-taser-vs-dpr"].requires
    # the routing page's I = 2 variants are its own runs: their premise is measured on them, against the zero-shot
    # start of the in-domain page; and the learning curves' students are the curve page's own runs
    assert all("routing-variants-trained" in claims[c].requires for c in (
        "TA1-shared-beats-dpr", "TA1-shared-not-worse", "TA1-specialisation", "TA1-det-best", "TA1-seq-beats-tok"))
    assert claims["D-F4-gap-widens"].requires == ("curves-de-moved",)
    # two students of one family are told apart over seeds, not on one seed's questions (no margin seed noise exists)
    assert all("margins-student-seeds" in claims[c].requires for c in ("D-F8-distilled-margins",
                                                                         "D-F2-distilled-margins"))
    assert {"curves-de-moved", "curves-dist-moved"} <= set(claims["D-F4-distillation"].requires)
    assert "cutoff-below-ceiling" in claims["T1-taser-vs-dpr"].requires
    assert claims["TA1-shared-not-worse"].noise.test == "non-inferiority"
    assert claims["T1-taser-vs-dpr"].noise.test == "non-inferiority" and claims["T1-taser-vs-dpr"].noise.margin == 0.5
    assert claims["D-T2-train-match"].noise.test == "equivalence"
    assert claims["D-T3-disagreements-are-negatives"].noise.test == "binomial"
    # Sec. 3.3's comparisons of a CA with a DE (Figures 2, 5-7, Table 3) need the two trained alike, as D-T1's does
    assert {"margins-ca-de-same-data", "margins-teacher-leads-de"} <= set(claims["D-F2-smaller-margins"].requires)
    assert all("qualitative-ca-de-same-data" in claims[c].requires for c in ("D-T3-disagreements-are-negatives",
                                                                              "D-T3-disagreements-overlap"))
    assert all("scores-ca-de-same-data" in claims[c].requires
               for c in ("D-F2-diffuse-negatives", "D-F5-diffuse-train", "D-F6-baseline-shift", "D-F7-early-peak"))
    assert "share > base" in [c.text for c in claims["D-T3-disagreements-are-negatives"].noise.compare]
    # Figure 7's early stage in raw units needs a CA that already separates: a fresh head's near-zero logits are
    # narrow without any learnt peak, and no student can be narrower than them
    assert all({"early-off-init", "early-ca-separates"} <= set(claims[c].requires)
               for c in ("D-F7-early-peak", "D-F7-distilled-sharper"))


# ------------------------------------------------------------------------------------------- judged at build time

def test_a_change_to_the_judging_modules_makes_no_result_stale(tmp_path):
    import json

    from taser_book.scorecard import stale_reason

    root = make_repo(tmp_path, {"nb": PAIRED}, notebooks=("nb",))
    paired_tables(root, np.arange(5.0), np.arange(5.0))
    (root / "taser_lib").mkdir()
    for name in ("claims.py", "scorecard.py", "losses.py"):
        (root / "taser_lib" / name).write_text("# now\n")
    folder = root / "results" / "cpu" / "nb"
    meta = json.loads((folder / "meta.json").read_text())
    meta["library_files"] = {"taser_book/claims.py": "0" * 64, "taser_book/scorecard.py": "0" * 64}
    (folder / "meta.json").write_text(json.dumps(meta))
    assert stale_reason(folder, root) is None
    meta["library_files"]["taser_lib/losses.py"] = "0" * 64
    (folder / "meta.json").write_text(json.dumps(meta))
    assert stale_reason(folder, root) == "library file taser_lib/losses.py changed since the result was made"


def test_a_changed_figure_function_leaves_verdicts_alone_but_reruns_the_page(tmp_path):
    import json

    from taser_book.runner import page_stale_reason
    from taser_book.scorecard import stale_reason

    root = make_repo(tmp_path, {"nb": PAIRED}, notebooks=("nb",))
    paired_tables(root, np.arange(5.0), np.arange(5.0))
    (root / "taser_book" / "plots").mkdir(parents=True)
    (root / "taser_book" / "plots" / "style.py").write_text("# now\n")
    (root / "taser_book" / "scorecard.py").write_text("# now\n")
    folder = root / "results" / "cpu" / "nb"
    meta = json.loads((folder / "meta.json").read_text())
    meta["library_files"] = {"taser_book/plots/style.py": "0" * 64, "taser_book/scorecard.py": "0" * 64}
    (folder / "meta.json").write_text(json.dumps(meta))
    assert stale_reason(folder, root) is None                 # the verdicts: judged from the same tables
    assert page_stale_reason(folder, root) == (              # the page: its figures were drawn by the old function
        "library file taser_book/plots/style.py changed since the result was made")


def test_the_book_page_opens_with_the_verdicts_judged_now(tmp_path):
    import nbformat

    from taser_book.book import book_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A page\n\nText."),
                nbformat.v4.new_code_cell('notebook_claims("nb", results_dir)')]
    nb.cells[1].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "holds (old)"})]
    source = tmp_path / "nb.ipynb"
    nbformat.write(nb, source)
    claims = pd.DataFrame([{"id": "K-1", "where": "Table 1", "claim": "a beats b", "paper": "0.4 vs 0.3",
                            "ours": "a=0.5, b=0.2", "verdict": "fails: a < b (p = 0.001)", "ER": "-0.50",
                            "detail": "why"}])
    out = tmp_path / "page.ipynb"
    book_notebook(source, source, out, meta={"profile": "cpu"}, claims=claims)
    page = nbformat.read(out, as_version=4)
    first = page.cells[0].source
    assert first.startswith("# A page") and "**Claims and verdicts**" in first
    assert ('<tr><td><span id="claim-K-1"></span>a beats b<br><small><strong>K-1</strong> (Table 1)</small></td>'
            '<td>fails: a &lt; b (p = 0.001)</td><td>0.4 vs 0.3</td><td>a=<wbr>0.5, b=<wbr>0.2</td>'
            '<td class="number">-0.50</td></tr>') in first
    # "a/b" and "k=v" may break after "/" and "=" (a narrow column splits no number: tests/test_book.py's Chromium check)
    from taser_book.book import _break_points
    assert _break_points("83.6/82.0 vs x=0.8469") == "83.6/<wbr>82.0 vs x=<wbr>0.8469"
    # the verdict next to the claim in one line, on the anchor the scorecard uses
    assert ":::{dropdown}" in first and "- **K-1**: a beats b *Verdict*: why" in first
    assert first.index("Claims and verdicts") < first.index("Text.")
    assert '<th title="effect ratio' in first                       # the ER column says what it is

    # a long unit is short in the box and whole in the dropdown; a stale page says so above the box
    unit = "test R@K at the deciding cutoff (R@1 on SQuAD-open; R@20 over DPR's Wikipedia), %"
    book_notebook(source, source, out, meta={"profile": "cpu"}, stale="notebook nb.ipynb changed",
                  claims=claims.assign(ours=f"a=0.5, b=0.2 ({unit})"))
    first = nbformat.read(out, as_version=4).cells[0].source
    assert "<td>a=<wbr>0.5, b=<wbr>0.2 (test R@K at the deciding cutoff, %)</td>" in first
    assert f"*Ours*: a=0.5, b=0.2 ({unit})." in first.replace("\\", "")
    assert first.index("Stale result") < first.index("Claims and verdicts")
    shown = page.cells[1].outputs[0]["data"]["text/plain"]
    assert "holds (old)" not in shown and shown.startswith("1 claim judged from this page's tables (1 fails)")


def test_the_verdict_box_shows_each_claim_in_one_line():
    from taser_book.book import short_statement

    # the parenthetical qualifiers and what follows a semicolon go (the dropdown keeps them); math stays
    assert short_statement('Label smoothing does not improve DE test MRR@10 ("smoothing has a minimal effect"; '
                           'here: not by 0.01 or more)') == "Label smoothing does not improve DE test MRR@10"
    assert short_statement("CA beats DE (MRR@10); the premise of the rest") == "CA beats DE"
    assert short_statement("a dual encoder of dimension rank(S) (SVD)") == "a dual encoder of dimension rank(S)"
    assert short_statement("τ²·g → (1/8)·h as τ grows") == "τ²·g → (1/8)·h as τ grows"
    assert short_statement("gains (a (nested) note) everywhere") == "gains everywhere"
    from taser_book.book import _box_unit

    assert _box_unit("x=1 (a (b) c (d (e)), %)") == "x=1 (a c, %)" and _box_unit("x=1 (MRR@10)") == "x=1 (MRR@10)"
    assert _box_unit("x=1") == "x=1" and _box_unit("(whole)") == "(whole)"
    from taser_book.book import BOX_GROUPS, _box_ours

    # one setting: as _box_unit gives it; several: a line each, at most BOX_GROUPS, and what was left out is said
    assert _box_ours("a=1, b=2 (test R@K (R@1 here), %)") == ("a=1, b=2 (test R@K, %)", True)
    assert _box_ours("a=1 (MRR@10)") == ("a=1 (MRR@10)", False)
    assert _box_ours("2-32: a=1; 6-32: a=2 (MRR@10)") == ("2-32: a=1<br>6-32: a=2 (MRR@10)", False)
    sizes = "; ".join(f"s{i}: a={i} (x; y)" for i in range(BOX_GROUPS + 3)) + " (test MRR@10)"
    cell, shortened = _box_ours(sizes)
    assert shortened and cell.count("<br>") == BOX_GROUPS
    assert cell.endswith("and 3 more (in the claims in full) (test MRR@10)")
    assert cell.startswith("s0: a=0 (x; y)<br>s1: a=1 (x; y)")   # a semicolon inside parentheses splits nothing
    assert _box_ours("x<y; z (u)")[0] == "x&lt;y<br>z (u)"
    # the settings the verdict speaks of come first
    cell, _ = _box_ours(sizes, verdict=f"fails: s{BOX_GROUPS + 2}: a > b (p = 0.01)")
    assert cell.startswith(f"s{BOX_GROUPS + 2}: a={BOX_GROUPS + 2} (x; y)<br>s0: a=0")
    long = " ".join(["word"] * 40)
    assert short_statement(long).endswith(" …") and len(short_statement(long)) <= 112


# --------------------------------------------------------------------------------------------- training-seed noise

SEEDED = PAIRED.replace("K-paired", "K-seeded").replace("      compare: [a > b]\n", """\
      seed_noise:
        table: spread
        rows: {metric: MRR@10}
      compare: [a > b]
""")


def spread_table(root: Path, stds: list[float], seeds: int = 3) -> None:
    """The std over `seeds` seeds of one run's number for several recipes (the page that trains several seeds)."""
    publish(root, "cpu", "nb", "spread", pd.DataFrame(
        {"model": [f"m{i}" for i in range(len(stds))] + ["bm25"], "metric": "MRR@10",
         "std": [*stds, None], "n": [seeds] * len(stds) + [1]}))


@pytest.mark.parametrize("gain, sigma, status", [
    (0.012, 0.0001, HOLDS),        # seeds barely move a run: the questions' test decides
    (0.012, 0.005, WITHIN_NOISE),  # two single runs differ by ~0.007 by chance: a 0.012 gain is not clear of it
    (0.08, 0.005, HOLDS),          # a gain far beyond both noises
])
def test_a_question_paired_verdict_must_clear_the_seed_noise_too(tmp_path, gain, sigma, status):
    root = make_repo(tmp_path, {"nb": SEEDED}, notebooks=("nb",))
    rng = np.random.default_rng(4)
    b = rng.random(500)
    paired_tables(root, b + gain + 0.05 * rng.standard_normal(500), b)
    spread_table(root, [sigma] * 4)
    verdict = judge(root)["K-seeded"]
    assert verdict.status == status, verdict.detail
    assert f"std {sigma:.3g} over seeds, pooled over 4 runs of nb/spread (8 df); seeds a 1, b 1" in verdict.detail
    # without the seed noise, the questions alone make the 0.012 gain significant
    plain = make_repo(tmp_path / "plain", {"nb": PAIRED}, notebooks=("nb",))
    rng = np.random.default_rng(4)
    b = rng.random(500)
    paired_tables(plain, b + gain + 0.05 * rng.standard_normal(500), b)
    assert judge(plain)["K-paired"].status == HOLDS


def test_the_seed_noise_is_pooled_over_runs_and_shrinks_with_the_seeds_averaged(tmp_path):
    from taser_book.scorecard import _seed_noise, _Tables
    root = make_repo(tmp_path, {"nb": SEEDED}, notebooks=("nb",))
    rng = np.random.default_rng(5)
    b = rng.random(100)
    keys = [f"q{i}" for i in range(100)]
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(
        {"model": ["a"] * 100 + ["b"] * 100, "query_id": keys * 2, "value": np.concatenate([b + 0.01, b]),
         "seeds": [3] * 100 + [1] * 100}))
    publish(root, "cpu", "nb", "summary", pd.DataFrame({"model": ["a", "b"], "value": [0.6, 0.59]}))
    publish(root, "cpu", "nb", "spread", pd.DataFrame(
        {"metric": "MRR@10", "std": [0.003, 0.004, None], "n": [3, 5, 1]}))
    claim = next(c for c in load_claims(root / "notebooks" / "claims") if c.id == "K-seeded")
    seed = _seed_noise(claim, _Tables(root / "results" / "cpu", root=root), None)
    assert seed.sigma == pytest.approx(math.sqrt((2 * 0.003 ** 2 + 4 * 0.004 ** 2) / 6)) and seed.df == 6
    assert seed.seeds == {"a": 3, "b": 1}
    assert seed.variance(claim.noise.compare[0]) == pytest.approx(seed.sigma ** 2 * (1 / 3 + 1))


def test_a_fixed_side_carries_no_seed_noise_and_a_nonlinear_comparison_is_refused(tmp_path):
    from taser_book.scorecard import _Problem, _seed_noise, _Tables
    fixed = SEEDED.replace("        rows: {metric: MRR@10}\n", "        rows: {metric: MRR@10}\n        fixed: [b]\n")
    root = make_repo(tmp_path, {"nb": fixed}, notebooks=("nb",))
    paired_tables(root, np.linspace(0, 1, 50) + 0.01, np.linspace(0, 1, 50))
    spread_table(root, [0.01, 0.01])
    claim = load_claims(root / "notebooks" / "claims")[0]
    seed = _seed_noise(claim, _Tables(root / "results" / "cpu", root=root), None)
    assert seed.seeds == {"a": 1, "b": 0}
    assert seed.variance(claim.noise.compare[0]) == pytest.approx(0.01 ** 2)
    from taser_book.claims import parse_comparison
    with pytest.raises(_Problem, match="not linear"):
        seed.variance(parse_comparison("abs(a) > b", ["a", "b"]))


@pytest.mark.parametrize("text, message", [
    ("      seed_noise: {table: spread}\n", "seed_noise.rows' is missing"),
    ("      seed_noise: {table: spread, rows: {metric: MRR@10}, fixed: [c]}\n", "must list some of the claim's"),
    ("      seed_noise: {table: spread, rows: {metric: MRR@10}, pool: all}\n", "seed_noise.pool' unknown field"),
])
def test_a_malformed_seed_noise_names_its_field(tmp_path, text, message):
    root = make_repo(tmp_path, {"nb": PAIRED.replace("      compare: [a > b]\n", text + "      compare: [a > b]\n")},
                     notebooks=("nb",))
    with pytest.raises(FormatError, match=message):
        load_claims(root / "notebooks" / "claims")


def test_seed_noise_is_only_for_question_paired_tests(tmp_path):
    text = EQUIVALENCE.replace("      compare: [a == b]\n",
                               "      seed_noise: {table: spread, rows: {metric: MRR@10}}\n      compare: [a == b]\n")
    root = make_repo(tmp_path, {"nb": text}, notebooks=("nb",))
    with pytest.raises(FormatError, match="widens question-paired tests only"):
        load_claims(root / "notebooks" / "claims")


def test_with_seed_noise_adds_the_variances_in_a_welch_t_test():
    d = np.array([0.02, 0.01, 0.03, 0.00, 0.02, 0.01])
    q = d.var(ddof=1) / len(d)
    seed_variance, seed_df = 0.0001, 12
    df = (q + seed_variance) ** 2 / (q ** 2 / (len(d) - 1) + seed_variance ** 2 / seed_df)
    expected = stats.t.sf(d.mean() / math.sqrt(q + seed_variance), df)
    assert hypothesis.with_seed_noise(d, seed_variance, seed_df, greater_than=0.0) == pytest.approx(expected)
    assert hypothesis.with_seed_noise(d, 0.0, seed_df, greater_than=0.0) == pytest.approx(
        stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert hypothesis.with_seed_noise(d, seed_variance, seed_df, greater_than=0.0) > \
        hypothesis.with_seed_noise(d, 0.0, seed_df, greater_than=0.0)


def test_every_committed_seed_noise_source_is_found_at_cpu():
    """The claims that compare trained models read their seed noise from the committed cpu results."""
    repo = Path(__file__).resolve().parents[1]
    if not (repo / "results" / "cpu").is_dir():
        pytest.skip("results/cpu is not committed")
    claims = [c for c in load_claims(repo / "notebooks" / "claims") if c.noise and c.noise.seed_noise]
    assert len(claims) >= 20
    first = {}  # one claim a page (each page reads its source once; judging them all is the book's test)
    for claim in claims:
        first.setdefault((claim.notebook, repr(claim.noise.seed_noise)), claim)
    judged = 0
    for claim in first.values():
        verdict = evaluate_claim(claim, repo / "results" / "cpu", root=repo)
        if verdict.status in (HOLDS, FAILS, WITHIN_NOISE):
            assert "training-seed noise: std" in verdict.detail, (claim.id, verdict.detail)
            judged += 1
        else:
            assert "seed noise" not in verdict.detail, (claim.id, verdict.detail)
    assert judged >= 5


# ------------------------------------------------------------------------------------- a family of compared pairs

def test_a_fails_must_stand_after_holms_correction_over_the_claims_pairs():
    from taser_book.claims import parse_comparison
    from taser_book.scorecard import _Compared, _holm_for_fails

    def pairs(*statuses_and_ps):
        return [_Compared(parse_comparison("a > b", ["a", "b"]), status, "a < b", p, 100, "test")
                for status, p in statuses_and_ps]

    # one reversal at p = 0.02 among 4 pairs: 4 x 0.02 = 0.08, not significant
    compared = pairs((FAILS, 0.02), (HOLDS, 0.001), (WITHIN_NOISE, 0.4), (WITHIN_NOISE, 0.9))
    _holm_for_fails(compared, 0.05)
    assert compared[0].status == WITHIN_NOISE and compared[0].p_value == pytest.approx(0.08)
    assert "Holm" in compared[0].observed and compared[1].status == HOLDS  # a holds needs no correction
    # two reversals at 0.001 and 0.02 among 4: 0.004 stands, then max(0.004, 3 x 0.02) = 0.06 does not
    compared = pairs((FAILS, 0.02), (FAILS, 0.001), (WITHIN_NOISE, 0.4), (WITHIN_NOISE, 0.9))
    _holm_for_fails(compared, 0.05)
    assert [c.status for c in compared[:2]] == [WITHIN_NOISE, FAILS]
    assert compared[1].p_value == 0.001 and "p = 0.004" in compared[1].what
    single = pairs((FAILS, 0.02))  # one pair: nothing to correct
    _holm_for_fails(single, 0.05)
    assert single[0].status == FAILS and single[0].p_value == 0.02


GROUPS = PAIRED.replace("K-paired", "K-every").replace("    test: a > b\n", "    test: a > b\n    over: dataset\n")


def test_one_group_mildly_reversed_among_four_does_not_fail_the_claim(tmp_path):
    root = make_repo(tmp_path, {"nb": GROUPS}, notebooks=("nb",))
    rng = np.random.default_rng(6)
    rows, summary = [], []
    for g, shift in [("d1", 0.1), ("d2", 0.1), ("d3", 0.1), ("d4", -0.02)]:
        b = rng.random(60)
        a = b + shift + 0.06 * rng.standard_normal(60)
        rows += [{"model": m, "dataset": g, "query_id": f"q{i}", "value": v}
                 for m, vals in (("a", a), ("b", b)) for i, v in enumerate(vals)]
        summary += [{"model": "a", "dataset": g, "value": a.mean()}, {"model": "b", "dataset": g, "value": b.mean()}]
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(rows))
    publish(root, "cpu", "nb", "summary", pd.DataFrame(summary))
    verdict = judge(root)["K-every"]
    d4 = [r for r in rows if r["dataset"] == "d4"]
    a4 = np.array([r["value"] for r in d4 if r["model"] == "a"])
    b4 = np.array([r["value"] for r in d4 if r["model"] == "b"])
    from taser_lib.evaluation import randomisation_test
    raw = randomisation_test(dict(enumerate(a4)), dict(enumerate(b4))).p_value
    assert 0.05 / 4 < raw < 0.05  # significant alone, not after the correction over four datasets
    assert verdict.status == WITHIN_NOISE and verdict.groups["d4"] == WITHIN_NOISE, verdict.detail


def test_seed_noise_can_match_the_testbed_of_the_rows_compared(tmp_path):
    """`match: [dataset]`: each group's seed noise comes from its own dataset's rows (squad-open at cpu, MS MARCO at
    full), so one declaration serves every profile."""
    from taser_book.scorecard import _seed_noise, _Tables
    text = GROUPS.replace("K-every", "K-match").replace("      compare: [a > b]\n", """\
      seed_noise:
        table: spread
        rows: {metric: MRR@10}
        match: [dataset]
      compare: [a > b]
""")
    root = make_repo(tmp_path, {"nb": text}, notebooks=("nb",))
    keys = [f"q{i}" for i in range(20)]
    rows = [{"model": m, "dataset": g, "query_id": k, "value": 0.5} for g in ("d1", "d2") for m in "ab" for k in keys]
    publish(root, "cpu", "nb", "per_query", pd.DataFrame(rows))
    publish(root, "cpu", "nb", "summary", pd.DataFrame(
        [{"model": m, "dataset": g, "value": 0.5} for g in ("d1", "d2") for m in "ab"]))
    publish(root, "cpu", "nb", "spread", pd.DataFrame(
        {"dataset": ["d1", "d1", "d2"], "metric": "MRR@10", "std": [0.01, 0.01, 0.03], "n": [3, 3, 3]}))
    claim = load_claims(root / "notebooks" / "claims")[0]
    tables = _Tables(root / "results" / "cpu", root=root)
    assert _seed_noise(claim, tables, "d1").sigma == pytest.approx(0.01)
    assert _seed_noise(claim, tables, "d2").sigma == pytest.approx(0.03)
    with pytest.raises(FormatError, match="must list columns not in rows"):
        load_claims(make_repo(tmp_path / "bad", {"nb": text.replace("match: [dataset]", "match: [metric]")},
                              notebooks=("nb",)) / "notebooks" / "claims")
