"""Dual-encoder re-rankers distilled from a cross-encoder ("In defense of dual-encoders", §4, Tables 6 and 12):
every loss trains, extra negatives follow their rules, learning curves and selection, the two config kinds."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from taser_lib.data.squad_open import build_squad_open, write_squad_open
from taser_lib.data.types import Document, Query
from taser_lib.errors import ConfigError, FormatError
from taser_lib.evaluation.records import read_per_query
from taser_lib.losses import m3se, margin_mse, softmax_ce_distill
from taser_lib.models import ColbertModel, DenseEncoder, TaserModel, load_tokenizer
from taser_lib.training.config import CrossEncoderModelConfig, to_yaml
from taser_lib.training.kinds import KINDS, get_kind, load_config
from taser_lib.training.cross_encoder import CrossEncoderRunConfig, run_cross_encoder
from taser_lib.training.distill import (LOSSES, STUDENT, DistillRunConfig, DistillTraining, dual_encoder_batches,
                                        dual_encoder_loss, evaluate_dual_encoder, extra_teacher_score, query_loss,
                                        run_distill, train_de_one_hot, train_distill)
from taser_lib.training.loop import LoopConfig
from taser_lib.training.reranking import RerankingDataConfig, RerankingSet
from taser_lib.training.retriever import build_retriever

REPO = Path(__file__).resolve().parents[1]
WORDS = ["zebra", "violin", "glacier", "saffron", "harbor", "quartz", "meadow", "lantern", "orbit", "canyon",
         "falcon", "velvet"]
from training_helpers import make_tiny_bert


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A random tiny BERT (hidden 32) with the default model's tokenizer files (vocab 30522)."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), seed=0, dropout=0.0)


def toy_set() -> tuple[RerankingSet, dict[str, np.ndarray]]:
    """6 questions x 5 candidates. q_i's answer is WORDS[i]; its positive d{5i} contains it. d0 is also listed
    (and relevant) for q1; q3's negative d16 mentions q2's answer. Teacher scores fall along each list."""
    corpus, queries, candidates, labels, teacher = {}, {}, {}, {}, {}
    for i in range(6):
        qid = f"q{i}"
        queries[qid] = Query(qid, f"which {WORDS[i]} is number {i}", (WORDS[i],))
        docs = [f"d{5 * i + j}" for j in range(5)]
        for j, d in enumerate(docs):
            corpus[d] = Document(d, f"{WORDS[i] if j == 0 else WORDS[6 + j]} passage {5 * i + j}", f"title {i}")
        candidates[qid], labels[qid] = docs, [1, 0, 0, 0, 0]
        teacher[qid] = np.array([3.0, 1.5, 0.5, 0.0, -1.0], dtype=np.float32)
    corpus["d0"] = Document("d0", f"{WORDS[0]} and {WORDS[1]} passage 0", "title 0")
    candidates["q1"][4], labels["q1"][4] = "d0", 1
    corpus["d16"] = Document("d16", f"{WORDS[2]} passage 16", "title 3")
    return RerankingSet(queries, corpus, candidates, labels, "toy", "train"), teacher


def _encoder(model, tokenizer) -> DenseEncoder:
    return DenseEncoder(model, tokenizer, max_query_length=16, max_passage_length=24, device="cpu",
                        show_progress=False)


def _student_config(tiny_bert_dir, arch="shared", **overrides):
    return dataclasses.replace(STUDENT, arch=arch, name_or_path=str(tiny_bert_dir),
                               overrides={"normalize": True, "similarity_scale": 5.0, **overrides})


def _student(tiny_bert_dir):
    torch.manual_seed(0)
    return build_retriever(_student_config(tiny_bert_dir))


def test_extra_negatives_follow_the_rules(tiny_bert_dir):
    rset, teacher = toy_set()
    tokenizer = load_tokenizer(tiny_bert_dir)
    training = DistillTraining(loss="m3se", group_size=3, in_batch_negatives=True, uniform_negatives=4)
    batches = dual_encoder_batches(rset, _encoder(_student(tiny_bert_dir), tokenizer), training, 6, seed=0,
                                   teacher=teacher)
    batch = next(batches.iter_from(0))
    n_docs = batch["passage"]["input_ids"].shape[0]
    assert batch["own"].shape == (6, 3) and batch["extra"].shape == (6, n_docs)
    # own candidates are the teacher's top 3 (the relevant ones kept), never extras of their own query
    for row, own in enumerate(batch["own"].tolist()):
        assert not batch["extra"][row, own].any()
        assert batch["positives"][row].tolist() in ([True, False, False], [True, False, True])
    # 6 queries x 3 own candidates, d0 shared by q0 and q1, plus up to 4 uniform draws not already present
    assert 17 <= n_docs <= 21
    # one batch holds all six questions, in shuffled order: find each one's row by its text
    texts = tokenizer.batch_decode(batch["query"]["input_ids"], skip_special_tokens=True)
    row = {f"q{i}": next(r for r, t in enumerate(texts) if f"number {i}" in t) for i in range(6)}
    passages = tokenizer.batch_decode(batch["passage"]["input_ids"], skip_special_tokens=True)
    d0 = next(j for j, t in enumerate(passages) if "passage 0" in t and "violin" in t)
    assert not batch["extra"][row["q0"], d0] and not batch["extra"][row["q1"], d0]  # relevant to both
    assert batch["extra"][row["q2"], d0]
    d16 = [j for j, t in enumerate(passages) if "passage 16" in t]
    for j in d16:  # mentions q2's answer: not a negative for q2, an ordinary one for q4
        assert not batch["extra"][row["q2"], j] and batch["extra"][row["q4"], j]


def test_stand_in_teacher_scores_of_extra_negatives():
    t = torch.tensor([3.0, 1.0, 0.5])
    pos = torch.tensor([[True, False, False, False, False]])
    soft = DistillTraining(loss="softmax-ce", tau=2.0)
    filled = torch.cat([t, extra_teacher_score(t, soft).expand(2)])
    assert torch.softmax(filled / soft.tau, 0)[3:].max() < 1e-30  # no teacher mass on extras
    s = torch.tensor([[2.0, 0.0, 1.0]])
    s_ext = torch.tensor([[2.0, 0.0, 1.0, -5.0, -7.0]])
    # the extras enter only through the student's normaliser
    expected = -(torch.softmax(t / 2.0, 0) * torch.log_softmax(s_ext[0] / 2.0, 0)[:3]).sum()
    assert float(query_loss(s_ext, filled[None], pos, soft)) == pytest.approx(float(expected), rel=1e-6)
    m3 = DistillTraining(loss="m3se")
    filled = torch.cat([t, extra_teacher_score(t, m3).expand(2)])
    assert filled[3:].tolist() == [0.5, 0.5]  # the query's lowest teacher score
    # j* is column 1 (the teacher's top negative, 1.0), scored s = 0 by the student: extras below it add nothing
    # to M3SE, one above it adds its hinge (3 - 0)^2
    base = float(m3se(s, t[None], pos[:, :3]))
    assert base == pytest.approx(1.0)  # matched margin (3-1)-(2-0) = 0, hinge of column 2: (1-0)^2
    assert query_loss(s_ext, filled[None], pos, m3) == pytest.approx(base)
    s_high = torch.tensor([[2.0, 0.0, 1.0, 3.0, -7.0]])
    assert query_loss(s_high, filled[None], pos, m3) == pytest.approx(base + 9.0)


def test_batch_loss_is_the_mean_of_the_query_losses(tiny_bert_dir):
    rset, teacher = toy_set()
    tokenizer = load_tokenizer(tiny_bert_dir)
    model = _student(tiny_bert_dir).eval()
    training = DistillTraining(loss="softmax-ce", group_size=4, tau=0.5)
    batch = next(dual_encoder_batches(rset, _encoder(model, tokenizer), training, 3, 0, teacher).iter_from(0))
    loss, _ = dual_encoder_loss(training, tokenizer)(model, batch)
    q = model.encode_query(**batch["query"])
    p = model.encode_passage(**batch["passage"])
    expected = [softmax_ce_distill(5.0 * (q[i] @ p[batch["own"][i]].T)[None], batch["teacher"][i][None], tau=0.5)
                for i in range(3)]
    assert float(loss.detach()) == pytest.approx(float(torch.stack(expected).detach().mean()), rel=1e-5)


@pytest.mark.parametrize("loss", LOSSES)
def test_each_loss_decreases_on_a_repeated_batch(tiny_bert_dir, loss):
    """With in-batch and uniform extra negatives (the batch-loss test above covers the plain path)."""
    rset, teacher = toy_set()
    tokenizer = load_tokenizer(tiny_bert_dir)
    model = _student(tiny_bert_dir)
    training = DistillTraining(loss=loss, group_size=3, in_batch_negatives=True, uniform_negatives=2)
    batch = next(dual_encoder_batches(rset, _encoder(model, tokenizer), training, 4, 0, teacher).iter_from(0))
    model.train()
    loss_fn = dual_encoder_loss(training, tokenizer)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    values = []
    for _ in range(8):
        optimizer.zero_grad()
        value, logs = loss_fn(model, batch)
        value.backward()
        optimizer.step()
        values.append(float(value.detach()))
    assert all(np.isfinite(values)) and 0.0 <= logs["top1"] <= 1.0
    assert values[-1] < values[0], values


def test_colbert_student_distils_with_its_own_maxsim(tiny_bert_dir, tmp_path, monkeypatch):
    """DE Table 7: a ColBERT student trains on the teacher's scores with the same loss function and loop; its
    scores are the model's MaxSim, in training and in the re-ranking evaluation."""
    rset, teacher = toy_set()
    tokenizer = load_tokenizer(tiny_bert_dir)
    torch.manual_seed(0)
    student = _student_config(tiny_bert_dir, arch="colbert", dim=16, similarity_scale=10.0)
    model = build_retriever(student)
    assert isinstance(model, ColbertModel)
    training = DistillTraining(loss="margin-mse", group_size=3, in_batch_negatives=True, max_query_length=16,
                               max_passage_length=24)
    batch = next(dual_encoder_batches(rset, _encoder(model, tokenizer), training, 4, 0, teacher).iter_from(0))
    model.eval()
    loss, _ = dual_encoder_loss(training, tokenizer)(model, batch)
    q, p = model.encode_query(**batch["query"]), model.encode_passage(**batch["passage"])
    sim = model.compute_similarity(q, p)
    expected = []
    for i in range(4):
        own, extra = batch["own"][i], batch["extra"][i].nonzero().flatten()
        t = torch.cat([batch["teacher"][i], batch["teacher"][i].min().expand(len(extra))])
        pos = torch.cat([batch["positives"][i], torch.zeros(len(extra), dtype=torch.bool)])
        expected.append(margin_mse(sim[i, torch.cat([own, extra])][None], t[None], pos[None]))
    assert float(loss.detach()) == pytest.approx(float(torch.stack(expected).mean().detach()), rel=1e-5)
    calls = []
    real = ColbertModel.compute_similarity
    monkeypatch.setattr(ColbertModel, "compute_similarity", lambda self, q, p: calls.append(1) or real(self, q, p))
    loop = LoopConfig(str(tmp_path / "colbert"), max_steps=6, batch_size=3, eval_every=3, checkpoint_every=3,
                      learning_rate=3e-3, select_metric="nDCG@10", log_every=1)
    trained, result = train_distill(rset, rset, loop, training, student, teacher, progress=False)
    assert isinstance(trained, ColbertModel) and trained.config.dim == 16
    assert len(calls) >= 6 + 3 * len(rset)  # every step and every re-ranked query scored by MaxSim
    log = [json.loads(line) for line in (tmp_path / "colbert" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 7)) and all(np.isfinite(r["loss"]) for r in log)
    assert [row["step"] for row in result.curve] == [0, 3, 6]
    assert all(0.0 <= row["dev/nDCG@10"] <= 1.0 for row in result.curve)
    start = build_retriever(student).state_dict()
    assert not torch.equal(start["projection.weight"], trained.state_dict()["projection.weight"])


