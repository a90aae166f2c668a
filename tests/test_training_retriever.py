"""Retriever trainer: DPR-style batches, collation, the Eq. 2 / Eq. 5 loss, R@K evaluation, the YAML config,
end-to-end training on a real SQuAD-open sample, and TASER App. B hard-negative mining."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from training_helpers import make_tiny_bert, tiny_config, write_passages_tsv, write_squad_sample, write_yaml
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_book.cli import main as cli_main
from taser_lib.data.answers import has_answer
from taser_lib.data.squad_open import build_squad_open, write_squad_open
from taser_lib.data.training_examples import TrainingExample
from taser_lib.data.types import Document, Query
from taser_lib.errors import ConfigError, FormatError
from taser_lib.models import TaserModel, build_model, load_encoder, load_model, load_tokenizer
from taser_lib.training import retriever as R
from taser_lib.training.config import DataSource, RetrieverDataConfig, TrainConfig
from taser_lib.training.kinds import config_from_dict, default_yaml, load_config
from taser_lib.training.mining import train_with_mined_negatives, with_mined_negatives

pytestmark = pytest.mark.usefixtures("one_thread")


def doc(i, text="some text", title="T"):
    return Document(f"d{i}", text, title)


def example(i, n_hard=2, n_neg=0, n_pos=1):
    return TrainingExample(Query(f"q{i}", f"question {i}", ("answer",)),
                           [doc(f"{i}p{k}") for k in range(n_pos)],
                           [doc(f"{i}n{k}") for k in range(n_neg)],
                           [doc(f"{i}h{k}") for k in range(n_hard)])


def items(batches, position=0):
    """Collated items when the collator is the identity."""
    return list(batches.iter_from(position))


@pytest.fixture(scope="module")
def squad(shared_data):
    return build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def sample(squad, tmp_path_factory):
    return write_squad_sample(squad, tmp_path_factory.mktemp("squad-sample"))


# --- batches -----------------------------------------------------------------------------------------------------

def test_batches_are_deterministic_resumable_and_from_one_set():
    sets = [R.TrainingSet("a", [example(i) for i in range(10)]), R.TrainingSet("b", [example(100 + i)
                                                                                    for i in range(7)])]
    batches = R.RetrieverBatches(sets, lambda x: x, batch_size=3, hard_negatives=1, seed=5, world_size=1, rank=0)
    assert len(batches) == 3 + 2  # 10 // 3 + 7 // 3: incomplete batches dropped
    batches.set_epoch(0)
    epoch0 = items(batches)
    assert items(batches, 2) == epoch0[2:]  # replay from any position
    for batch in epoch0:  # each batch holds questions of one set only
        prefixes = {q.split()[1][:1] if int(q.split()[1]) >= 100 else "a" for q, _ in batch}
        assert len(prefixes) == 1
    seen = [q for batch in epoch0 for q, _ in batch]
    assert len(seen) == len(set(seen)) == 15
    batches.set_epoch(1)
    assert items(batches) != epoch0  # a new order every epoch ...
    again = R.RetrieverBatches(sets, lambda x: x, batch_size=3, hard_negatives=1, seed=5, world_size=1, rank=0)
    again.set_epoch(1)
    assert items(again) == items(batches)  # ... fixed by (seed, epoch)


def test_groups_positive_first_then_hard_negatives_topped_up_and_short_examples_skipped():
    sets = [R.TrainingSet("a", [example(0, n_hard=3), example(1, n_hard=1, n_neg=2), example(2, n_hard=0, n_neg=1),
                                example(3, n_pos=0)])]
    batches = R.RetrieverBatches(sets, lambda x: x, batch_size=1, hard_negatives=2, seed=0, world_size=1, rank=0)
    assert batches.skipped == {"a": 2}  # one without enough negatives, one without a positive
    groups = {q: g for batch in items(batches) for q, g in batch}
    assert len(groups) == 2
    g0 = groups["question 0"]
    assert g0[0].id == "d0p0" and len(g0) == 3 and {d.id for d in g0[1:]} <= {"d0h0", "d0h1", "d0h2"}
    g1 = groups["question 1"]
    assert [d.id for d in g1[:2]] == ["d1p0", "d1h0"] and g1[2].id in {"d1n0", "d1n1"}
    # shuffle_positives draws among all positives
    multi = [R.TrainingSet("a", [example(0, n_pos=4)])]
    drawn = set()
    for epoch in range(12):
        b = R.RetrieverBatches(multi, lambda x: x, 1, 1, seed=0, shuffle_positives=True, world_size=1, rank=0)
        b.set_epoch(epoch)
        drawn.add(items(b)[0][0][1][0].id)
    assert len(drawn) > 1


def test_distributed_ranks_split_the_global_batch():
    sets = [R.TrainingSet("a", [example(i) for i in range(16)])]
    single = R.RetrieverBatches(sets, lambda x: x, batch_size=4, seed=1, world_size=1, rank=0)
    ranks = [R.RetrieverBatches(sets, lambda x: x, batch_size=2, seed=1, world_size=2, rank=r) for r in (0, 1)]
    assert len(single) == len(ranks[0]) == len(ranks[1]) == 4
    for b, (r0, r1) in enumerate(zip(items(ranks[0]), items(ranks[1]))):
        assert r0 + r1 == items(single)[b]


def test_collator_tokenises_questions_and_title_text_pairs(tiny_bert):
    tok = load_tokenizer(tiny_bert)
    collate = R.RetrieverCollator(tok, max_query_length=8, max_passage_length=12)
    long_text = "hamlet was written by william shakespeare around the year sixteen hundred"
    batch = collate([("who wrote hamlet", [doc(1, long_text, "Hamlet"), doc(2)]),
                     ("where is paris", [doc(3, "paris is in france", "Paris"), doc(4)])])
    assert batch["query"]["input_ids"].shape[0] == 2 and batch["passage"]["input_ids"].shape[0] == 4
    assert batch["passage"]["input_ids"].shape[1] == 12  # truncated to the maximum length
    first = tok.decode(batch["passage"]["input_ids"][0])
    assert first.startswith("[CLS] hamlet [SEP] hamlet was written") and "[SEP]" in first[15:]
    assert tok.decode(batch["query"]["input_ids"][1], skip_special_tokens=True) == "where is paris"


def test_collator_reads_passages_as_the_model_and_its_encoder_do(tiny_bert, tmp_path):
    """A model built from a sentence-transformers checkpoint trains on "title text" strings, one from a plain BERT
    on title/text pairs: train_retriever's collator takes the model's passage_format, the one DenseEncoder reads."""
    from taser_lib.models import DenseEncoder
    from taser_lib.models.encoding import model_passage_format

    tok = load_tokenizer(tiny_bert)
    groups = [("who wrote hamlet", [doc(1, "hamlet was written by shakespeare", "Hamlet"), doc(2, "x", "")])]
    for fmt in ("pair", "concat"):
        model = build_model("taser", tiny_bert, passage_format=fmt)
        assert model_passage_format(model) == fmt
        batch = R.RetrieverCollator(tok, max_passage_length=32, passage_format=model_passage_format(model))(groups)
        ours = DenseEncoder(model, tok, max_passage_length=32, show_progress=False)
        expected = ours.tokenize_passages([p for _, group in groups for p in group])["input_ids"]
        got = [[i for i, m in zip(ids, mask) if m] for ids, mask in
               zip(batch["passage"]["input_ids"].tolist(), batch["passage"]["attention_mask"].tolist())]
        assert got == expected
        first = tok.decode(got[0])
        assert first.startswith("[CLS] hamlet [SEP] hamlet" if fmt == "pair" else "[CLS] hamlet hamlet")


# --- loss and evaluation -------------------------------------------------------------------------------------

def _spy_similarity(model, calls: list):
    """Record every call of the model's own compute_similarity (and still compute it)."""
    real = model.compute_similarity

    def spy(q_reps, p_reps):
        scores = real(q_reps, p_reps)
        calls.append(scores)
        return scores

    model.compute_similarity = spy
    return model


