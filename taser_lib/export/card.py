"""Hugging Face model cards: the README.md a saved or exported model folder carries.

    >>> write_model_card("runs/squad_open/taser/best", run_dir="runs/squad_open/taser")

The card's YAML front matter holds library_name, base_model (a hub id; the offline default is
sentence-transformers/all-MiniLM-L6-v2), pipeline_tag, tags, datasets and, when the run recorded test metrics, a
`model-index` with them. The body describes the architecture and routing (T, I, the specialized blocks), pooling
and similarity, the parameter count (stored weights: TASER's shared weights count once), the base model, the
training data and config, the dev metric that selected the model and the test metrics.

What is known about a model's run comes from the run folder beside it (`find_run_dir`): `config.yaml` (the run
cache's resolved config) or else `run_config.json` (the training loop's), `result.json` / `finished.json` (the
selection), `test_metrics.json` (written by trainers that score a test split after training) and the model's own
`best.json`. Missing or unreadable files leave their section out; writing a card never fails a save for them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..io import atomic_write_text
from ..models.routing import ROUTING_LABELS, ROUTING_STRATEGIES, routing_strategy
from ..models.weights import DEFAULT, DEFAULT_DESCRIPTION

CARD_FILE = "README.md"
DEFAULT_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # what the packaged offline default is
TYPE_TAGS = {"taser-dpr": "dpr", "taser-colbert": "colbert", "taser-cross-encoder": "cross-encoder"}
ROUTING_TEXT = {
    "deterministic": "Det-R: questions always take expert 0 (Q-FFN), passages expert 1 (P-FFN)",
    "sequence": "Seq-R: a learned router picks one expert per sequence from its [CLS] vector (argmax at inference)",
    "token": "Tok-R: a learned router picks one expert per token (argmax at inference)",
    "shared": "TASER_Shared: one FFN per block for both sides (the Siamese encoder, structurally plain BERT)",
}


def find_run_dir(model_dir: str | Path) -> Path | None:
    """The training run folder a model folder (its best/ or final/) lies in, or None."""
    parent = Path(model_dir).resolve().parent
    return parent if (parent / "run_config.json").is_file() else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def training_config(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(config dict, YAML text) of a run: the cache's config.yaml, else the loop's run_config.json (its
    fingerprint, which trainers fill with the config, plus the loop section)."""
    path = run_dir / "config.yaml"
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
            if isinstance(data, dict):
                return data, text.strip()
        except (OSError, yaml.YAMLError):
            pass
    saved = (_read_json(run_dir / "run_config.json") or {}).get("config")
    if not isinstance(saved, dict):
        return None, None
    data = {k: v for k, v in (saved.get("fingerprint") or {}).items() if k != "skipped_examples"}
    data["loop"] = saved.get("loop", {})
    return data, yaml.safe_dump(data, sort_keys=False).strip()


def _base_model(config: dict[str, Any] | None) -> str | None:
    for section in ("model", "student", "start_from"):
        value = ((config or {}).get(section) or {})
        if isinstance(value, dict) and isinstance(value.get("name_or_path"), str):
            return value["name_or_path"]
    return None


def _datasets(config: dict[str, Any] | None) -> list[str]:
    """Training data named by a config: each train source's dataset or format (and file, when read from one)."""
    data = (config or {}).get("data") or {}
    sources = data.get("train") if isinstance(data.get("train"), list) else [data]
    out = []
    for source in sources:
        if not isinstance(source, dict):
            continue
        name = source.get("dataset") or source.get("format")
        if isinstance(name, str):
            path = source.get("path")
            out.append(f"{name} ({Path(path).name})" if isinstance(path, str) and path else name)
    return list(dict.fromkeys(out))


