"""The papers' claims as data: one YAML file per notebook, `notebooks/claims/<notebook>.yaml`, loaded and validated.

A claims file lists the claims whose numbers `notebooks/<notebook>.ipynb` produces (a planned notebook's file may
exist before the notebook). Adding a notebook needs only the notebook, its claims file and `_toc.yml`. The paper
keys and titles are in `notebooks/claims/_papers.yaml`. The schema (every field is checked; an error names the
file, the line and the field):

    metrics:                       # optional: metric names this notebook's tables use beyond the library's
      epoch_seconds: wall seconds of one training epoch     # (R@K, macro/micro R@K, ir-measures names)
    claims:
      - id: T1-taser-vs-dpr        # unique over all files; letters, digits, '-', '_', '.'
        paper: TASER               # a key of _papers.yaml
        where: Table 1             # table / figure / section of the paper
        statement: TASER is on par with or better than DPR ...
        paper_numbers: 83.6 vs 82.5 (NQ) ...   # the paper's numbers, as printed there
        table: retrieval           # the result table (`save_result`'s name) in results/<profile>/<notebook>/
        column: value              # optional (default `value`): the column holding the numbers
        quantities:                # name: the filter selecting one row (column: value); `table`, `column` and
          taser: {model: taser, metric: R@20}           # `notebook` override the claim's
          dpr: {model: dpr, metric: R@20}
        test: taser >= dpr - 0.5   # the direction test: numbers, quantity names, + - * /, abs(), comparisons,
                                   # and / or / not
        over: dataset              # optional: apply the test per value of this column (each must hold) ...
        groups: [dpr-nq, squad-open]   # ... optional: only these values (default: every value all quantities have)
        noise:                     # optional: how to tell a real difference from noise
          key: query_id            # the column pairing the two sides: the query id (per-query values), `seed`,
                                   # or `replicate` (bootstrap replicates)
          test: non-inferiority    # the test the claim's words call for (taser_book.analyses.hypothesis):
                                   #   randomisation / t-test: paired, two-sided ("A beats B");
                                   #   equivalence: two one-sided tests within `margin` ("within m"; compare
                                   #     'a == b');
                                   #   non-inferiority: one-sided, A not worse than B by `margin` ("on par");
                                   #   binomial: exact test of a 0/1 quantity's share against a number
                                   #     ('share > 0.5': "most") or against a claim quantity's value read
                                   #     from the claim's table ('share > base': above a base rate);
                                   #   two-sample: permutation test of two unpaired groups;
                                   #   bootstrap: replicates of a pooled statistic (key `replicate`)
          margin: 0.5              # equivalence and non-inferiority: the claim's margin, in the value's units
          method: randomisation    # optional, margin tests: randomisation or t-test (default: t-test over seeds)
          compare: [taser >= dpr]  # the comparisons to test, `left <op> right`, each side an expression over the
                                   # quantities, evaluated per key
          table: retrieval_per_query   # optional (default: the claim's table)
          column: value            # optional (default: the claim's column)
          alpha: 0.05              # optional (default 0.05)
          quantities: {...}        # optional: filters in the noise table (default: the claim's quantities)
          seed_noise:              # optional, question-paired tests: training-seed noise the verdict must clear too
            notebook: de_distillation   # optional: where it is measured (default: the claim's notebook)
            table: rerank          # a table of means over seeds with their std (`std`) and seed count (`n`)
            rows: {dataset: squad-open, split: test, metric: MRR@10}   # the rows whose stds are pooled (a list:
                                   # any of its values; rows with fewer than 2 seeds are left out; the same
                                   # rows for every group of `over`)
            fixed: [bm25]          # optional: quantities no training seed moves (BM25, an untrained model)
            match: [dataset]       # optional: columns whose values are those of the rows the claim compares (the
                                   # testbed: squad-open at cpu, MS MARCO at full), in each group judged
        exact: parameter counts    # instead of `noise`: why the numbers carry no noise to test (counts, a proof's
                                   # floating-point error); a claim with neither reads *not testable here*, as a
                                   # difference between trained models cannot be told from their noise without a test
        requires: [r20-below-ceiling]  # optional: preconditions (below) or other claims' ids that must hold;
                                   # when one does not, the claim is *not testable here*, with its measurement
        paper_values: {taser: 83.6, dpr: 82.5}  # optional: the paper's number per quantity, for the effect ratio
                                   # (with `over`, per value: {dpr-nq: {taser: 83.6, dpr: 82.5}, ...})
        unit: s                    # optional: the numbers' unit (s, bytes, "test R@20, %", ...), shown once
                                   # after ours: "taser=2132, dpr=1469 (s)"
    preconditions:                 # optional: what must hold for claims to be testable, each a measured quantity
      r20-below-ceiling:           # with its own test; read like a claim (statement, table, column, quantities,
        statement: ...             # test, over, groups, noise), without paper, where or paper_numbers
        table: retrieval
        quantities:
          zero_shot: {model: zero-shot, metric: R@20, split: test}
        test: zero_shot < 90
        over: dataset              # a precondition per value of the claim's own `over` column excludes only the
                                   # values where it does not hold
        reads_trained_runs: false  # optional (default true): it reads no trained run (an untrained model on fixed
                                   # data), so a claim of another page may rely on it whichever machine made either
                                   # result; a premise that reads trained runs (a teacher) counts on another page only
                                   # when both results were made on one machine (a run cache does not travel)

The noise table holds one row per key for each quantity (several rows with the same key are averaged, e.g. the
seeds of one query). The verdict's direction is that of the means the test uses (per key), never of a pooled number
computed otherwise. When the claim's own table holds several rows per quantity, one per key (e.g. one per seed),
the quantity's number is their mean; a quantity's `aggregate: min` or `max` takes their minimum or maximum.
"""