@pytest.mark.parametrize("arch, overrides", [
    ("dpr", {"similarity_scale": 3.0}),
    ("taser", {"routing": "sequence", "similarity_scale": 3.0, "entropy_weight": 0.5}),
    ("shared", {"pooling": "mean", "normalize": True, "similarity_scale": 3.0}),
    ("colbert", {"dim": 8, "similarity_scale": 3.0}),
])
def test_loss_is_eq2_on_the_models_own_scores_plus_beta_routing_entropy(tiny_bert, arch, overrides):
    """retriever_loss scores with the model's compute_similarity and runs losses.contrastive_loss (Eq. 2) and
    losses.joint_loss (Eq. 5)."""
    tok = load_tokenizer(tiny_bert)
    model = build_model(arch, tiny_bert, **overrides).eval()  # eval: routing by argmax, no Gumbel noise
    calls = []
    _spy_similarity(model, calls)
    batch = R.RetrieverCollator(tok)([("q one", [doc(1, "alpha"), doc(2, "beta")]),
                                      ("q two", [doc(3, "gamma"), doc(4, "delta")])])
    loss, logs = R.retriever_loss(model, batch)
    assert len(calls) == 1 and calls[0].shape == (2, 4)  # 2 questions x 4 passages, scored by the model
    out = model(query=batch["query"], passage=batch["passage"])
    scores = model.compute_similarity(out.q_reps, out.p_reps)
    torch.testing.assert_close(calls[0], scores)
    expected_sim = F.cross_entropy(scores, torch.tensor([0, 2]))  # positives at columns 0 and 2
    assert logs["l_sim"] == pytest.approx(float(expected_sim.detach()), rel=1e-5)
    beta = overrides.get("entropy_weight", 0.0) if arch == "taser" else 0.0
    assert (logs["l_ent"] < 0) == (arch == "taser")  # L_ent of Seq-R (release: -H); zero for the others
    assert ("h_unit" in logs and "h_batch" in logs) == (arch == "taser")  # the entropies themselves, logged
    if arch == "taser":
        assert logs["h_unit"] == pytest.approx(-logs["l_ent"] / 2, rel=1e-5)  # per pass, two passes added
    assert float(loss.detach()) == pytest.approx(float(expected_sim.detach()) + beta * logs["l_ent"], rel=1e-5)


