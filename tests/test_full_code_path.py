"""Every notebook's `full` code path, run on CPU with a tiny random BERT and the data shrunk.

The `full` profile (paper scale on GPU nodes) cannot run here, but its code path must not rot: each notebook is run
with `profile_parameters("full", notebook)` ([CLS] pooling and dot product, the coCondenser and checkpoint
parameters, several seeds where the profile has them) with only these replaced, where the notebook declares them:

- every model name (`model`, `cross_encoder_model`, `cocondenser_model`) -> a tiny random BERT with the default
  model's tokenizer (hidden 32, 3 layers, so that TASER with T = 2 has a specialized block);
- device `cpu`, precision `fp32`, one seed, a handful of training questions and evaluation queries;
- sequences of 16 / 64 tokens, not the paper's 32 / 256 (or the second paper's 30 / 200): the lengths are numbers the
  same code reads, and attention, quadratic in them, was a third of a page's time on the tiny BERT;
- the online datasets -> offline ones of the same kind: DPR's question sets -> nq-open retrieving from a
  `qa_corpus` file in DPR's psgs_w100.tsv form (SQuAD-open's real passages: the streamed dpr-wiki path), BEIR ->
  SciFact, MS MARCO re-ranking -> WikiQA (the de_* pages' MS MARCO `testbed` -> SQuAD-open), EntityQuestions as
  it is (it is offline); SQuAD-open joins the QA sets for its dev split (the hybrid weight is chosen on dev).

A notebook whose `full` parameters it does not know how to shrink fails here, which is the point: `full` stays
runnable. Slow (each notebook trains and evaluates its tiny models): marked `slow`, part of `make test`.

Each notebook's code cells run in this process, in order, in one namespace, with the parameters papermill would
inject (`profile`, `overrides`, `results_dir`): every line of the notebook runs, without a kernel's start-up and
imports for each of twenty notebooks. The runner itself (papermill, staging, publishing) is `test_reproduce.py`'s,
and nbval executes every notebook in a kernel at `smoke`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from page_proof import execute_cells
from training_helpers import TOKENIZER_FILES, write_passages_tsv
from transformers import BertConfig, BertModel

from taser_lib.data.squad_open import build_squad_open
from taser_lib.models import default_checkpoint
from taser_book.profiles import load_pages, load_profiles
from taser_book.runner import find_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = [p for p in find_notebooks(ROOT) if p.stem != "performance"]  # the benchmark page reads results/bench


@pytest.fixture(scope="module")
def tiny_full(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("full-path")
    torch.manual_seed(0)
    bert = root / "tiny-bert"
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=512), add_pooling_layer=False
              ).save_pretrained(bert)
    for name in TOKENIZER_FILES:
        (bert / name).write_bytes((default_checkpoint() / name).read_bytes())
    squad = build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")
    corpus = dict(list(squad.corpus.items())[:400])
    wiki = write_passages_tsv(corpus, root / "psgs_w100.tsv")
    return {"bert": str(bert), "wiki": str(wiki), "root": root}


def shrunk(tiny: dict) -> dict:
    model = tiny["bert"]
    return {"model": model, "cross_encoder_model": model, "cocondenser_model": model, "device": "cpu",
            "precision": "fp32", "bf16": False, "offline": True, "seeds": [13], "seed": 13, "epochs": 1,
            "max_query_length": 16, "max_passage_length": 64,   # see the module's docstring
            "n_train": 8, "n_queries": 5, "n_docs": 60, "batch_size": 4, "eval_batch_size": 16,
            "qa_datasets": ["squad-open", "nq-open"], "qa_corpus": tiny["wiki"],
            "ood_datasets": ["entityquestions", "scifact"], "rerank_datasets": ["wikiqa"], "cell_timeout_s": 600,
            # the de_* pages' MS MARCO testbed (online) -> SQuAD-open, the offline testbed whose BM25 lists reach
            # de_k_sweep's K = 100 (WikiQA's ~9 candidates per question would leave no K = 100 group)
            "testbed": "squad-open",
            # de_negatives: 16 uniform extra negatives, not 128 (the same code path, an eighth of the passages)
            "uniform_negatives": 16,
            # de_capacity: a checkpoint size (Turc et al.'s at full) and a projected, cut one on the tiny BERT
            "sizes": [{"size": "3-32", "checkpoint": model}, "2-16"], "largest_size": "3-32",
            # de_distillation: Turc et al.'s small BERTs at full -> the tiny BERT cut and projected
            "small_sizes": ["2-16"], "size_source": "truncate",
            # testbed: MS MARCO re-ranking at several sizes -> WikiQA, from the tiny BERT as is and re-initialised
            "probe_sizes": {"wikiqa": [8]}, "probe_queries": {"wikiqa": 5}, "probe_reinit": {"wikiqa": [8]}}


# One notebook's own shrinking, on top of `shrunk`: de_k_sweep keeps its smallest and largest K (K = 100 of 100
# candidates: a step of 4 questions encodes 400 passages) with one loss that needs no teacher and one that does, on
# 4 training questions (one step per student); the other losses' code paths run in de_distillation.
# taser_efficiency times 32 passages once per model (full: 3,000, three rounds); de_regularisation sweeps two label
# smoothings (full: six) and scores 8 training questions; taser_routing mines for TASER alone (full: DPR too).
PER_NOTEBOOK = {"de_k_sweep": {"ks": [2, 100], "losses": ["de-one-hot", "de-softmax-ce"], "n_train": 4},
                "taser_efficiency": {"throughput_passages": 32, "throughput_rounds": 1},
                "de_regularisation": {"alphas": [0.0, 0.9], "n_train_eval": 8},
                "taser_routing": {"mining_variants": ["taser"]},
                # Sec. 3.3's pages at `cpu` start CA and DE from a re-initialised copy: the same path on the tiny BERT
                **{page: {"reinit_layers": 1} for page in ("de_score_distributions", "de_margins", "de_qualitative")}}


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_full_code_path_runs_on_a_tiny_bert(notebook, tiny_full, shared_data, tmp_path, monkeypatch):
    profiles = load_profiles()
    full = profiles["full"]
    overrides = {**shrunk(tiny_full), **PER_NOTEBOOK.get(notebook.stem, {})}
    # only what the profile itself sets, so the notebook's full-only parameters keep their full values
    # of the page's settings (pages.yaml): an override naming a setting the page does not have is an error
    settings = set(load_pages()[notebook.stem].names)
    overrides = {k: v for k, v in overrides.items()
                 if k in settings and (k in full or k in full["notebooks"].get(notebook.stem, {}))}
    monkeypatch.setenv("TASER_RUNS_DIR", str(tiny_full["root"] / "runs"))
    monkeypatch.setenv("TASER_DATA_MIRROR", str(shared_data))
    monkeypatch.setenv("TASER_DATA_DIR", str(tiny_full["root"] / "data"))
    results = tmp_path / "results" / "full" / notebook.stem
    execute_cells(json.loads(notebook.read_text(encoding="utf-8"))["cells"], notebook.name,
                  {"profile": "full", "overrides": overrides, "results_dir": str(results)})
    assert (results / "meta.json").is_file() and any(results.glob("*.csv")), f"{notebook.stem} published nothing"