from __future__ import annotations

import ast
import operator
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from taser_lib.errors import ConfigError, FormatError

CLAIMS_FOLDER = ("notebooks", "claims")
PAPERS_FILE = "_papers.yaml"
NOISE_TESTS = ("randomisation", "t-test", "equivalence", "non-inferiority", "binomial", "two-sample", "bootstrap")
MARGIN_TESTS = ("equivalence", "non-inferiority")  # need `margin`
AGGREGATES = ("mean", "min", "max")
DEFAULT_ALPHA = 0.05
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_QUANTITY_KEYS = ("notebook", "table", "column", "aggregate")  # in a quantity: overrides, not filters
_CLAIM_REQUIRED = ("id", "paper", "where", "statement", "paper_numbers", "table", "quantities", "test")
_CLAIM_OPTIONAL = ("column", "over", "groups", "noise", "exact", "requires", "paper_values", "unit")
_PRECONDITION_REQUIRED = ("statement", "table", "quantities", "test")
_PRECONDITION_OPTIONAL = ("column", "over", "groups", "noise", "unit", "reads_trained_runs")
_NOISE_REQUIRED = ("key", "test", "compare")
_NOISE_OPTIONAL = ("table", "column", "alpha", "quantities", "margin", "method", "seed_noise")
_SEED_NOISE_REQUIRED = ("table", "rows")
_SEED_NOISE_OPTIONAL = ("notebook", "std", "n", "fixed", "match")
SEED_NOISE_TESTS = ("randomisation", "non-inferiority", "equivalence")  # the question-paired tests it widens
_FILE_KEYS = ("claims", "metrics", "preconditions")


# ----------------------------------------------------------------------------------------------- the data

@dataclass(frozen=True)
class Quantity:
    """The `column` value of the single row of a result table whose columns equal `where`.

    `notebook`, `table` and `column` default to the claim's. Several matching rows are averaged over the noise key
    (one row per seed, say); `aggregate: min` or `max` takes their minimum or maximum instead (a precondition such
    as "every seed selected a step past 0")."""

    where: Mapping[str, Any]
    notebook: str | None = None
    table: str | None = None
    column: str | None = None
    aggregate: str | None = None

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}: {v}" for k, v in self.where.items()) + "}"


@dataclass(frozen=True)
class Comparison:
    """`left <op> right`, each side an expression over quantity names."""

    text: str
    left: str
    op: str
    right: str


@dataclass(frozen=True)
class SeedNoise:
    """Where the training-seed noise of one run's number is measured: the rows `rows` of `notebook`/`table` (a
    table of the mean and std over seeds, `std` and `n` columns), their stds pooled over the rows with 2 or more
    seeds. A question-paired test sees only the questions' noise: two runs of one recipe with different seeds differ
    on the same questions too."""

    table: str
    rows: Mapping[str, Any]                     # column: a value, or a list of values (any of them)
    notebook: str | None = None                 # default: the claim's
    std: str = "std"
    n: str = "n"
    fixed: tuple[str, ...] = ()                 # quantities that no training seed moves (BM25, an untrained model)
    match: tuple[str, ...] = ()                 # columns whose values are those of the rows the claim compares