def test_train_distill_curves_and_selection(tiny_bert_dir, tmp_path):
    rset, teacher = toy_set()
    student = _student_config(tiny_bert_dir)
    training = DistillTraining(loss="m3se", group_size=3, max_query_length=16, max_passage_length=24)
    loop = LoopConfig(str(tmp_path / "de"), max_steps=4, batch_size=3, eval_every=2, checkpoint_every=2, learning_rate=1e-3,
                      select_metric="nDCG@10")
    model, result = train_distill(rset, rset, loop, training, student, teacher, progress=False)
    assert isinstance(model, TaserModel) and model.config.routing == "shared"
    assert [row["step"] for row in result.curve] == [0, 2, 4]
    for row in result.curve:
        assert {"train/MRR@10", "train/nDCG@10", "dev/MRR@10", "dev/nDCG@10"} <= set(row)
    best = max(result.curve, key=lambda r: r["dev/nDCG@10"])
    assert result.best_metric == best["dev/nDCG@10"]
    # no teacher: the one-hot DE baseline; distillation losses refuse to run without one
    _, one_hot = train_de_one_hot(rset, rset, dataclasses.replace(loop, output_dir=str(tmp_path / "oh"),
                                                                  max_steps=1), training, student, progress=False)
    assert one_hot.final_step == 1
    # max_steps 0: the starting model, evaluated (and selected) as is: the untrained baseline of the same pipeline
    untrained, zero = train_distill(rset, rset, dataclasses.replace(loop, output_dir=str(tmp_path / "zero"),
                                                                   max_steps=0), training, student, teacher,
                                    progress=False)
    assert zero.best_step == zero.final_step == 0 and len(zero.curve) == 1
    tokenizer = load_tokenizer(tiny_bert_dir)
    assert zero.curve[0]["dev/nDCG@10"] == pytest.approx(
        evaluate_dual_encoder(build_retriever(student), tokenizer, rset, training)["nDCG@10"])
    with pytest.raises(ConfigError, match="needs teacher scores"):
        train_distill(rset, rset, dataclasses.replace(loop, output_dir=str(tmp_path / "x")), training, student)
    with pytest.raises(ConfigError, match="select"):
        train_distill(rset, rset, dataclasses.replace(loop, select_metric="R@20"), training, student, teacher)