@pytest.mark.parametrize("passage_format", ["pair", "concat"])
def test_train_retriever_collates_passages_as_the_model_reads_them(tiny_bert, sample, tmp_path, monkeypatch,
                                                                  passage_format):
    seen = []

    class Spy(R.RetrieverCollator):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append(self.passage_format)

    monkeypatch.setattr(R, "RetrieverCollator", Spy)
    raw = tiny_config(tiny_bert, sample, tmp_path / "run", max_steps=1, checkpoint_every=1, eval_every=1)
    raw["model"]["overrides"]["passage_format"] = passage_format
    raw["data"].update(dev=None, train_eval_questions=0)
    R.train_retriever(config_from_dict(raw), progress=False)
    assert seen == [passage_format]
    assert load_model(tmp_path / "run" / "final").config.passage_format == passage_format


def test_colbert_retriever_trains_a_few_cpu_steps(tiny_bert, sample, tmp_path):
    raw = tiny_config(tiny_bert, sample, tmp_path / "run", max_steps=10, checkpoint_every=5, eval_every=5)
    raw["model"] = {"arch": "colbert", "name_or_path": str(tiny_bert),
                    "overrides": {"dim": 16, "similarity_scale": 20.0}}
    raw["data"].update(dev=None, train_eval_questions=0)
    config = config_from_dict(raw)
    start = build_model("colbert", tiny_bert, dim=16)
    result = R.train_retriever(config, progress=False)
    out = tmp_path / "run"
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert result.final_step == 10 and [r["step"] for r in log] == list(range(1, 11))
    first, last = sum(r["loss"] for r in log[:3]) / 3, sum(r["loss"] for r in log[-3:]) / 3
    assert last < first - 0.1, (first, last)
    trained = load_model(out / "final")
    assert type(trained).__name__ == "ColbertModel" and trained.config.dim == 16
    before, after = start.state_dict(), trained.state_dict()
    assert set(before) == set(after)
    assert not torch.equal(before["projection.weight"], after["projection.weight"])
    assert not torch.equal(before["encoder.layer.0.attention.self.query.weight"],
                           after["encoder.layer.0.attention.self.query.weight"])
    # ColBERT has no dense index: R@K evaluation and mining are refused at load time, naming the field
    raw["data"]["dev"] = {"format": "dpr-json", "path": str(sample["dev"])}
    with pytest.raises(FormatError, match="field 'model.arch' a colbert retriever has no dense index"):
        config_from_dict(raw)


