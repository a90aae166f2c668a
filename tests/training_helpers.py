"""Builders shared by the training tests: a tiny BERT with the default model's tokenizer, and a small real-data
retriever set (SQuAD-open questions with BM25 hard negatives) written as DPR retriever json."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from transformers import BertConfig, BertModel

from taser_lib.data.squad_open import SquadOpen
from taser_lib.data.training_examples import write_dpr_retriever_json
from taser_lib.models import default_checkpoint
from taser_lib.training.retriever import add_bm25_negatives

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# vocab as the default model's tokenizer; 3 layers so that TASER (T = 2) has one specialized block
TINY_BERT = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=160)


# a 100-token vocabulary and no tokenizer: for the shapes and parameter counts of the model classes
SMALL_VOCAB_BERT = dict(vocab_size=100, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def save_small_vocab_bert(path: Path, num_hidden_layers: int, seed: int = 0) -> Path:
    """A seeded random BERT of SMALL_VOCAB_BERT's shape with `num_hidden_layers` layers, saved to `path`."""
    torch.manual_seed(seed)
    BertModel(BertConfig(**SMALL_VOCAB_BERT, num_hidden_layers=num_hidden_layers),
              add_pooling_layer=False).save_pretrained(path)
    return path


@pytest.fixture
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread avoids OpenMP spin-waiting (10x faster here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_tiny_bert(path: Path, seed: int = 0, dropout: float = 0.1) -> Path:
    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    config = BertConfig(**TINY_BERT, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    for name in TOKENIZER_FILES:
        shutil.copy(default_checkpoint() / name, path / name)
    return path


def write_squad_sample(squad: SquadOpen, out_dir: Path, n_train: int = 48, n_dev: int = 24) -> dict[str, Path]:
    """The first n questions (with a positive) of SQuAD-open train and dev, with 2 BM25 hard negatives each from
    the whole corpus, as DPR retriever json files."""
    paths = {}
    for split, n in (("train", n_train), ("dev", n_dev)):
        examples = add_bm25_negatives(squad.training_examples(split)[:n], squad.corpus, 2, progress=False)
        paths[split] = out_dir / f"{split}.json"
        write_dpr_retriever_json(examples, paths[split])
    return paths


def write_passages_tsv(corpus: dict, path: Path) -> Path:
    """A corpus in DPR's psgs_w100.tsv form."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["id", "text", "title"])
        writer.writerows([d.id, d.text, d.title] for d in corpus.values())
    return path


def tiny_config(model_dir: Path, data: dict[str, Path], output_dir: Path, **loop) -> dict:
    """A retriever config dict for the tiny model and the DPR-json sample (cosine, scale 20, mean pooling)."""
    return {
        "kind": "retriever",
        "model": {"arch": "taser", "name_or_path": str(model_dir),
                  "overrides": {"pooling": "mean", "normalize": True, "similarity_scale": 20.0}},
        "data": {"train": [{"format": "dpr-json", "path": str(data["train"])}],
                 "dev": {"format": "dpr-json", "path": str(data["dev"])},
                 "hard_negatives": 1, "max_query_length": 24, "max_passage_length": 64,
                 "train_eval_questions": 16, "eval_ks": [1, 5, 20]},
        # fp32: the tests' thresholds were set in float32 and must not depend on whether the CPU has native bf16
        "loop": {"output_dir": str(output_dir), "learning_rate": 1e-3, "batch_size": 8, "warmup_ratio": 0.0,
                 "checkpoint_every": 4, "eval_every": 4, "log_every": 1, "precision": "fp32", **loop},
    }


def write_yaml(config: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def assert_entropy_moved(mode: str, before: tuple[float, float], after: tuple[float, float]) -> None:
    """(per-unit entropy, batch-average entropy) before and after a step on the entropy term: `release` raises the
    per-unit entropy, `literal` lowers it, `balance` raises the batch-average one."""
    if mode == "release":
        assert after[0] > before[0] + 1e-3
    elif mode == "literal":
        assert after[0] < before[0] - 1e-3
    else:
        assert after[1] > before[1] + 1e-3
