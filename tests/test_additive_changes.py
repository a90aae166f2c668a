"""Declared result-preserving changes that add to a file (taser_book/result_preserving_changes.yaml entries whose
`shown_by` is this test): every statement of the file at `from` is in the file at `to`, the same code with docstrings
dropped, but for the names listed in CHANGED; each of those behaves as before on every input it took before (its
check below runs the `from` and `to` versions side by side).
"""

from __future__ import annotations

import ast
import importlib
import shutil
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from git_versions import source_at
from test_moves import DATASETS_MOVE

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_additive_changes.py::test_each_change_keeps_what_was_there"


def _entries() -> list[dict]:
    entries = yaml.safe_load((REPO / "taser_book/result_preserving_changes.yaml").read_text(encoding="utf-8"))
    return [e for e in entries if e.get("shown_by") == TEST]


def _strip(node: ast.AST) -> ast.AST:
    for child in ast.walk(node):
        body = getattr(child, "body", None)
        if (isinstance(child, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            child.body = body[1:] or [ast.Pass()]
    return node


def _parts(source: str) -> tuple[set, dict]:
    """(import bindings, {name: code}) of a module: each def, class (and each method as Class.method, the class's
    bases as Class()), assignment and other statement, docstrings dropped."""
    imports, named = set(), {}
    for i, node in enumerate(_strip(ast.parse(source)).body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports |= {(getattr(node, "module", None), getattr(node, "level", 0), a.name, a.asname)
                        for a in node.names}
        elif isinstance(node, ast.ClassDef):
            named[f"{node.name}()"] = ast.dump(ast.Module(body=[], type_ignores=[])) + repr(
                [ast.dump(b) for b in node.bases] + [ast.dump(d) for d in node.decorator_list])
            for j, item in enumerate(node.body):
                target = getattr(item, "target", None) or (getattr(item, "targets", None) or [None])[0]
                name = getattr(item, "name", None) or (ast.unparse(target) if target is not None else f"#{j}")
                named[f"{node.name}.{name}"] = ast.dump(item)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            named[node.name] = ast.dump(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named["=".join(ast.unparse(t) for t in targets)] = ast.dump(node)
        else:
            named[ast.unparse(node)] = ast.dump(node)
    return imports, named


# Modules that moved since (tests/test_moves.py): an old version finds each under its old name
MOVED_MODULES = {"taser_lib.models.card": "taser_lib.export.card", "taser_lib.models.fused": "taser_lib.speed.fused",
                 **DATASETS_MOVE}


def _package(path: str) -> str:
    return ".".join(Path(path).with_suffix("").parts[:-1] if not path.endswith("__init__.py") else Path(path).parts[:-1])


def _name_at(path: str, sha256: str) -> str:
    return f"{_package(path)}._at_{sha256[:12]}"


def module_at(path: str, sha256: str, beside: tuple[tuple[str, str], ...] = ()) -> dict:
    """The module `path` as it was at `sha256`, run in a namespace of its own (its relative imports resolve to the
    package's current modules, but for the (path, sha256) versions `beside`, which it imports instead)."""
    package, name = _package(path), _name_at(path, sha256)
    if name not in sys.modules:  # registered, as dataclasses look their module up
        module = types.ModuleType(name)
        module.__package__, module.__file__ = package, str(REPO / path)
        sys.modules[name] = module
        swapped = {}
        for i, (other, sha) in enumerate(beside):
            module_at(other, sha, beside=beside[:i])  # each beside the versions named before it
            swapped[".".join(Path(other).with_suffix("").parts)] = sys.modules[_name_at(other, sha)]
        for old_name, new_name in MOVED_MODULES.items():  # an old version imports a moved module by its old name
            swapped.setdefault(old_name, importlib.import_module(new_name))
        current = {key: sys.modules.get(key) for key in swapped}
        sys.modules.update(swapped)
        from taser_lib.training import config

        # an old trainer registered its kind at import (config.register_kind); the kinds are a table now
        # (training.kinds), so the old registration does nothing
        config.register_kind = lambda name, config_class, run: None
        try:
            exec(compile(source_at(path, sha256), path, "exec"), module.__dict__)
        finally:
            del config.register_kind
            for key, was in current.items():
                if was is None:
                    sys.modules.pop(key, None)
                else:
                    sys.modules[key] = was
    return sys.modules[name].__dict__


# ---- the checks of what each change changed: the old and new versions agree on every input the old one took ----

def _same_passage_pairs(old, new):
    inputs = ["a passage", ("Title", "text"), ("", "untitled"), SimpleNamespace(title="T", text="x")]
    assert [new["passage_pair"](p) for p in inputs] == [old["passage_pair"](p) for p in inputs]
    assert old["PassageInput"] != new["PassageInput"]  # an annotation only: nothing reads it at run time


def _saves_what_transformers_saved(old, new, tmp_path):
    """The class bases gained SavesTokenizer: save_pretrained writes the bytes transformers' own save wrote, and
    only adds the tokenizer's files."""
    from transformers import PreTrainedModel

    from taser_lib.models import CrossEncoderModel, TaserModel

    for model in (TaserModel.from_bert("tiny", routing="deterministic"), CrossEncoderModel.from_bert("tiny")):
        before, after = tmp_path / f"{type(model).__name__}-before", tmp_path / f"{type(model).__name__}-after"
        PreTrainedModel.save_pretrained(model, before)
        model.save_pretrained(after)
        for f in before.iterdir():
            assert (after / f.name).read_bytes() == f.read_bytes(), f.name
        assert {f.name for f in after.iterdir()} - {f.name for f in before.iterdir()} <= {
            "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"}


def _same_tokenizers(old, new, tmp_path):
    text = "who wrote hamlet? Shakespeare, in 1600."
    for name in ("default", "tiny"):
        a, b = old["load_tokenizer"](name), new["load_tokenizer"](name)
        assert type(a) is type(b) and a(text)["input_ids"] == b(text)["input_ids"]


def _same_checkpoints(old, new, tmp_path, monkeypatch):
    from taser_lib.errors import TaserError

    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    for name in ("default", "tiny", tmp_path / "folder"):
        assert new["resolve_checkpoint"](name) == old["resolve_checkpoint"](name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in (tmp_path / "file", "bert-base-uncased"):  # a file; a hub name that is not cached, offline
        with pytest.raises(TaserError) as was:
            old["resolve_checkpoint"](name)
        with pytest.raises(TaserError) as now:
            new["resolve_checkpoint"](name)
        assert str(now.value) == str(was.value)


def _same_bars(old, new, tmp_path):
    for disable in (False, True):
        a, b = old["tqdm"](total=3, disable=disable), new["tqdm"](total=3, disable=disable)
        assert type(a) is type(b) and a.disable == b.disable
        a.close(), b.close()


def _same_mirrors(old, new, tmp_path, monkeypatch):
    for value in (str(tmp_path), ""):  # the Makefile, CI and reproduce always set it; empty meant none
        monkeypatch.setenv("TASER_DATA_MIRROR", value)
        assert new["resolve_mirror"]() == old["resolve_mirror"]()
        assert new["resolve_mirror"](tmp_path) == old["resolve_mirror"](tmp_path)


def _nothing_changed(old, new):
    """Only additions: every name of the old module is in the new one."""
    assert set(old) - {"__builtins__"} <= set(new)


def _function(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(_strip(ast.parse(source))) if isinstance(n, ast.FunctionDef) and n.name == name)


def _without(function: ast.FunctionDef, drop) -> str:
    """The function's code without the statements of its body that `drop(statement source)` picks."""
    function.body = [s for s in function.body if not drop(ast.unparse(s))]
    return ast.dump(function)


def _retriever_reads_and_scores_as_before(old, new, tmp_path, monkeypatch, shared_data):
    """squad-open and dpr-json sources take the code they took; a beir source reads the examples it read (where the
    old code raised, for queries without answers or a beir dev set, the new one scores by qrels)."""
    entry = next(e for e in _entries() if e["file"] == "taser_lib/training/retriever.py")
    before, after = source_at(entry["file"], entry["from"]), source_at(entry["file"], entry["to"])
    beir_branch = lambda s: s.startswith("if source.format == 'beir':")  # noqa: E731
    assert _without(_function(after, "dev_evaluator"), beir_branch) == \
        _without(_function(before, "dev_evaluator"), beir_branch)
    assert _without(_function(after, "train_slice_evaluator"), lambda s: s.startswith("if train_set.qrels")) == \
        ast.dump(_function(before, "train_slice_evaluator"))
    assert _without(_function(after, "train_retriever"), lambda s: s.startswith("for source in [*config.data")) == \
        ast.dump(_function(before, "train_retriever"))

    from taser_lib.datasets import registry
    from taser_lib.data.formats.beir import write_corpus_jsonl, write_qrels_tsv, write_queries_jsonl
    from taser_lib.datasets.slicing import slice_dataset
    from taser_lib.data.training_examples import write_dpr_retriever_json
    from taser_lib.training.config import DataSource, RetrieverDataConfig

    train = slice_dataset(registry.load_dataset("scifact", "train", data_dir=tmp_path / "data", mirror=shared_data),
                          12, 60, 1)
    folder = tmp_path / "beir"
    write_corpus_jsonl(train.corpus, folder / "corpus.jsonl")
    write_queries_jsonl(train.queries, folder / "queries.jsonl")
    write_qrels_tsv(train.qrels, folder / "qrels" / "train.tsv")
    beir = DataSource("beir", "train", str(folder))
    data = RetrieverDataConfig(train=[beir], dev=None, train_eval_questions=0, bm25_negatives=2)
    was, now = old["load_training_set"](beir, data, False), new["load_training_set"](beir, data, False)
    assert (now.name, now.examples, now.corpus) == (was.name, was.examples, was.corpus)
    dpr = DataSource("dpr-json", "train", str(tmp_path / "train.json"))
    write_dpr_retriever_json(was.examples, dpr.path)
    data = RetrieverDataConfig(train=[dpr], dev=None, hard_negative_pool=1)
    was, now = old["load_training_set"](dpr, data, False), new["load_training_set"](dpr, data, False)
    assert (now.name, now.examples, now.corpus, now.qrels) == (was.name, was.examples, was.corpus, None)


def _same_checkpoints_found(old, new, tmp_path):
    """Checkpoints are named as transformers' Trainer names them; every folder of checkpoints the old code wrote is
    listed, oldest first, and resumed from as before (a folder name touches no number)."""
    for step in (3, 40, 1000):
        (tmp_path / old["checkpoint_name"](step)).mkdir()
        (tmp_path / old["checkpoint_name"](step) / "trainer_state.json").write_text("{}")
    (tmp_path / "foreign").mkdir()
    assert new["list_checkpoints"](tmp_path) == old["list_checkpoints"](tmp_path)
    assert new["latest_checkpoint"](tmp_path) == old["latest_checkpoint"](tmp_path)
    assert new["_NAME"].match(new["checkpoint_name"](7))[1] == "7"


def _bench_reads_as_before(old, new):
    """taser_efficiency reads the bench records with find_results, by_name and describe_source (unchanged but for
    describe_source's wording: the same machine, revision and day, without the folder path); machine_line differs only
    for a GPU record; OPT_IN gains a benchmark that runs only when named."""
    if "describe_source" in old:
        bench_dir = REPO / "results" / "bench"
        results, source = new["find_results"]([bench_dir])
        assert results and results == old["find_results"]([bench_dir])[0]
        was, now = " ".join(old["describe_source"](results, source)), " ".join(new["describe_source"](results, source))
        for i, record in enumerate(results):  # the old wording named the first record's run, the new one every run
            meta = record["meta"]
            for fact in (meta["device"]["name"], str(meta["git_revision"])[:10], meta["time_utc"][:10]):
                assert fact in now and (i > 0 or fact in was)
    else:
        cpu = [{"meta": {"device": {"type": "cpu", "name": "AMD EPYC", "cores": 2, "torch_threads": 2},
                         "precision": {"native_bf16": False}, "versions": {"torch": "2.13.0"}}}]
        assert new["machine_line"](cpu) == old["machine_line"](cpu)
        assert set(old["OPT_IN"]) < set(new["OPT_IN"]) and new["NAMES"] == old["NAMES"]


def _same_losses(old, new):
    """A loss object now checks its own hyperparameters, and a setting a loss does not take is an error where it was
    dropped. Every loss, at its own settings' defaults and at other values, builds an object of the same class and
    fields computing the same loss and extra-negative score, through `rerank_loss` and through DistillTraining;
    DistillTraining keeps its fields (its saved form, so every run key); and no config file or recipe sets another
    loss's setting away from its default, the one input the old code took that the new code refuses."""
    import dataclasses

    import torch

    path = "taser_lib/training/rerank_losses.py"
    entry = _entries_of(path)[-1]  # this change's entry of the file is its last
    losses_before, losses_after = module_at(path, entry["from"]), module_at(path, entry["to"])
    if "DistillTraining" in old:  # loaded beside the old rerank_losses (LOADED_WITH)
        assert old["rerank_loss"] is losses_before["rerank_loss"]
        assert [(f.name, f.default, f.type) for f in dataclasses.fields(old["DistillTraining"])] == \
            [(f.name, f.default, f.type) for f in dataclasses.fields(new["DistillTraining"])]
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(1, 6, generator=g), torch.randn(1, 6, generator=g)
    positives = torch.tensor([[True, False, True, False, False, False]])

    def same(a, b):
        assert (type(a).__name__, dataclasses.asdict(a)) == (type(b).__name__, dataclasses.asdict(b))
        assert torch.equal(a(s, t, positives), b(s, t, positives))
        assert torch.equal(a.extra_teacher_score(t[0]), b.extra_teacher_score(t[0]))

    other = {"tau": 2.0, "tau_squared": True, "label_smoothing": 0.1, "focal_gamma": 3.0, "gamma0": 0.5}
    for name in losses_before["RERANK_LOSSES"]:
        own = losses_after["settings_of"](name)
        for settings in [{}, *({k: other[k]} for k in own)]:
            same(losses_before["rerank_loss"](name, **settings), losses_after["rerank_loss"](name, **settings))
            if "DistillTraining" in old:
                same(old["DistillTraining"](loss=name, **settings).objective,
                     new["DistillTraining"](loss=name, **settings).objective)
    from taser_lib.training.distill import DistillTraining

    defaults = {f.name: f.default for f in dataclasses.fields(DistillTraining)}
    from taser_book.runs.recipes import RERANKERS

    trainings = [yaml.safe_load(f.read_text(encoding="utf-8")).get("training") or {}
                 for f in sorted((REPO / "configs").glob("*.yaml"))]
    students = [recipe.load() for recipe in RERANKERS.values()]
    trainings += [dataclasses.asdict(config.training) for config in students if config.kind == "distill"]
    for training in trainings:
        loss = training.get("loss", defaults["loss"])
        if loss in losses_after["RERANK_LOSSES"]:
            own = losses_after["settings_of"](loss)
            assert all(training[k] == defaults[k] for k in other if k in training and k not in own), training


ROUTING_FILES = ("taser_lib/models/routing.py", "taser_lib/models/taser.py", "taser_book/analyses/routing.py")


def _routing_stack(which: str) -> tuple[dict, dict]:
    """(taser module, analyses.routing module) of the routing change's versions `which` ("from" or "to"), each
    loaded beside that version of models/routing.py (and the analyses beside that taser)."""
    routing, taser, analyses = ((path, _entries_of(path)[-1][which]) for path in ROUTING_FILES)
    return module_at(*taser, beside=(routing,)), module_at(*analyses, beside=(routing, taser))


def _same_routing(old, new, tmp_path):
    """The input kind and the real-token mask reach the routing through the forward (routing_kind, routing_mask)
    instead of attributes a context manager set on the layers. For every scheme, the old and the new model with the
    same weights give the same vectors, entropy term and routing statistics for questions and passages, in evaluation
    and in training (Gumbel sampling under one seed), with padding; expert usage reads back the same records."""
    import torch
    from transformers import BertConfig, BertModel

    (old_taser, old_usage), (new_taser, new_usage) = _routing_stack("from"), _routing_stack("to")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=6, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64), add_pooling_layer=False
              ).save_pretrained(tmp_path / "bert")
    ids = torch.randint(5, 120, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 6:] = mask[2, 3:] = 0  # padding: Tok-R's entropy and usage count real tokens only
    for routing, experts in [("deterministic", 2), ("sequence", 2), ("sequence", 3), ("token", 2), ("token", 4),
                             ("shared", 1)]:
        models = [module["TaserModel"].from_bert(tmp_path / "bert", routing=routing, num_experts=experts,
                                                 passage_format="pair") for module in (old_taser, new_taser)]
        models[1].load_state_dict(models[0].state_dict())
        for training in (False, True):
            outputs = []
            for model in models:
                model.train(training)
                torch.manual_seed(7)
                outputs.append([(model._represent(kind, ids, mask), model.routing_stats.get(kind))
                                for kind in ("query", "passage")])
            for (was, was_stats), (now, now_stats) in zip(*outputs):
                assert torch.equal(was[0], now[0]) and torch.equal(was[1], now[1]), (routing, experts, training)
                assert (was_stats is None) == (now_stats is None)
                assert was_stats is None or all(torch.equal(a, b) for a, b in zip(was_stats, now_stats))
        records = []
        for model, usage in zip(models, (old_usage, new_usage)):
            model.eval()
            with usage["record_routing"](model) as found:
                for kind in ("query", "passage"):
                    model._represent(kind, ids, mask)
            records.append([(r.layer, r.side, r.unit, r.experts.tolist(),
                             None if r.token_ids is None else r.token_ids.tolist()) for r in found])
        assert records[0] == records[1] and records[0], routing
    model = new_taser["TaserModel"].from_bert(tmp_path / "bert", routing="deterministic")
    with pytest.raises(ValueError, match="needs to know whether the batch holds questions or passages"):
        BertModel.forward(model, input_ids=ids)


def _saves_as_before_without_the_card(old, new, tmp_path):
    """The loop saves a model as before, without README.md: the model card left the core (taser_lib.export.card),
    and `taser train` and the run cache write it for a finished run. Only _save_model changed (no number of a run
    reads the card)."""
    from taser_lib.models import build_model, load_tokenizer

    model, tokenizer = build_model("taser", "tiny"), load_tokenizer("default")
    saved = []
    for module in (old, new):  # into the same folder (a card names its run's folder)
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        module["_save_model"](tmp_path / "run" / "best", model, tokenizer)
        saved.append({f.name: f.read_bytes() for f in (tmp_path / "run" / "best").iterdir()})
    before, after = saved
    if "README.md" not in after:  # this change (an earlier entry of the file changed nothing the save writes)
        assert before.pop("README.md")
    assert after == before


CHANGED = {  # file: (the names the change may change, the check that they behave as before)
    "taser_lib/models/encoding.py": ({"passage_pair", "PassageInput"}, _same_passage_pairs),
    "taser_lib/models/common.py": ({"BiEncoderMixin()"}, _saves_what_transformers_saved),
    "taser_lib/models/cross_encoder.py": ({"CrossEncoderModel()"}, _saves_what_transformers_saved),
    "taser_lib/models/__init__.py": ({"load_tokenizer"}, _same_tokenizers),
    "taser_lib/models/weights.py": ({"resolve_checkpoint"}, _same_checkpoints),
    "taser_lib/progress.py": ({"_Tqdm.__call__"}, _same_bars),
    "taser_lib/data/fetch.py": ({"resolve_mirror"}, _same_mirrors),
    "taser_lib/evaluation/retrieval.py": (set(), _nothing_changed),
    "taser_lib/io.py": (set(), _nothing_changed),
    "taser_lib/training/checkpoint.py": ({"_NAME", "checkpoint_name"}, _same_checkpoints_found),
    "taser_lib/training/loop.py": ({"_save_model", "import write_model_card"}, _saves_as_before_without_the_card),
    "taser_lib/training/rerank_losses.py": ({"OneHot.__post_init__", "Focal.__post_init__", "_Softmax.__post_init__",
                                            "rerank_loss", "settings_of", "_loss_class"}, _same_losses),
    "taser_lib/models/routing.py": ({f"{c}.route" for c in ("Routing", "SharedRouting", "DeterministicRouting",
                                                             "SequenceRouting", "TokenRouting")}, _same_routing),
    "taser_lib/models/taser.py": ({"TaserLayer.__init__", "TaserLayer.forward", "TaserModel._routing",
                                   "TaserModel._encode", "import contextmanager", "import Iterator"}, _same_routing),
    "taser_book/analyses/routing.py": ({"record_routing"}, _same_routing),
    "taser_lib/training/distill.py": ({"DistillTraining.__post_init__", "DistillTraining.objective",
                                      "LOSS_SETTINGS", "_field_default"}, _same_losses),
    "taser_book/bench/__init__.py": ({"OPT_IN", "machine_line"}, _bench_reads_as_before),
    "taser_book/bench/report.py": ({"describe_source", "implied_21m_lines", "MACHINE_QUANTITIES", "_reading"},
                                   _bench_reads_as_before),
    "taser_lib/training/retriever.py": ({"load_training_set", "dev_evaluator", "train_slice_evaluator",
                                         "train_retriever"}, _retriever_reads_and_scores_as_before),
    "taser_book/pages/common.py": (set(), _nothing_changed),  # teacher_line and questions_compared added
}


# A file whose old version must run beside the old version of another changed file (it calls it at import, or
# its old code calls the old signatures)
LOADED_WITH = {"taser_lib/training/distill.py": ("taser_lib/training/rerank_losses.py",),
               "taser_lib/models/taser.py": ("taser_lib/models/routing.py",),
               "taser_book/analyses/routing.py": ("taser_lib/models/routing.py", "taser_lib/models/taser.py")}


def _entries_of(path: str) -> list[dict]:
    return [e for e in _entries() if e["file"] == path]


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["file"])
def test_each_change_keeps_what_was_there(entry, tmp_path, monkeypatch, shared_data):
    path = entry["file"]
    allowed, check = CHANGED[path]
    old_imports, old = _parts(source_at(path, entry["from"]))
    new_imports, new = _parts(source_at(path, entry["to"]))
    dropped = {f"import {name}" for _, _, name, _ in old_imports - new_imports}
    assert dropped <= allowed, f"{path}: imports dropped beyond the declared: {sorted(dropped - allowed)}"
    changed = {name for name, code in old.items() if new.get(name) != code}
    assert changed <= allowed, f"{path}: changed beyond the declared {sorted(allowed)}: {sorted(changed - allowed)}"
    companions = tuple((other, _entries_of(other)[-1]["from"]) for other in LOADED_WITH.get(path, ()))
    before, after = module_at(path, entry["from"], beside=companions), module_at(path, entry["to"])
    kwargs = {"tmp_path": tmp_path, "monkeypatch": monkeypatch, "shared_data": shared_data}
    check(before, after, **{k: v for k, v in kwargs.items() if k in check.__code__.co_varnames})


def test_every_file_this_test_proves_is_declared():
    assert {e["file"] for e in _entries()} == set(CHANGED)


def test_the_comparison_sees_a_changed_method_and_a_dropped_import():
    base = "import os\n\nclass C(object):\n    '''Doc.'''\n    def f(self):\n        return 1\n"
    imports, parts = _parts(base)
    assert _parts(base.replace("'''Doc.'''", "'''Other doc.'''")) == (imports, parts)
    assert _parts(base.replace("return 1", "return 2"))[1]["C.f"] != parts["C.f"]
    assert _parts(base.replace("C(object)", "C(dict)"))[1]["C()"] != parts["C()"]
    assert not imports <= _parts(base.replace("import os\n", ""))[0]


def test_testbed_dropped_only_its_own_timer():
    """notebooks/testbed.ipynb between its committed result (2928ef69...) and the page_settings version (8cb1ea...):
    the same code cells but for the page's own timer (`import time`, `started = ...`, the "wall_s" parameter it
    recorded; the runner records each page's wall time in meta.json). Declared in result_preserving_changes.yaml."""
    import json

    entry = next(e for e in yaml.safe_load((REPO / "taser_book/result_preserving_changes.yaml").read_text())
                 if e.get("shown_by") == "tests/test_additive_changes.py::test_testbed_dropped_only_its_own_timer")

    class DropTimer(ast.NodeTransformer):
        def visit_Import(self, node):
            return None if [a.name for a in node.names] == ["time"] else node

        def visit_Assign(self, node):
            if ast.unparse(node).startswith("started = time.perf_counter()"):
                return None
            return self.generic_visit(node)

        def visit_Dict(self, node):
            self.generic_visit(node)
            keep = [(k, v) for k, v in zip(node.keys, node.values)
                    if not (isinstance(k, ast.Constant) and k.value == "wall_s")]
            node.keys, node.values = [k for k, _ in keep], [v for _, v in keep]
            return node

    def code(sha: str, drop: bool) -> list[str]:
        cells = json.loads(source_at(entry["file"], sha))["cells"]
        trees = [ast.parse("".join(c["source"])) for c in cells if c["cell_type"] == "code"]
        return [ast.dump(DropTimer().visit(t) if drop else t) for t in trees]

    before, after = code(entry["from"], True), code(entry["to"], False)
    assert before == after
    assert code(entry["from"], False) != after  # the timer was there, and only it went