def test_eval_corpus_whole_or_subset():
    corpus = {f"c{i}": doc(f"c{i}") for i in range(50)}
    ex = [example(0, n_hard=2, n_neg=1), TrainingExample(Query("x", "q"), [Document("", "no id", "t")])]
    assert R.eval_corpus(ex, corpus, None, seed=0) is corpus
    sub = R.eval_corpus(ex, corpus, 10, seed=0)  # positives, the best hard negative, 10 sampled
    assert {"d0p0", "d0h0"} <= set(sub) and len(sub) == 2 + 1 + 10 and not {"d0h1", "d0n0"} & set(sub)
    assert set(sub) - {"d0p0", "d0h0"} - set(corpus) == {k for k in sub if k.startswith("sha1:")}
    assert sub == R.eval_corpus(ex, corpus, 10, seed=0)  # fixed sample
    digest_key = [k for k in sub if k.startswith("sha1:")]
    assert len(digest_key) == 1 and sub[digest_key[0]].text == "no id"
    # without a corpus (DPR json dev files): every passage of the examples
    assert set(R.eval_corpus(ex[:1], None, None, seed=0)) == {"d0p0", "d0h0", "d0h1", "d0n0"}


# --- config ----------------------------------------------------------------------------------------------------

def test_unknown_yaml_key_names_file_line_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: retriever\nloop:\n  output_dir: x\n  learning_rate: 1e-5\n  lr_warmup: 3\n")
    with pytest.raises(FormatError, match=r"bad\.yaml:5: field 'loop\.lr_warmup' unknown key"):
        load_config(path)
    path.write_text("kind: retriever\nloop:\n  output_dir: x\n  lr: 1e-5\n")  # the spelling before learning_rate
    with pytest.raises(FormatError, match=r"bad\.yaml:4: field 'loop\.lr' unknown key.*is learning_rate"):
        load_config(path)
    path.write_text("model:\n  arch: bm25\n")
    with pytest.raises(FormatError, match=r"bad\.yaml:2: field 'model\.arch' model.arch must be one of"):
        load_config(path)