@dataclass(frozen=True)
class Noise:
    key: str
    test: str                                   # one of NOISE_TESTS
    compare: tuple[Comparison, ...]
    table: str | None = None                    # default: the claim's
    column: str | None = None                   # default: the claim's
    alpha: float = DEFAULT_ALPHA
    quantities: Mapping[str, Quantity] | None = None  # default: the claim's
    margin: float | None = None                 # equivalence / non-inferiority margin, in the value's units
    method: str | None = None                   # randomisation | t-test under a margin test (default: by the key)
    seed_noise: SeedNoise | None = None         # question-paired tests: the seed noise the verdict must also clear

    @property
    def paired(self) -> bool:
        return self.test not in ("binomial", "two-sample", "bootstrap")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str                      # key of the papers file
    where: str                      # table / figure / section of the paper
    statement: str
    paper_numbers: str              # the paper's numbers, as printed there
    notebook: str                   # notebook stem whose results hold ours
    table: str                      # result table name (save_result's `name`)
    quantities: Mapping[str, Quantity]
    test: str                       # expression over the quantity names
    over: str | None = None         # evaluate the test per value of this column
    groups: tuple[str, ...] | None = None  # restrict `over` to these values (None: every value present)
    column: str = "value"
    noise: Noise | None = None
    source: str = ""                # file:line of the claim
    requires: tuple[str, ...] = ()  # preconditions (this file's `preconditions`, or other claims' ids) that must hold
    paper_values: Mapping[str, Any] | None = None  # the paper's number per quantity (effect ratio, delta RI), or
                                                    # per value of `over` such a mapping
    reads_trained_runs: bool = True  # a premise read by another page holds there only for results of one machine's
                                     # runs; False: it reads no trained run (an untrained model on fixed data)
    exact: str | None = None        # a claim without a noise test: why its numbers carry no noise (None: it has a
                                    # noise test, or it is not testable)
    precondition: bool = False      # a file's precondition: a measured fact judged on its own test, noise or not

    def paper_values_for(self, group: str | None) -> Mapping[str, float] | None:
        """The paper's numbers that apply to one value of `over` (None: the paper gives none for it)."""
        if not self.paper_values:
            return None
        if all(isinstance(v, Mapping) for v in self.paper_values.values()):
            return self.paper_values.get(group) if group is not None else None
        return self.paper_values
    unit: str | None = None         # the unit of the quantities' numbers where the metric's name does not say it

    def notebooks(self) -> tuple[str, ...]:
        """Every notebook whose results the claim reads (its own first)."""
        names = [self.notebook, *(q.notebook for q in self.quantities.values() if q.notebook)]
        return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class ClaimsFile:
    path: Path
    notebook: str
    claims: tuple[Claim, ...]
    metrics: Mapping[str, str] = field(default_factory=dict)  # documented metric names beyond the library's
    preconditions: Mapping[str, Claim] = field(default_factory=dict)  # name: what must hold for claims to be testable


# ----------------------------------------------------------------------------------------------- expressions

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_COMPARE = {ast.Gt: (">", operator.gt), ast.GtE: (">=", operator.ge), ast.Lt: ("<", operator.lt),
            ast.LtE: ("<=", operator.le)}
_EQUAL = {ast.Eq: ("==", operator.eq)}  # only in an equivalence test's comparisons: equal within its margin
_FUNCTIONS = {"abs": abs}


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise ValueError(f"cannot parse {text!r}: {err.msg}") from None


def _check_node(node: ast.AST, names: Iterable[str]) -> None:
    """Only numbers, the given names, + - * /, unary -, abs(), comparisons and and / or / not."""
    names = set(names)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            if sub.id not in names and sub.id not in _FUNCTIONS:
                raise ValueError(f"unknown name '{sub.id}' (quantities: {', '.join(sorted(names))})")
        elif isinstance(sub, ast.Call):
            if not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCTIONS) or len(sub.args) != 1 \
                    or sub.keywords:
                raise ValueError(f"only {', '.join(_FUNCTIONS)}(x) may be called")
        elif isinstance(sub, ast.Constant):
            if isinstance(sub.value, bool) or not isinstance(sub.value, (int, float)):
                raise ValueError(f"only numbers may appear as constants, not {sub.value!r}")
        elif isinstance(sub, ast.Compare):
            if not all(type(op) in _COMPARE for op in sub.ops):
                raise ValueError("comparisons are >, >=, < and <=")
        elif isinstance(sub, ast.BinOp):
            if type(sub.op) not in _BINARY:
                raise ValueError("arithmetic is +, -, * and /")
        elif isinstance(sub, ast.UnaryOp):
            if not isinstance(sub.op, (ast.USub, ast.UAdd, ast.Not)):
                raise ValueError("unary operators are - and not")
        elif not isinstance(sub, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.Load, ast.cmpop, ast.operator,
                                  ast.unaryop)):
            raise ValueError(f"{type(sub).__name__} is not allowed")


def _eval(node: ast.AST, values: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, values)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Call):
        return _FUNCTIONS[node.func.id](_eval(node.args[0], values))
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, values)
        return (not value) if isinstance(node.op, ast.Not) else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BoolOp):
        results = [bool(_eval(v, values)) for v in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, values)
            if not _COMPARE[type(op)][1](left, right):
                return False
            left = right
        return True
    raise ValueError(f"{type(node).__name__} is not allowed")


def evaluate(expression: str, values: Mapping[str, Any]) -> Any:
    """Evaluate a claim's test or a comparison side over quantity values (numbers, or numpy arrays for a side)."""
    tree = _parse(expression)
    _check_node(tree, values)
    return _eval(tree, values)


def names_in(expression: str) -> set[str]:
    return {n.id for n in ast.walk(_parse(expression)) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS}