def test_a_projected_student_starts_from_its_seed_not_from_the_global_random_state(tiny_bert_dir, tmp_path):
    """The projection of a student smaller than its checkpoint (the capacity axis) is new weights: they follow the
    run's seed, so a cached run's config rebuilds the same start whatever ran before it in the process."""
    rset, teacher = toy_set()
    student = _student_config(tiny_bert_dir, projection_dim=8)
    training = DistillTraining(loss="one-hot", group_size=3, max_query_length=16, max_passage_length=24)
    starts = []
    for i, noise in enumerate((1, 2, 2)):
        torch.manual_seed(noise)  # whatever the process did before: a different global random state
        loop = LoopConfig(str(tmp_path / f"run{i}"), max_steps=0, batch_size=3, seed=7 if i < 2 else 8,
                          select_metric="nDCG@10")
        model, _ = train_distill(rset, rset, loop, training, student, progress=False)
        starts.append(model.embedding_projection.weight.detach().clone())
    assert torch.equal(starts[0], starts[1])       # same seed, other global state: the same start
    assert not torch.equal(starts[1], starts[2])   # same global state, other seed: another start


# --- the config kinds -------------------------------------------------------------------------------------------

def test_the_kinds_table_names_each_kind_its_config_and_its_trainer():
    from taser_lib.training import cross_encoder, distill, mining

    assert {name: (k.config_class, k.run) for name, k in KINDS.items()} == {
        "retriever": (mining.TrainConfig, mining.run_retriever),
        "cross-encoder": (CrossEncoderRunConfig, cross_encoder.run_cross_encoder),
        "distill": (DistillRunConfig, distill.run_distill)}
    with pytest.raises(ConfigError, match="known: cross-encoder, distill, retriever"):
        get_kind("colbert")