def test_model_overrides_are_validated_by_the_model_config_naming_file_line_and_key(tmp_path):
    path = tmp_path / "bad.yaml"
    cases = [
        ("model:\n  arch: taser\n  overrides:\n    pooling: mean\n    shared_blocks: two\n",
         r"bad\.yaml:5: field 'model\.overrides\.shared_blocks' expected an integer, got 'two'"),
        ("model:\n  arch: taser\n  overrides:\n    experts: 2\n",
         r"bad\.yaml:4: field 'model\.overrides\.experts' 'experts' is not a field of arch 'taser' \(TaserConfig\)"),
        ("model:\n  arch: taser\n  overrides: {shared_blocks: 0}\n",
         r"bad\.yaml:3: field 'model\.overrides\.shared_blocks' shared_blocks \(T\) must be >= 1"),
        ("model:\n  arch: dpr\n  overrides:\n    routing: token\n", r"'routing' is not a field of arch 'dpr'"),
        # the old flat model fields: a migration message
        ("model:\n  arch: taser\n  routing: sequence\n",
         r"bad\.yaml:3: field 'model\.routing' unknown key; model takes arch, name_or_path, overrides; model fields "
         r"moved under model\.overrides .*`overrides: \{routing: \.\.\.\}`"),
    ]
    for text, message in cases:
        path.write_text(text)
        with pytest.raises(FormatError, match=message):
            load_config(path)
    path.write_text("kind: cross-encoder\nmodel: default\n")  # the old cross-encoder form
    with pytest.raises(FormatError, match=r"bad\.yaml:2: field 'model' .*write `model: \{arch: \.\.\., "
                                          r"name_or_path: default\}`"):
        load_config(path)
    path.write_text("model:\n  arch: colbert\n  overrides: {dim: 16, reduce: sum}\ndata:\n  dev: null\n"
                    "  train_eval_questions: 0\n")
    config = load_config(path)
    assert config.model.arch == "colbert" and config.model.overrides == {"dim": 16, "reduce": "sum"}
    path.write_text("kind: nonsense\n")
    with pytest.raises(FormatError, match="unknown training kind 'nonsense'"):
        load_config(path)
    path.write_text("loop:\n  output_dir: x\n  learning_rate: 3e-5\ndata:\n  train:\n    - {format: dpr-json, path: t.json}\n")
    config = load_config(path, output_dir="elsewhere")
    assert config.loop.learning_rate == 3e-5 and config.loop.output_dir == "elsewhere"  # YAML 1.1's "3e-5" string accepted
    assert config.data.train == [DataSource("dpr-json", "train", "t.json")]


def test_set_overrides_single_fields(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("kind: retriever\nloop:\n  output_dir: x\n  max_steps: 100\nmodel:\n  arch: dpr\n")
    config = load_config(path, overrides=["loop.max_steps=null", "loop.learning_rate=3e-5", "model.arch=taser",
                                          "data.eval_ks=[1, 20]", "model.overrides.pooling=mean"])
    assert config.loop.max_steps is None and config.loop.learning_rate == 3e-5 and config.model.arch == "taser"
    assert config.data.eval_ks == [1, 20] and config.model.overrides == {"pooling": "mean"}
    with pytest.raises(FormatError, match=r"field 'model\.overrides\.shared_blocks' expected an integer.*given by "
                                          r"--set model\.overrides\.shared_blocks"):
        load_config(path, overrides=["model.arch=taser", "model.overrides.shared_blocks=many"])
    assert load_config(path).loop.max_steps == 100  # the file itself is untouched
    # a bad overridden value names its key, not the file's line of the value it replaced
    with pytest.raises(FormatError, match=r"run\.yaml: field 'loop\.max_steps' expected an integer.*given by --set loop\.max_steps"):
        load_config(path, overrides=["loop.max_steps=many"])
    with pytest.raises(FormatError, match=r"field 'loop\.max_stepz' unknown key.*given by --set"):
        load_config(path, overrides=["loop.max_stepz=3"])
    for bad in ("loop.max_steps", "=3", "loop..lr=1", "loop.output_dir.deeper=1"):
        with pytest.raises(ConfigError, match="--set"):
            load_config(path, overrides=[bad])


def test_print_config_shows_every_default_and_reads_back(tmp_path, capsys):
    assert cli_main(["train", "--print-config"]) == 0
    text = capsys.readouterr().out
    for key in ("similarity_scale:", "hard_negatives:", "layerwise_lr_decay:", "round2_init:", "select_metric:"):
        assert key in text
    assert text == default_yaml("retriever")
    assert load_config(write_yaml_text(tmp_path / "d.yaml", text)) == TrainConfig()


def write_yaml_text(path, text):
    path.write_text(text)
    return path


# --- end to end ------------------------------------------------------------------------------------------------

def test_training_on_real_sample_lowers_the_loss_and_writes_curves(tiny_bert, sample, tmp_path, monkeypatch):
    config_path = write_yaml(tiny_config(tiny_bert, sample, tmp_path / "run", max_steps=12), tmp_path / "c.yaml")
    calls = []
    real = TaserModel.compute_similarity
    monkeypatch.setattr(TaserModel, "compute_similarity",
                        lambda self, q, p: calls.append(tuple(q.shape)) or real(self, q, p))
    assert cli_main(["train", "--config", str(config_path)]) == 0
    out = tmp_path / "run"
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 13))
    assert calls.count((8, 32)) == 12  # every step scored its 8 questions by the model's own compute_similarity
    first, last = sum(r["loss"] for r in log[:3]) / 3, sum(r["loss"] for r in log[-3:]) / 3
    assert last < first - 0.1
    curve = [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in curve] == [0, 4, 8, 12]
    for row in curve:
        assert {"train/R@1", "train/R@20", "dev/R@1", "dev/R@20"} <= set(row)
    assert curve[-1]["train/R@1"] > curve[0]["train/R@1"]  # the trained-on questions are found better
    result = json.loads((out / "result.json").read_text())
    assert result["best_step"] in (0, 4, 8, 12)
    encoder = load_encoder(out / "best", show_progress=False)
    assert encoder.encode_queries(["a question"]).shape == (1, 32)
    assert (out / "best" / "config.json").is_file() and (out / "final" / "tokenizer.json").is_file()