def parse_comparison(text: str, names: Iterable[str], *, equal: bool = False) -> Comparison:
    """`left <op> right` with one comparison operator at the top, each side an arithmetic expression; with `equal`
    (an equivalence test), `left == right` instead."""
    tree = _parse(text)
    body = tree.body
    if equal:
        if not isinstance(body, ast.Compare) or len(body.ops) != 1 or not isinstance(body.ops[0], ast.Eq):
            raise ValueError(f"{text!r}: an equivalence test compares 'left == right' (equal within its margin)")
        for side in (body.left, body.comparators[0]):
            _check_node(ast.Expression(side), names)
        return Comparison(text.strip(), ast.unparse(body.left), "==", ast.unparse(body.comparators[0]))
    _check_node(tree, names)
    if not isinstance(body, ast.Compare) or len(body.ops) != 1:
        raise ValueError(f"{text!r} must be one comparison 'left <op> right' (op: >, >=, <, <=)")
    for side in (body.left, body.comparators[0]):
        if any(isinstance(n, (ast.Compare, ast.BoolOp)) or isinstance(getattr(n, "op", None), ast.Not)
               for n in ast.walk(side)):
            raise ValueError(f"{text!r}: each side must be arithmetic, not a comparison")
    return Comparison(text.strip(), ast.unparse(body.left), _COMPARE[type(body.ops[0])][0],
                      ast.unparse(body.comparators[0]))


def compare(op: str, left: Any, right: Any) -> bool:
    return bool({sym: fn for sym, fn in (*_COMPARE.values(), *_EQUAL.values())}[op](left, right))


# ----------------------------------------------------------------------------------------------- reading YAML

class _Map(dict):
    """A YAML mapping that remembers the line (1-based) of itself and of each key."""

    line: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[Any, int] = {}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml when installed: the book reads every claims file
    pass


def _construct_map(loader: _Loader, node: yaml.MappingNode):
    data = _Map()
    data.line = node.start_mark.line + 1
    yield data
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in data:
            raise FormatError(loader.name, line, str(key), "appears twice in one mapping")
        data[key] = loader.construct_object(value_node, deep=True)
        data.lines[key] = line


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)