def test_example_configs_load(tmp_path):
    ca = load_config(REPO / "configs" / "squad_open_cross_encoder.yaml")
    de = load_config(REPO / "configs" / "squad_open_distill.yaml")
    assert isinstance(ca, CrossEncoderRunConfig) and isinstance(de, DistillRunConfig)
    assert ca.loop.select_metric == de.loop.select_metric == "nDCG@10"
    assert de.model.arch == "shared" and de.model.name_or_path == ca.model.name_or_path == "default"
    assert ca.model.arch == "cross-encoder" and de.model.overrides == {"similarity_scale": 20.0}
    # the distillation run reads the teacher (and its score cache) where the cross-encoder run writes them
    assert Path(de.teacher.model).parent == Path(ca.loop.output_dir)
    assert dataclasses.asdict(de.data) == dataclasses.asdict(ca.data)
    assert load_config(_write(tmp_path / "again.yaml", to_yaml(de))) == de
    # the ColBERT student (Table 7) differs from the DE run in its model section only: same teacher, same cache
    colbert = load_config(REPO / "configs" / "squad_open_colbert_distill.yaml")
    assert colbert.model.arch == "colbert" and colbert.model.overrides["dim"] == 128
    assert dataclasses.replace(colbert, model=de.model, loop=de.loop) == de
    assert load_config(_write(tmp_path / "colbert.yaml", to_yaml(colbert))) == colbert
    # the GPU-sized pair keeps the same links, on every training question
    ca_gpu = load_config(REPO / "configs" / "squad_open_cross_encoder_gpu.yaml")
    de_gpu = load_config(REPO / "configs" / "squad_open_distill_gpu.yaml")
    assert Path(de_gpu.teacher.model).parent == Path(ca_gpu.loop.output_dir)
    assert dataclasses.asdict(de_gpu.data) == dataclasses.asdict(ca_gpu.data)
    assert ca_gpu.data.train_queries is None and de_gpu.data.test_queries is None

    bad = _write(tmp_path / "bad.yaml", "kind: distill\ntraining:\n  loss: hinge\n")
    with pytest.raises(FormatError, match=r"bad.yaml:2.*loss must be one of"):
        load_config(bad)
    bad = _write(tmp_path / "bad2.yaml", "kind: distill\ndata:\n  candidates: 4\n")
    with pytest.raises(FormatError, match="group_size"):
        load_config(bad)
    bad = _write(tmp_path / "bad3.yaml", "kind: distill\nteacher:\n  model: null\n")
    with pytest.raises(FormatError, match="teacher.model"):
        load_config(bad)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_config_runs_teacher_then_student_reusing_the_cache(tiny_bert_dir, shared_data, tmp_path, caplog):
    prepared = write_squad_open(build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip"),
                                tmp_path / "squad-open")
    data = RerankingDataConfig(path=str(prepared), candidates=4, bm25_depth=30, train_queries=6, dev_queries=4,
                               test_queries=4)
    loop = LoopConfig(str(tmp_path / "ca"), max_steps=2, batch_size=3, eval_every=1, checkpoint_every=2,
                      select_metric="nDCG@10")
    ca = CrossEncoderRunConfig(model=CrossEncoderModelConfig(name_or_path=str(tiny_bert_dir)), data=data, loop=loop,
                               training=dataclasses.replace(CrossEncoderRunConfig().training, group_size=3,
                                                            max_length=48, train_eval_queries=3))
    result = run_cross_encoder(ca)
    report = json.loads(Path(result.paths["test_metrics"]).read_text())
    assert report["queries"] == 4 and set(report["metrics"]) == {"MRR@10", "nDCG@10"}
    per_query = read_per_query(result.paths["test_per_query"])  # beside test_metrics.json, for significance tests
    assert {m: float(np.mean(list(v.values()))) for m, v in per_query.items()} == pytest.approx(report["metrics"])
    assert (tmp_path / "ca" / "teacher_scores" / "index.json").is_file()

    de = DistillRunConfig(model=dataclasses.replace(STUDENT, name_or_path=str(tiny_bert_dir)), data=data,
                          training=DistillTraining(loss="margin-mse", group_size=3, max_query_length=16,
                                                   max_passage_length=32, train_eval_queries=3),
                          loop=dataclasses.replace(loop, output_dir=str(tmp_path / "de")))
    de.teacher.model, de.teacher.max_length = result.paths["best"], 48
    with caplog.at_level(logging.INFO, logger="taser_lib.training.cross_encoder"):
        distilled = run_distill(de)
    assert "reusing teacher scores" in caplog.text
    assert Path(distilled.paths["teacher_scores"]) == tmp_path / "ca" / "teacher_scores"
    assert json.loads(Path(distilled.paths["test_metrics"]).read_text())["queries"] == 4


