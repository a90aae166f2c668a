"""Model cards (`taser_lib.export.card`, outside the core): a finished run's best/ and final/ get README.md (front
matter + architecture + the run's config) from `refresh_model_cards`, which `taser train` and the run cache call,
with its test metrics once it has them; an export's card says how sentence-transformers loads it. The front matter
is YAML that parses and holds the run's metrics. The training loop itself writes no card, as transformers' own
save_pretrained writes none."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from taser_lib.evaluation.records import record_evaluation
from taser_lib.models import build_model, count_parameters, load_tokenizer
from taser_lib.export.card import DEFAULT_HUB_ID, refresh_model_cards, write_model_card
from taser_lib.export import export_sentence_transformers
from taser_lib.training.loop import LoopConfig, run_training
from training_helpers import make_tiny_bert, one_thread  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

TRAINING_CONFIG = {  # what a retriever trainer passes as the loop's fingerprint (its config without the loop)
    "kind": "retriever",
    "model": {"arch": "taser", "name_or_path": "default", "overrides": {"routing": "deterministic"}},
    "data": {"train": [{"format": "squad-open", "split": "train", "path": None}],
             "dev": {"format": "squad-open", "split": "dev", "path": None}, "max_query_length": 32},
}


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    head, _, _ = card[4:].partition("\n---\n")
    return yaml.safe_load(head)


class Batches:
    def __init__(self, n: int = 4):
        self.n = n

    def __len__(self):
        return self.n

    def set_epoch(self, epoch):
        pass

    def iter_from(self, position):
        for i in range(position, self.n):
            g = torch.Generator().manual_seed(i)
            yield {"input_ids": torch.randint(1000, 2000, (2, 8), generator=g)}


def loss_fn(model, batch):
    ids = batch["input_ids"]
    q = model(query={"input_ids": ids, "attention_mask": torch.ones_like(ids)}).q_reps
    return (q - 1.0).pow(2).mean(), {}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A real (tiny) training run of TASER Det-R through the shared loop, with a dev metric choosing best/."""
    root = tmp_path_factory.mktemp("card")
    bert = make_tiny_bert(root / "bert")
    model = build_model("taser", bert, routing="deterministic")
    steps = iter(range(100))
    config = LoopConfig(output_dir=str(root / "run"), max_steps=4, eval_every=2, checkpoint_every=2, learning_rate=1e-3,
                        select_metric="R@20", log_every=1)
    run_training(model, loss_fn, Batches(), config, evaluate=lambda m: {"R@20": float(next(steps))},
                 tokenizer=load_tokenizer(bert), fingerprint=TRAINING_CONFIG, progress=False)
    return root / "run", model


def test_a_finished_run_gets_a_card_with_architecture_and_config(trained_run):
    run, model = trained_run
    assert not (run / "best" / "README.md").exists()  # the loop saves the model, the tokenizer and no card
    assert refresh_model_cards(run) == [run / "best" / "README.md", run / "final" / "README.md"]
    for name in ("best", "final"):
        card = (run / name / "README.md").read_text()
        meta = front_matter(card)
        assert meta["library_name"] == "transformers"
        assert meta["base_model"] == DEFAULT_HUB_ID  # the config's name_or_path 'default'
        assert meta["pipeline_tag"] == "feature-extraction"
        assert {"taser", "routing-deterministic"} <= set(meta["tags"])
        assert meta["datasets"] == ["squad-open"]
        assert "model-index" not in meta  # no test metrics yet
        assert "| T (shared blocks before each specialized one) | 2 |" in card
        assert "| I (expert FFNs per specialized block) | 2 |" in card
        assert "| specialized blocks (1-based) | 3 |" in card
        assert f"{count_parameters(model):,} in" in card
        assert "NQ, SQuAD and MS MARCO" in card
        assert "name_or_path: default" in card and "max_steps: 4" in card  # the training config


def test_finished_run_cards_and_exports_hold_the_test_metrics(trained_run, tmp_path):
    run, _ = trained_run
    rng = np.random.default_rng(0)
    per_query = {m: {f"q{i}": float(v) for i, v in enumerate(rng.random(5))} for m in ("R@1", "R@20")}
    aggregates = {m: float(np.mean(list(v.values()))) for m, v in per_query.items()}
    record_evaluation(run / "test_metrics.json", aggregates, per_query, split="test", dataset="squad-open",
                      queries=5)
    refresh_model_cards(run)

    meta = front_matter((run / "best" / "README.md").read_text())
    result = meta["model-index"][0]["results"][0]
    assert result["dataset"]["name"] == "squad-open" and result["dataset"]["split"] == "test"
    assert {m["type"]: m["value"] for m in result["metrics"]} == aggregates

    out = export_sentence_transformers(run, tmp_path / "st")
    card = (out / "README.md").read_text()
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]} == aggregates
    assert "trust_remote_code=True" in card  # Det-R: our module class
    best = json.loads((run / "result.json").read_text())  # the loop's: the dev metric that chose best/
    assert f"Selected on dev R@20 = {best['best_metric']:.4f} at step {best['best_step']}" in card


def test_card_of_a_model_without_a_run(tmp_path):
    bert = make_tiny_bert(tmp_path / "bert")
    folder = tmp_path / "dpr"
    build_model("dpr", bert).save_pretrained(folder)
    card = write_model_card(folder).read_text()
    meta = front_matter(card)
    assert "base_model" not in meta and "datasets" not in meta and "dpr" in meta["tags"]
    assert "two separately parameterised BERT towers" in card and "Not recorded" in card