def _read_yaml(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from None
    finally:
        loader.dispose()


def _line(mapping: Any, key: Any = None) -> int | None:
    if isinstance(mapping, _Map):
        return mapping.lines.get(key, mapping.line) if key is not None else mapping.line
    return None


class _Checker:
    """Raises FormatError(path, line, field, message) for one file."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, mapping: Any, key: Any, field_name: str, message: str) -> None:
        raise FormatError(self.path, _line(mapping, key), field_name, message)

    def text(self, mapping: Mapping, key: str, field_name: str, required: bool = True) -> str | None:
        if key not in mapping:
            if required:
                self.fail(mapping, None, field_name, "is missing")
            return None
        value = mapping[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value).strip() == "":
            self.fail(mapping, key, field_name, f"must be a non-empty text, got {value!r}")
        return str(value).strip()

    def keys(self, mapping: Mapping, allowed: Iterable[str], field_name: str) -> None:
        unknown = [k for k in mapping if k not in allowed]
        if unknown:
            self.fail(mapping, unknown[0], f"{field_name}.{unknown[0]}" if field_name else str(unknown[0]),
                      f"unknown field (known: {', '.join(allowed)})")


def _quantities(check: _Checker, mapping: Mapping, key: str, field_name: str) -> dict[str, Quantity]:
    raw = mapping[key]
    if not isinstance(raw, Mapping) or not raw:
        check.fail(mapping, key, field_name, "must map quantity names to filters, e.g. {taser: {model: taser}}")
    out: dict[str, Quantity] = {}
    for name, spec in raw.items():
        where = f"{field_name}.{name}"
        if not isinstance(name, str) or not name.isidentifier() or name in ("and", "or", "not", "abs"):
            check.fail(raw, name, where, "a quantity name must be an identifier (letters, digits, '_')")
        if not isinstance(spec, Mapping):
            check.fail(raw, name, where, "must be a mapping of column: value filters")
        filters = {}
        for column, value in spec.items():
            if column in _QUANTITY_KEYS:
                continue
            if value is None or not isinstance(value, (str, int, float, bool)):
                check.fail(spec, column, f"{where}.{column}", f"a filter value must be a text or a number, "
                                                              f"got {value!r}")
            filters[str(column)] = value
        overrides = {k: check.text(spec, k, f"{where}.{k}", required=False) for k in _QUANTITY_KEYS}
        if overrides["aggregate"] is not None and overrides["aggregate"] not in AGGREGATES:
            check.fail(spec, "aggregate", f"{where}.aggregate", f"must be one of {', '.join(AGGREGATES)}")
        out[name] = Quantity(where=filters, **overrides)
    return out


def _noise(check: _Checker, claim: Mapping, field_name: str, names: Iterable[str]) -> Noise:
    raw = claim["noise"]
    if not isinstance(raw, Mapping):
        check.fail(claim, "noise", field_name, "must be a mapping (key, test, compare, ...)")
    check.keys(raw, _NOISE_REQUIRED + _NOISE_OPTIONAL, field_name)
    for key in _NOISE_REQUIRED:
        if key not in raw:
            check.fail(raw, None, f"{field_name}.{key}", "is missing")
    test = check.text(raw, "test", f"{field_name}.test")
    if test not in NOISE_TESTS:
        check.fail(raw, "test", f"{field_name}.test", f"must be one of {', '.join(NOISE_TESTS)}, got {test!r}")
    quantities = _quantities(check, raw, "quantities", f"{field_name}.quantities") if "quantities" in raw else None
    if quantities is not None and test == "binomial":  # the shares tested; a reference share may be a claim quantity
        if not set(quantities) <= set(names):
            check.fail(raw, "quantities", f"{field_name}.quantities",
                       f"must name some of the claim's quantities ({', '.join(names)}), got {', '.join(quantities)}")
    elif quantities is not None and set(quantities) != set(names):
        check.fail(raw, "quantities", f"{field_name}.quantities",
                   f"must name the claim's quantities ({', '.join(names)}), got {', '.join(quantities)}")
    comparisons = raw["compare"]
    if isinstance(comparisons, str):
        comparisons = [comparisons]
    if not isinstance(comparisons, list) or not comparisons:
        check.fail(raw, "compare", f"{field_name}.compare", "must be a list of comparisons such as 'a > b'")
    parsed = []
    for text in comparisons:
        if not isinstance(text, str):
            check.fail(raw, "compare", f"{field_name}.compare", f"{text!r} is not a comparison")
        try:
            parsed.append(parse_comparison(text, names, equal=test == "equivalence"))
        except ValueError as err:
            check.fail(raw, "compare", f"{field_name}.compare", str(err))
        if test == "binomial":
            right = parsed[-1].right
            try:
                p0 = float(ast.literal_eval(right))
            except (ValueError, SyntaxError):
                p0 = 0.5 if right in names else float("nan")  # a claim quantity: its value, read when judged
            tested = set(quantities) if quantities is not None else set(names)
            if not 0 < p0 < 1 or parsed[-1].left not in tested:
                check.fail(raw, "compare", f"{field_name}.compare",
                           f"{text!r}: a binomial test compares one quantity's share with a number in (0, 1) or "
                           "with another of the claim's quantities (a reference share, such as a base rate)")
        if test == "two-sample" and not (parsed[-1].left in names and parsed[-1].right in names):
            check.fail(raw, "compare", f"{field_name}.compare",
                       f"{text!r}: a two-sample test compares two quantities, 'a > b'")
    alpha = raw.get("alpha", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        check.fail(raw, "alpha", f"{field_name}.alpha", f"must be a number between 0 and 1, got {alpha!r}")
    margin = raw.get("margin")
    if test in MARGIN_TESTS:
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin < 0 or \
                (test == "equivalence" and margin == 0):
            check.fail(raw, "margin" if "margin" in raw else None, f"{field_name}.margin",
                       f"a {test} test needs a margin (a number > 0, in the value's units), got {margin!r}")
        margin = float(margin)
    elif margin is not None:
        check.fail(raw, "margin", f"{field_name}.margin", f"only {' and '.join(MARGIN_TESTS)} tests take a margin")
    method = check.text(raw, "method", f"{field_name}.method", required=False)
    if method is not None and (test not in MARGIN_TESTS or method not in ("randomisation", "t-test")):
        check.fail(raw, "method", f"{field_name}.method",
                   "a margin test's method is randomisation or t-test (other tests take none)")
    key = check.text(raw, "key", f"{field_name}.key")
    seed_noise = _seed_noise(check, raw, f"{field_name}.seed_noise", key, test, list(names)) \
        if "seed_noise" in raw else None
    return Noise(key=key, test=test, compare=tuple(parsed),
                 table=check.text(raw, "table", f"{field_name}.table", required=False),
                 column=check.text(raw, "column", f"{field_name}.column", required=False), alpha=float(alpha),
                 quantities=quantities, margin=margin, method=method, seed_noise=seed_noise)


def _seed_noise(check: _Checker, noise: Mapping, field_name: str, key: str, test: str,
                names: Iterable[str]) -> SeedNoise:
    raw = noise["seed_noise"]
    if not isinstance(raw, Mapping):
        check.fail(noise, "seed_noise", field_name, "must be a mapping (table, rows, ...)")
    if key != "query_id" or test not in SEED_NOISE_TESTS:
        check.fail(noise, "seed_noise", field_name, f"widens question-paired tests only (key query_id, test "
                                                     f"{', '.join(SEED_NOISE_TESTS)}), not key {key}, test {test}")
    check.keys(raw, _SEED_NOISE_REQUIRED + _SEED_NOISE_OPTIONAL, field_name)
    for name in _SEED_NOISE_REQUIRED:
        if name not in raw:
            check.fail(raw, None, f"{field_name}.{name}", "is missing")
    rows = raw["rows"]

    def scalar(v: Any) -> bool:
        return isinstance(v, (str, int, float, bool))

    if not isinstance(rows, Mapping) or not rows or not all(
            scalar(v) or (isinstance(v, list) and v and all(scalar(x) for x in v)) for v in rows.values()):
        check.fail(raw, "rows", f"{field_name}.rows", "must map columns to a value or a list of values, e.g. "
                                                      "{metric: MRR@10, model: [de, m3se]}")
    text = {k: check.text(raw, k, f"{field_name}.{k}", required=k in _SEED_NOISE_REQUIRED)
            for k in ("table", "notebook", "std", "n")}
    fixed = raw.get("fixed") or []
    if isinstance(fixed, str):
        fixed = [fixed]
    if not isinstance(fixed, list) or not all(isinstance(f, str) and f in names for f in fixed):
        check.fail(raw, "fixed", f"{field_name}.fixed", f"must list some of the claim's quantities "
                                                        f"({', '.join(names)}), got {fixed!r}")
    match = raw.get("match") or []
    if isinstance(match, str):
        match = [match]
    if not isinstance(match, list) or not all(isinstance(m, str) and m not in rows for m in match):
        check.fail(raw, "match", f"{field_name}.match", f"must list columns not in rows, got {match!r}")
    return SeedNoise(table=text["table"], rows={str(k): v for k, v in rows.items()}, notebook=text["notebook"],
                     std=text["std"] or "std", n=text["n"] or "n", fixed=tuple(fixed), match=tuple(match))


def _claim(check: _Checker, raw: Any, index: int, notebook: str, papers: Mapping[str, str] | None,
           container: Any) -> Claim:
    if not isinstance(raw, Mapping):
        check.fail(container, "claims", f"claims[{index}]", "must be a mapping (id, paper, where, ...)")
    label = str(raw.get("id", f"claims[{index}]"))
    for key in _CLAIM_REQUIRED:
        if key not in raw:
            check.fail(raw, None, f"{label}.{key}", "is missing")
    check.keys(raw, _CLAIM_REQUIRED + _CLAIM_OPTIONAL, label)
    claim_id = check.text(raw, "id", f"claims[{index}].id")
    if not _ID.match(claim_id):
        check.fail(raw, "id", f"{label}.id", "use letters, digits, '-', '_' and '.'")
    paper = check.text(raw, "paper", f"{label}.paper")
    if papers is not None and paper not in papers:
        check.fail(raw, "paper", f"{label}.paper", f"unknown paper '{paper}' (known: {', '.join(papers)})")
    quantities = _quantities(check, raw, "quantities", f"{label}.quantities")
    test = check.text(raw, "test", f"{label}.test")
    try:
        tree = _parse(test)
        _check_node(tree, quantities)
        result = _eval(tree, {name: 1.0 for name in quantities})
    except (ValueError, ZeroDivisionError, TypeError) as err:
        check.fail(raw, "test", f"{label}.test", str(err))
    if not isinstance(result, bool):
        check.fail(raw, "test", f"{label}.test", f"{test!r} is not a comparison (it must say true or false)")
    over = check.text(raw, "over", f"{label}.over", required=False)
    groups = raw.get("groups")
    if groups is not None:
        if over is None:
            check.fail(raw, "groups", f"{label}.groups", "needs 'over' (the column the groups are values of)")
        if isinstance(groups, (str, int, float)) and not isinstance(groups, bool):
            groups = [groups]
        if not isinstance(groups, list) or not groups or \
                not all(isinstance(g, (str, int, float)) and not isinstance(g, bool) for g in groups):
            check.fail(raw, "groups", f"{label}.groups", "must be a list of values of the 'over' column")
        groups = tuple(str(g) for g in groups)
    noise = _noise(check, raw, f"{label}.noise", list(quantities)) if "noise" in raw else None
    exact = check.text(raw, "exact", f"{label}.exact", required=False)
    if exact is not None and noise is not None:
        check.fail(raw, "exact", f"{label}.exact", "a claim with a noise test is not exact: keep one of the two")
    requires = raw.get("requires", [])
    if isinstance(requires, str):
        requires = [requires]
    if not isinstance(requires, list) or not all(isinstance(r, str) and r.strip() for r in requires):
        check.fail(raw, "requires", f"{label}.requires", "must list precondition names or claim ids")
    paper_values = raw.get("paper_values")
    if paper_values is not None:
        def numbers(values: Any) -> bool:
            return isinstance(values, Mapping) and bool(values) and all(
                name in quantities and isinstance(v, (int, float)) and not isinstance(v, bool)
                for name, v in values.items())

        per_group = isinstance(paper_values, Mapping) and bool(paper_values) and over is not None and all(
            isinstance(v, Mapping) for v in paper_values.values())
        if not (numbers(paper_values) or (per_group and all(numbers(v) for v in paper_values.values()))):
            check.fail(raw, "paper_values", f"{label}.paper_values",
                       f"must map quantity names ({', '.join(quantities)}) to the paper's numbers, or (with "
                       f"'over') each value of '{over}' to such a mapping")
        paper_values = ({str(g): {str(k): float(v) for k, v in vals.items()} for g, vals in paper_values.items()}
                        if per_group else {str(k): float(v) for k, v in paper_values.items()})
    return Claim(id=claim_id, paper=paper, where=check.text(raw, "where", f"{label}.where"),
                 statement=check.text(raw, "statement", f"{label}.statement"),
                 paper_numbers=check.text(raw, "paper_numbers", f"{label}.paper_numbers"), notebook=notebook,
                 table=check.text(raw, "table", f"{label}.table"), quantities=quantities, test=test, over=over,
                 groups=groups, column=check.text(raw, "column", f"{label}.column", required=False) or "value",
                 noise=noise, source=f"{check.path}:{_line(raw)}", requires=tuple(r.strip() for r in requires),
                 paper_values=paper_values, unit=check.text(raw, "unit", f"{label}.unit", required=False),
                 exact=exact)


def _precondition(check: _Checker, name: Any, raw: Any, notebook: str, container: Any) -> Claim:
    """A file's precondition: a measured quantity and its test, read like a claim (no paper, no requires)."""
    label = f"preconditions.{name}"
    if not isinstance(name, str) or not _ID.match(name):
        check.fail(container, name, label, "a precondition's name uses letters, digits, '-', '_' and '.'")
    if not isinstance(raw, Mapping):
        check.fail(container, name, label, "must be a mapping (statement, table, quantities, test, ...)")
    check.keys(raw, _PRECONDITION_REQUIRED + _PRECONDITION_OPTIONAL, label)
    body = _Map()
    body.line = _line(raw)
    body.lines = dict(getattr(raw, "lines", {}))
    body.update(raw)
    body.update({"id": name, "paper": "-", "where": "precondition", "paper_numbers": "-"})
    for key in _PRECONDITION_REQUIRED:
        if key not in raw:
            check.fail(raw, None, f"{label}.{key}", "is missing")
    trained = body.pop("reads_trained_runs", True)
    if not isinstance(trained, bool):
        check.fail(raw, "reads_trained_runs", f"{label}.reads_trained_runs", "must be true or false")
    return replace(_claim(check, body, 0, notebook, None, container), reads_trained_runs=trained, precondition=True)


def load_papers(claims_dir: str | os.PathLike) -> dict[str, str]:
    """{paper key: title} from `<claims_dir>/_papers.yaml`, in its order."""
    path = Path(claims_dir) / PAPERS_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing: it lists the papers' keys and titles ('TASER: Cheng et al., ...')")
    data = _read_yaml(path)
    check = _Checker(path)
    if not isinstance(data, Mapping) or not data:
        check.fail(data, None, None, "must map paper keys to titles, e.g. 'TASER: Cheng et al., TASER (2023)'")
    return {str(k): check.text(data, k, str(k)) for k in data}


def load_claims_file(path: str | os.PathLike, papers: Mapping[str, str] | None = None) -> ClaimsFile:
    """One notebook's claims file, validated (`papers`: the known paper keys; None skips that check)."""
    path = Path(path)
    check = _Checker(path)
    data = _read_yaml(path)
    if data is None:
        data = _Map()
    if not isinstance(data, Mapping):
        check.fail(data, None, None, "must be a mapping with 'claims' (a list) and optionally 'metrics'")
    check.keys(data, _FILE_KEYS, "")
    claims_raw = data.get("claims", [])
    if not isinstance(claims_raw, list):
        check.fail(data, "claims", "claims", "must be a list of claims")
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        check.fail(data, "metrics", "metrics", "must map metric names to what they measure")
    metrics = {str(k): check.text(metrics, k, f"metrics.{k}") for k in metrics}
    notebook = path.stem
    preconditions_raw = data.get("preconditions") or {}
    if not isinstance(preconditions_raw, Mapping):
        check.fail(data, "preconditions", "preconditions", "must map names to preconditions")
    preconditions = {str(name): _precondition(check, name, raw, notebook, preconditions_raw)
                     for name, raw in preconditions_raw.items()}
    claims = tuple(_claim(check, raw, i, notebook, papers, data) for i, raw in enumerate(claims_raw))
    seen: dict[str, int] = {}
    for i, claim in enumerate(claims):
        if claim.id in seen:
            check.fail(claims_raw[i], "id", f"{claim.id}.id", f"duplicate id (also claims[{seen[claim.id]}])")
        seen[claim.id] = i
    return ClaimsFile(path=path, notebook=notebook, claims=claims, metrics=metrics, preconditions=preconditions)


def claims_files(claims_dir: str | os.PathLike) -> list[Path]:
    """The claims files in `claims_dir` (every `*.yaml` but `_papers.yaml`), sorted by name."""
    folder = Path(claims_dir)
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith(("_", ".")))