def test_table9_regularisers_change_training_inputs_and_model():
    """Embedding dropout reaches every BERT embedding layer; token dropout removes tokens only while training."""
    import torch
    from transformers import BertConfig

    from taser_lib.models import DPRConfig, DPRModel
    from taser_lib.training.distill import DistillTraining, _token_dropout, set_embedding_dropout

    model = DPRModel(DPRConfig(**{**BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=32).to_dict(),
                                  "model_type": "taser-dpr"}))
    set_embedding_dropout(model, 0.3)
    assert model.question_encoder.embeddings.dropout.p == 0.3 and model.passage_encoder.embeddings.dropout.p == 0.3
    batch = {"input_ids": torch.tensor([[101, 7, 8, 9, 102]] * 64), "attention_mask": torch.ones(64, 5, dtype=torch.long)}
    torch.manual_seed(0)
    dropped = _token_dropout(batch, 0.5, special_ids=[101, 102])
    assert bool((dropped["attention_mask"][:, [0, 4]] == 1).all())  # [CLS] and [SEP] are never dropped
    kept = float(dropped["attention_mask"][:, 1:4].float().mean())
    assert 0.35 < kept < 0.65  # about half of the 192 ordinary tokens survive
    with pytest.raises(Exception, match="token_dropout"):
        DistillTraining(token_dropout=1.0)