def test_squad_open_source_and_dev_subset(squad, tiny_bert, tmp_path):
    root = write_squad_open(squad, tmp_path / "squad-open")
    data = RetrieverDataConfig(train=[DataSource("squad-open", "train", str(root))], bm25_negatives=0,
                               dev=DataSource("squad-open", "dev", str(root)), dev_questions=20,
                               dev_corpus_sample=30)
    train = R.load_training_set(data.train[0], data, progress=False)
    assert len(train.examples) == squad.meta["counts"]["questions_with_positive"]["train"]
    assert train.corpus is not None and len(train.corpus) == squad.meta["counts"]["passages"]
    with_negatives = R.add_bm25_negatives(train.examples[:25], train.corpus, 1, progress=False)
    for e in with_negatives:
        assert len(e.hard_negatives) == 1
        neg = e.hard_negatives[0]
        assert neg.id not in {p.id for p in e.positives} and not has_answer(e.query.answers, neg.text)
    data.bm25_negatives = 1
    evaluator = R.dev_evaluator(data, load_tokenizer(tiny_bert), seed=0, progress=False)
    assert len(evaluator.queries) == 20 and set(evaluator.queries) <= set(squad.splits["dev"])
    corpus = evaluator.passages.corpus
    positives = {p for q in evaluator.queries for p in squad.positives[q]}
    assert positives <= set(corpus) and len(corpus) <= 2 * len(positives) + 30 + 20
    metrics = evaluator(TaserModel.from_bert(tiny_bert, pooling="mean"))
    assert set(metrics) == {"R@1", "R@5", "R@20", "R@100"} and metrics["R@100"] >= metrics["R@1"]