def load_claims_files(claims_dir: str | os.PathLike) -> list[ClaimsFile]:
    """Every claims file of `claims_dir`, validated; ids must be unique across files."""
    folder = Path(claims_dir)
    if not folder.is_dir():
        raise ConfigError(f"no claims folder at {folder} (it holds one <notebook>.yaml per notebook)")
    papers = load_papers(folder)
    files = [load_claims_file(p, papers) for p in claims_files(folder)]
    first: dict[str, str] = {}
    for f in files:
        for claim in f.claims:
            if claim.id in first:
                path, line = claim.source.rsplit(":", 1)
                raise FormatError(path, int(line) if line.isdigit() else None, f"{claim.id}.id",
                                  f"duplicate id (also in {first[claim.id]})")
            first[claim.id] = claim.source
    names = {name: f for f in files for name in f.preconditions}
    clash = next((n for n in names if n in first), None)
    if clash is not None:
        pre = names[clash].preconditions[clash]
        path, line = pre.source.rsplit(":", 1)
        raise FormatError(path, int(line) if line.isdigit() else None, f"preconditions.{clash}",
                          f"the name is a claim id too (in {first[clash]})")
    check_requires([c for f in files for c in f.claims], {n: f.preconditions[n] for n, f in names.items()})
    return files


def load_preconditions(claims_dir: str | os.PathLike) -> dict[str, Claim]:
    """Every claims file's preconditions, by name (a name is unique across files and claim ids)."""
    found: dict[str, Claim] = {}
    for f in load_claims_files(claims_dir):
        for name, pre in f.preconditions.items():
            if name in found:
                path, line = pre.source.rsplit(":", 1)
                raise FormatError(path, int(line) if line.isdigit() else None, f"preconditions.{name}",
                                  f"duplicate precondition name (also in {found[name].source})")
            found[name] = pre
    return found