def stored_parameters(folder: Path) -> tuple[int, int]:
    """(parameters, tensors) stored in the folder's safetensors files (any depth), training-only heads aside."""
    from safetensors import safe_open

    numel = tensors = 0
    for path in sorted(folder.rglob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                if key.startswith(("mlm_head.", "mlm_heads.")):
                    continue
                size = 1
                for dim in f.get_slice(key).get_shape():
                    size *= dim
                numel += size
                tensors += 1
    return numel, tensors


def run_info(run_dir: str | Path | None, model_dir: str | Path | None = None) -> dict[str, Any]:
    """What the run folder says about the model: config (dict and YAML text), base model, datasets, selection and
    test metrics."""
    if run_dir is None:
        return {}
    run_dir = Path(run_dir)
    config, text = training_config(run_dir)
    result = _read_json(run_dir / "finished.json") or _read_json(run_dir / "result.json") or {}
    best = _read_json(Path(model_dir) / "best.json") if model_dir is not None else None
    return {"dir": str(run_dir), "config": config, "config_text": text, "base_model": _base_model(config),
            "datasets": _datasets(config), "select_metric": result.get("select_metric"),
            "best_metric": result.get("best_metric"), "best_step": result.get("best_step"),
            "final_step": result.get("final_step"), "best": best,
            "test": _read_json(run_dir / "test_metrics.json")}


def _arch(config: dict[str, Any]) -> tuple[str, str]:
    """(short name, description) of a model config."""
    kind = config.get("model_type")
    if kind == "taser-cross-encoder":
        return "cross-encoder", ("BERT reading [CLS] question [SEP] passage [SEP], a linear score on [CLS] (the "
                                 "CA teacher of \"In defense of dual-encoders\")")
    if kind == "taser-dpr":
        return "DPR", "two separately parameterised BERT towers: one for questions, one for passages (DPR)"
    if kind in ("taser", "taser-colbert"):
        routing = config.get("routing", "shared")
        label = ROUTING_LABELS.get(routing)
        one_ffn = routing in ROUTING_STRATEGIES and routing_strategy(routing).experts == 1  # TASER_Shared
        name = "TASER" if label is None else label if one_ffn else f"TASER ({label})"
        if kind == "taser-colbert":
            return f"ColBERT on {name}", "late interaction: token vectors of one encoder scored by MaxSim"
        return name, ("one BERT encoder whose blocks alternate between shared and specialized (TASER, Cheng et "
                      "al. 2023)" if not one_ffn else "one BERT encoder for questions and passages")
    return str(kind or "BERT"), "a BERT encoder"


def _specialized(config: dict[str, Any]) -> list[int]:
    t, n = config.get("shared_blocks"), config.get("num_hidden_layers")
    if not isinstance(t, int) or not isinstance(n, int) or config.get("routing") == "shared":
        return []
    return [i + 1 for i in range(n) if (i + 1) % (t + 1) == 0]


def _hub_id(name: str | None) -> str | None:
    if name == DEFAULT:
        return DEFAULT_HUB_ID
    if not name or Path(name).expanduser().exists() or name.count("/") > 1 or name.startswith((".", "/", "~")):
        return None
    return name


def front_matter(config: dict[str, Any], run: dict[str, Any], export: dict[str, Any] | None,
                 base_model: str | None) -> dict[str, Any]:
    name, _ = _arch(config)
    st = export is not None and export.get("format") == "sentence-transformers"
    tags = ["taser_lib"] + (["re-ranking"] if config.get("model_type") == "taser-cross-encoder"
                            else ["dense-retrieval", "feature-extraction"])
    tags += ["sentence-transformers", "sentence-similarity"] if st else ["transformers"]
    tags += [TYPE_TAGS.get(config.get("model_type"), "taser")]
    if config.get("routing"):
        tags.append(f"routing-{config['routing']}")
    meta: dict[str, Any] = {"library_name": "sentence-transformers" if st else "transformers"}
    hub = _hub_id(base_model)
    if hub:
        meta["base_model"] = hub
    meta["pipeline_tag"] = ("sentence-similarity" if st else "text-ranking"
                            if config.get("model_type") == "taser-cross-encoder" else "feature-extraction")
    meta["tags"] = tags
    datasets = [d.split(" (")[0] for d in run.get("datasets", [])]
    if datasets:
        meta["datasets"] = list(dict.fromkeys(datasets))
    test = run.get("test") or {}
    metrics = test.get("metrics") if isinstance(test.get("metrics"), dict) else None
    if metrics:
        dataset = str(test.get("dataset") or (datasets[0] if datasets else "test set"))
        meta["model-index"] = [{"name": name, "results": [{
            "task": {"type": "information-retrieval", "name": "Information Retrieval"},
            "dataset": {"name": dataset, "type": dataset, "split": str(test.get("split") or "test")},
            "metrics": [{"type": k, "name": k, "value": float(v)} for k, v in metrics.items()
                        if isinstance(v, (int, float))]}]}]
    return meta


def _usage(config: dict[str, Any], export: dict[str, Any] | None) -> str:
    if export and export.get("format") == "sentence-transformers":
        custom = export.get("arch") == "taser"
        concat = export.get("passage_format") == "concat"
        flag = ", trust_remote_code=True" if custom else ""
        lines = ["```python", "from sentence_transformers import SentenceTransformer", "",
                 f'model = SentenceTransformer("path/to/this/folder"{flag})',
                 'q = model.encode_query(["who wrote hamlet?"])',
                 ('p = model.encode_document(["Hamlet Hamlet is a tragedy by William Shakespeare."])' if concat
                  else 'p = model.encode_document([("Hamlet", "Hamlet is a tragedy by William Shakespeare.")])'),
                 "scores = model.similarity(q, p)", "```", "",
                 f"Queries are cut to {export.get('max_query_length')} tokens and passages to "
                 f"{export.get('max_passage_length')}. " + (
                     "Pass every passage as one string, `title + \" \" + text` for a titled one, as in training."
                     if concat else
                     "Pass a titled passage as the tuple `(title, text)`: it is encoded as the pair "
                     "`[CLS] title [SEP] text [SEP]`, as in training; pass an untitled one as a plain string.")
                 + " `encode` without a task encodes passages."]
        if custom:
            lines += ["", "The specialized blocks need the input kind, so the first module is "
                      "`taser_lib.models.st_module.TaserEncoder`: install taser_lib and pass `trust_remote_code=True` "
                      "(sentence-transformers imports no module class from outside its package without it). "
                      "The shared weights are stored once; the query and document routes both run through them."]
        return "\n".join(lines)
    if config.get("model_type") in ("taser-cross-encoder", "taser-colbert"):
        return "\n".join(["```python", "from taser_lib.models import load_model, load_tokenizer", "",
                          'model = load_model("path/to/this/folder")',
                          'tokenizer = load_tokenizer("path/to/this/folder")', "```"])
    return "\n".join(["```python", "from taser_lib.models import load_encoder", "",
                      'encoder = load_encoder("path/to/this/folder")',
                      'q = encoder.encode_queries(["who wrote hamlet?"])',
                      'p = encoder.encode_passages([("Hamlet", "Hamlet is a tragedy by William Shakespeare.")])',
                      "```", "", "`taser export --format sentence-transformers FOLDER OUT` writes a "
                      "sentence-transformers copy."])


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def render_model_card(config: dict[str, Any], *, parameters: tuple[int, int] | None = None,
                      run: dict[str, Any] | None = None, export: dict[str, Any] | None = None,
                      base_model: str | None = None, source: str | Path | None = None) -> str:
    """The card's text (front matter + Markdown) for a model config (`config.json` as a dict)."""
    run = run or {}
    base_model = base_model or run.get("base_model")
    name, description = _arch(config)
    meta = front_matter(config, run, export, base_model)
    kind = config.get("model_type")
    if kind == "taser-cross-encoder":
        what = "re-ranker", "It scores a question and a passage read together."
    elif kind == "taser-colbert":
        what = "retriever", "It encodes questions and passages into token vectors; MaxSim ranks passages."
    else:
        what = "dense retriever", ("It encodes questions and passages into vectors whose "
                                   f"{'cosine' if config.get('normalize') else 'dot product'} ranks passages.")
    out = ["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---", "", f"# {name} {what[0]}", "",
           f"A {name} {what[0]} built with taser_lib (a reproduction of TASER, Cheng et al. 2023, and \"In "
           f"defense of dual-encoders\"): {description}. {what[1]}"
           + (" Exported to sentence-transformers." if export else ""), ""]
    rows = [("architecture", name)]
    if config.get("routing"):
        rows.append(("routing", ROUTING_TEXT.get(config["routing"], config["routing"])))
    if config.get("model_type") == "taser":
        rows += [("T (shared blocks before each specialized one)", config.get("shared_blocks")),
                 ("I (expert FFNs per specialized block)", config.get("num_experts"))]
        special = _specialized(config)
        if special:
            rows.append(("specialized blocks (1-based)", ", ".join(map(str, special))))
    rows.append(("layers / hidden size / heads", f"{config.get('num_hidden_layers')} / {config.get('hidden_size')} "
                                                 f"/ {config.get('num_attention_heads')}"))
    if "pooling" in config and kind != "taser-colbert":
        rows += [("pooling", config["pooling"] + (", L2-normalised" if config.get("normalize") else "")),
                 ("similarity", f"{config.get('similarity_scale', 1.0)} x q.p (the training scale; rankings need "
                                f"none)")]
    if parameters:
        rows.append(("parameters", f"{parameters[0]:,} in {parameters[1]} stored tensors (each shared weight "
                                   f"once; training-only heads aside)"))
    out += ["## Architecture", "", "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]
    out += ["## Usage", "", _usage(config, export), ""]
    out += ["## Base model", ""]
    if base_model == DEFAULT:
        out.append(f"`default` ({DEFAULT_HUB_ID}): {DEFAULT_DESCRIPTION}. Because the default base model was "
                   "trained on NQ, SQuAD and MS MARCO pairs (among others), results on those benchmarks are not "
                   "zero-shot in the strict sense.")
    elif base_model:
        out.append(f"`{base_model}`.")
    else:
        out.append("Not recorded (no training run beside this model).")
    out.append("")
    if run.get("config_text") or run.get("datasets"):
        out += ["## Training", ""]
        if run.get("datasets"):
            out += ["Training data: " + ", ".join(f"`{d}`" for d in run["datasets"]) + ".", ""]
        if run.get("select_metric") and run.get("best_metric") is not None:
            out += [f"Selected on dev {run['select_metric']} = {_fmt(run['best_metric'])} at step "
                    f"{run.get('best_step')} (of {run.get('final_step')}).", ""]
        if run.get("config_text"):
            out += ["Training config:", "", "```yaml", run["config_text"], "```", ""]
    test = run.get("test") or {}
    if isinstance(test.get("metrics"), dict) and test["metrics"]:
        where = ", ".join(str(x) for x in (test.get("dataset"), test.get("split")) if x)
        queries = f", {test['queries']} queries" if test.get("queries") else ""
        out += ["## Test metrics", "", f"On {where or 'the test split'}{queries} (the run's `test_metrics.json`):",
                "", "| metric | value |", "|---|---|"]
        out += [f"| {k} | {_fmt(v)} |" for k, v in test["metrics"].items()] + [""]
    out += ["## Provenance", ""]
    if source:
        out.append(f"- model folder: `{source}`")
    if run.get("dir"):
        out.append(f"- training run: `{run['dir']}`")
    from .. import __version__
    out += [f"- written by taser_lib {__version__}", ""]
    return "\n".join(out)


def write_model_card(folder: str | Path, *, config: dict[str, Any] | None = None,
                     run_dir: str | Path | None = None, source: str | Path | None = None,
                     export: dict[str, Any] | None = None, base_model: str | None = None) -> Path:
    """Write `folder`/README.md for the model saved in it (`config`: its config dict, default its config.json;
    `run_dir`: the training run it came from, default the folder's parent when that is a run folder)."""
    folder = Path(folder)
    config = config if config is not None else (_read_json(folder / "config.json") or {})
    if run_dir is None:
        run_dir = find_run_dir(folder)
    text = render_model_card(config, parameters=stored_parameters(folder), run=run_info(run_dir, source or folder),
                             export=export, base_model=base_model, source=source)
    path = folder / CARD_FILE
    atomic_write_text(path, text)
    return path


def refresh_model_cards(run_dir: str | Path) -> list[Path]:
    """Rewrite the cards of a finished run's best/ and final/ models (now with its test metrics, if any)."""
    run_dir = Path(run_dir)
    return [write_model_card(run_dir / name, run_dir=run_dir) for name in ("best", "final")
            if (run_dir / name / "config.json").is_file()]