def test_squad_open_training_set_is_parsed_once_and_read_as_before(squad, tmp_path):
    """The training json is parsed once per process and file version (`shared_training_examples`): every read equals
    a fresh parse (the library's reader, field by field), each caller gets lists of its own, a rewritten file is read
    again, and the retriever's training set reads its examples and corpus through the shared loaders."""
    from taser_lib.data import squad_open as S

    root = write_squad_open(squad, tmp_path / "squad-open")
    S._shared_training_examples.cache_clear()
    first = S.shared_training_examples(root, "train")
    assert first == S.read_training_json(root, "train")
    first[0].hard_negatives.append(first[0].positives[0])   # a caller's change stays its own
    first[1].positives.clear()
    second = S.shared_training_examples(root, "train")
    assert second == S.read_training_json(root, "train") and S._shared_training_examples.cache_info().hits == 1
    assert second[0] is not first[0] and second[1].positives
    data = RetrieverDataConfig(train=[DataSource("squad-open", "train", str(root))], bm25_negatives=0,
                               dev=DataSource("squad-open", "dev", str(root)), hard_negative_pool=None)
    (train_set,) = R.load_training_sets(data, progress=False)
    assert train_set.examples == second and S._shared_training_examples.cache_info().hits == 2
    assert train_set.corpus is S.shared_squad_open(root).corpus   # one corpus object per folder version
    smaller = squad.__class__(squad.corpus, {**squad.splits, "train": dict(list(squad.splits["train"].items())[:5])},
                              squad.positives, squad.meta)
    write_squad_open(smaller, root)          # the folder replaced: its json is read again, not the cached one
    assert S.shared_training_examples(root, "train") == S.read_training_json(root, "train")
    assert len(S.shared_training_examples(root, "train")) < len(second)


def test_mined_negatives_combine_p1_and_p2_only_in_single_set():
    corpus = {d: Document(d, "text") for d in ("m0", "m1", "m2", "d0h0")}
    s = R.TrainingSet("a", [example(0, n_hard=1)])
    mined = {"q0": ["m1", "d0h0", "m2"]}
    single = with_mined_negatives(s, mined, corpus, keep_round1=True).examples[0]
    assert [d.id for d in single.hard_negatives] == ["d0h0", "m1", "m2"]
    multi = with_mined_negatives(s, mined, corpus, keep_round1=False).examples[0]
    assert [d.id for d in multi.hard_negatives] == ["m1", "d0h0", "m2"]


def test_two_round_mining_runs_and_resumes(squad, tiny_bert, sample, tmp_path):
    passages = write_passages_tsv(squad.corpus, tmp_path / "psgs.tsv")
    raw = tiny_config(tiny_bert, sample, tmp_path / "run", max_steps=2, eval_every=2, checkpoint_every=2)
    raw["data"].update(dev=None, train_eval_questions=0)
    raw["mining"] = {"enabled": True, "depth": 20, "negatives_per_question": 3, "corpus": str(passages)}
    config = config_from_dict(raw)
    result = train_with_mined_negatives(config, progress=False)
    out = tmp_path / "run"
    assert result.final_step == 2 and result.paths["final"] == str(out / "round2" / "final")
    mined = json.loads((out / "mined" / "set0" / "negatives.json").read_text())
    examples = {e.query.id: e for e in R.load_training_set(config.data.train[0], config.data).examples}
    assert set(mined["negatives"]) == set(examples)
    for qid, ids in mined["negatives"].items():
        assert len(ids) <= 3
        for d in ids:
            assert d not in {p.id for p in examples[qid].positives}
            assert not has_answer(examples[qid].query.answers, squad.corpus[d].text)
    saved = json.loads((out / "round2" / "run_config.json").read_text())["config"]["fingerprint"]
    assert saved["mined_negatives_sha256"] and saved["round1_model"].endswith("round1/final")
    stamp = (out / "mined" / "set0" / "negatives.json").stat().st_mtime_ns
    again = train_with_mined_negatives(config, progress=False)  # finished: resumes to the end at once
    assert again.final_step == 2
    assert (out / "mined" / "set0" / "negatives.json").stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="mining.corpus"):
        raw["mining"]["corpus"] = None
        raw["loop"]["output_dir"] = str(tmp_path / "other")
        train_with_mined_negatives(config_from_dict(raw), progress=False)