def check_requires(claims: Iterable[Claim], preconditions: Mapping[str, Claim]) -> None:
    """Every `requires` names a precondition or another claim, and none requires itself (directly or not)."""
    by_id = {c.id: c for c in claims}
    for claim in by_id.values():
        for name in claim.requires:
            if name not in preconditions and name not in by_id:
                path, line = claim.source.rsplit(":", 1)
                raise FormatError(path, int(line) if line.isdigit() else None, f"{claim.id}.requires",
                                  f"'{name}' is neither a precondition nor a claim id")
    # a cycle, not a shared premise: two claims may require the same third one (a diamond is fine)
    state: dict[str, str] = {}  # claim id -> "open" while its requirements are walked, "done" after

    def walk(cid: str, trail: list[str]) -> None:
        state[cid] = "open"
        for name in by_id[cid].requires:
            if name not in by_id:
                continue  # a precondition: requires nothing
            if state.get(name) == "open":  # on the path walked to here: a loop back to it
                chain = [*trail, cid]
                path, line = by_id[name].source.rsplit(":", 1)
                raise FormatError(path, int(line) if line.isdigit() else None, f"{name}.requires",
                                  "requires itself: " + " -> ".join([*chain[chain.index(name):], name]))
            if state.get(name) != "done":
                walk(name, [*trail, cid])
        state[cid] = "done"

    for cid in by_id:
        if cid not in state:
            walk(cid, [])


