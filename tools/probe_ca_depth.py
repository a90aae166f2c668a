"""Does a shallow CA train on this testbed? Trains (or reuses from the run cache) the CA that `de_capacity` trains for
one depth, with loop settings changed, and prints its dev curve, its test MRR@10 beside the first stage's order,
and how much its scores depend on the question: each of a seeded sample of test questions has its candidates scored
with its own question and with another question that shares none of its relevant passages. A CA that matches
questions to passages ranks them differently (low rank correlation, MRR@10 falls); one that learnt a score of the
passage alone ranks them the same.

    python tools/probe_ca_depth.py --profile cpu --layers 2                     # the page's own 2-layer CA (cached)
    python tools/probe_ca_depth.py --profile cpu --layers 2 --set learning_rate=2e-4   # a higher learning rate
    python tools/probe_ca_depth.py --profile cpu --layers 2 --set epochs=2 --set max_steps=1000

The runs go into the run cache like any page's, keyed by their whole configuration, so a setting the profile later
adopts is not trained twice. At `cpu` a 2-layer CA takes about 15 one-thread minutes per 500 steps, its scoring
included."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time

import papermill
import yaml

from taser_book.runner import notebook_parameters
from taser_book.runs import changes
from taser_book.runs.capacity import checkpoint_shape, parse_sizes, size_changes
from taser_book.runs.recipes import reranking_run
from taser_book.tables.rerank_tables import first_stage_scores
from taser_lib.evaluation import rerank_per_query
from taser_lib.models import CrossEncoderModel, load_tokenizer
from taser_lib.training.cross_encoder import score_pairs
from taser_lib.training.reranking import passage_text

NOTEBOOK = "notebooks/de_capacity.ipynb"


def question_dependence(model_dir, rset, *, n: int = 200, seed: int = 13, max_length: int = 224) -> dict:
    """Rank correlation (Spearman, mean over questions) between a CA's scores of each question's candidates under its
    own question and under another's (a seeded pick sharing none of its relevant passages), and MRR@10 under each."""
    import random

    import numpy as np
    from scipy.stats import spearmanr

    model, tokenizer = CrossEncoderModel.from_pretrained(model_dir).eval(), load_tokenizer(model_dir)
    judged = [q for q in rset.candidates if any(label > 0 for label in rset.labels[q])]
    rng = random.Random(seed)
    qids = rng.sample(judged, min(n, len(judged)))
    relevant = {q: {d for d, label in zip(rset.candidates[q], rset.labels[q]) if label > 0} for q in judged}
    rhos, scores = [], {"own": {}, "other": {}}
    for q in qids:
        other = rng.choice([o for o in judged if not relevant[o] & relevant[q]])
        passages = [passage_text(rset.corpus[d]) for d in rset.candidates[q]]
        for name, asked in (("own", q), ("other", other)):
            scores[name][q] = score_pairs(model, tokenizer, [rset.queries[asked].text] * len(passages), passages,
                                          max_length=max_length, progress=False)
        rhos.append(spearmanr(scores["own"][q], scores["other"][q]).statistic)
    sample = rset.subset(qids)
    mrr = {name: np.mean(list(rerank_per_query(sample, by_query, ("MRR@10",))["MRR@10"].values()))
           for name, by_query in scores.items()}
    return {"questions": len(qids), "spearman": float(np.nanmean(rhos)), "MRR@10 own question": float(mrr["own"]),
            "MRR@10 other question": float(mrr["other"])}


def _loop_settings(pairs: list[str]) -> dict:
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            sys.exit(f"probe_ca_depth: --set wants KEY=VALUE (a field of the training loop), got {pair!r}")
        for parse in (int, float, yaml.safe_load):  # PyYAML reads "2e-4" as a string
            try:
                settings[key] = parse(value)
                break
            except ValueError:
                continue
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--layers", type=int, default=2, help="the CA's depth (first L layers of cross_encoder_model)")
    parser.add_argument("--seed", type=int, default=None, help="default: the profile's first seed")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a field of the run's training loop (learning_rate, epochs, max_steps, warmup_ratio, ...)")
    parser.add_argument("--questions", type=int, default=200,
                        help="test questions scored under their own and another question (0: skip)")
    args = parser.parse_args(argv)

    p = notebook_parameters(NOTEBOOK, args.profile)  # what the profile sets; the rest is the notebook's default
    p = {**{name: ast.literal_eval(info["default"]) for name, info in papermill.inspect_notebook(NOTEBOOK).items()},
         **p}
    params = {k: p[k] for k in ("model", "pooling", "precision", "max_query_length", "max_passage_length",
                                "batch_size", "eval_batch_size", "epochs", "learning_rate", "n_train", "n_queries",
                                "n_docs", "cross_encoder_model")}
    params["teacher"] = p["teacher_params"] if p.get("ca_like_teacher", True) else {}
    sizes = [s for s in parse_sizes(p["sizes"]) if s.layers == args.layers]
    if not sizes:
        sys.exit(f"probe_ca_depth: no size of {args.layers} layers in {args.profile}'s de_capacity sizes {p['sizes']}")
    loop = _loop_settings(args.set)
    run_changes = [changes.data(dataset=p.get("testbed", "squad-open")),
                   *size_changes(sizes[0], "cross-encoder", checkpoint_shape(p["cross_encoder_model"]))]
    if loop:
        run_changes.append(changes.loop(**loop))
    started = time.time()
    run = reranking_run("ca", args.seed if args.seed is not None else p["seeds"][0], params, changes=run_changes,
                        progress=False)
    print(f"{args.layers}-layer CA, loop {loop or 'as the page'}: run {run.dir.name}, "
          f"{(time.time() - started) / 60:.1f} minutes here")
    print("step  train loss  dev nDCG@10")
    for point in run.result.get("curve", []):
        loss = point.get("train_loss")
        print(f"{point['step']:>4}  {'' if loss is None else f'{loss:10.4f}':>10}  {point['dev/nDCG@10']:.4f}")
    test = json.loads((run.dir / "test_metrics.json").read_text())["metrics"]["MRR@10"]
    test_set = run.config.data.load(progress=False)[run.config.data.test_split]
    order = rerank_per_query(test_set, first_stage_scores(test_set))["MRR@10"]
    print(f"selected step {run.result['best_step']} (dev nDCG@10 {run.metric:.4f}); test MRR@10 {test:.4f} over the "
          f"whole test split, where the first stage's (BM25) order of the same candidates scores "
          f"{sum(order.values()) / len(order):.4f}")
    if args.questions:
        d = question_dependence(run.dir / "best", test_set, n=args.questions, seed=run.config.loop.seed,
                                max_length=run.config.training.max_length)
        print(f"scores under another question ({d['questions']} test questions): Spearman with its own "
              f"{d['spearman']:.3f}; MRR@10 {d['MRR@10 own question']:.3f} own, {d['MRR@10 other question']:.3f} other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