def test_auxiliary_masked_lm_loss(tiny_bert_dir, tmp_path):
    """Table 9's MLM regulariser: the batch loss gains w * the MLM loss of masked copies (retrieval part
    unchanged), the MLM loss falls with training, and a run with it saves a student with the head."""
    rset, teacher = toy_set()
    tokenizer = load_tokenizer(tiny_bert_dir)
    torch.manual_seed(0)
    student = _student_config(tiny_bert_dir)
    model = build_retriever(student, mlm_head=True)
    plain = DistillTraining(loss="softmax-ce", group_size=3)
    with_mlm = dataclasses.replace(plain, mlm_weight=0.5, mlm_probability=0.3)
    batch = next(dual_encoder_batches(rset, _encoder(model, tokenizer), plain, 4, 0, teacher).iter_from(0))
    model.eval()  # no dropout, no masking: the two losses agree
    assert float(dual_encoder_loss(with_mlm, tokenizer)(model, batch)[0].detach()) == pytest.approx(
        float(dual_encoder_loss(plain, tokenizer)(model, batch)[0].detach()))
    model.train()
    torch.manual_seed(1)
    base, _ = dual_encoder_loss(plain, tokenizer)(model, batch)
    torch.manual_seed(1)
    total, logs = dual_encoder_loss(with_mlm, tokenizer)(model, batch)
    assert logs["mlm"] > 5.0  # a fresh head over a 30522-token vocabulary: about ln(30522) = 10.3
    # the tiny BERT has no dropout: the retrieval part is unchanged by the masked copies
    assert float(total.detach()) - 0.5 * logs["mlm"] == pytest.approx(float(base.detach()), rel=1e-5)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    mlm = []
    for step in range(10):
        torch.manual_seed(step % 2)  # two fixed maskings, alternating
        optimizer.zero_grad()
        value, logs = dual_encoder_loss(with_mlm, tokenizer)(model, batch)
        value.backward()
        optimizer.step()
        mlm.append(logs["mlm"])
    assert mlm[-1] < mlm[0] - 1.0 and mlm[-2] < mlm[1] - 1.0, mlm
    loop = LoopConfig(str(tmp_path / "de"), max_steps=2, batch_size=3, eval_every=2, checkpoint_every=2, learning_rate=1e-3,
                      select_metric="nDCG@10")
    trained, result = train_distill(rset, rset, loop, with_mlm, student, teacher, progress=False)
    assert trained.config.mlm_head and trained.mlm_head is not None
    assert all("loss/mlm" in row for row in result.curve[1:])
    with pytest.raises(ConfigError, match="mlm_probability"):
        DistillTraining(mlm_weight=1.0, mlm_probability=0.0)