def load_claims(claims_dir: str | os.PathLike) -> tuple[Claim, ...]:
    """Every claim of every claims file in `claims_dir`: by paper (the papers file's order), then by file name,
    then in file order."""
    papers = list(load_papers(claims_dir))
    claims = [c for f in load_claims_files(claims_dir) for c in f.claims]
    return tuple(sorted(claims, key=lambda c: papers.index(c.paper)))  # stable: file and claim order kept


def find_root(start: str | os.PathLike | None = None) -> Path:
    """The repository root holding `notebooks/claims/`: `start` (default: the working directory) or its parent
    when it is `notebooks/` itself (a running notebook's directory), else the checkout holding this package."""
    here = Path(start) if start is not None else Path.cwd()
    candidates = [here, here.parent, Path(__file__).resolve().parent.parent]
    for root in candidates:
        if root.joinpath(*CLAIMS_FOLDER).is_dir():
            return root
    raise ConfigError(f"no {'/'.join(CLAIMS_FOLDER)} folder in {here}, its parent or the package's checkout")


def claims_dir(root: str | os.PathLike | None = None) -> Path:
    return (Path(root) if root is not None else find_root()).joinpath(*CLAIMS_FOLDER)


# --- the papers' tables as data ------------------------------------------------------------------------------------

PAPER_TABLES_FILE = "_paper_tables.yaml"


def paper_table(name: str, root: str | os.PathLike | None = None):
    """A published table of `<claims dir>/_paper_tables.yaml` as a long frame (table, where, model, label,
    dataset, metric, value): the paper's numbers that notebooks plot beside ours. An unknown name lists the known."""
    import pandas as pd

    path = claims_dir(root) / PAPER_TABLES_FILE
    data = _read_yaml(path)
    tables = data.get("tables") if isinstance(data, Mapping) else None
    if not isinstance(tables, Mapping):
        raise FormatError(path, None, "tables", "expected a mapping 'tables: {name: {paper, where, rows}}'")
    if name not in tables:
        raise FormatError(path, None, f"tables.{name}", f"no such table; known: {', '.join(tables)}")
    table = tables[name]
    rows = []
    for i, row in enumerate(table.get("rows") or []):
        values = row.get("values") if isinstance(row, Mapping) else None
        if not isinstance(values, Mapping) or "model" not in row:
            raise FormatError(path, _line(row), f"tables.{name}.rows[{i}]", "needs 'model' and 'values'")
        for dataset, metrics in values.items():
            for metric, value in metrics.items():
                rows.append({"table": name, "where": table.get("where", ""), "model": row["model"],
                             "label": row.get("label", row["model"]), "dataset": dataset, "metric": metric,
                             "value": float(value)})
    return pd.DataFrame(rows)
