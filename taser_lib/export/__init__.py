"""Export a trained model as a sentence-transformers model folder (`taser export --format sentence-transformers`).

    >>> export_sentence_transformers("runs/squad_open/taser", "exports/taser-st")    # a run, its best/ or any model
    >>> from sentence_transformers import SentenceTransformer
    >>> st = SentenceTransformer("exports/taser-st", trust_remote_code=True)          # TASER; DPR/Shared: no flag
    >>> q = st.encode_query(["who wrote hamlet?"])
    >>> p = st.encode_document([("Hamlet", "Hamlet is a tragedy by William Shakespeare.")])

`encode_query` / `encode_document` give the vectors `DenseEncoder.encode_queries` / `encode_passages` give (same
tokenisation, lengths, pooling and normalisation; the tests check a cosine >= 0.9999). Plain `encode` encodes
passages. The folder's layout by architecture:

- **dpr** (two towers): modules.json = [Router, Pooling, (Normalize)]; the Router's "query" route is the question
  tower (`query_0_Transformer/`, cut to max_query_length), its "document" route the passage tower
  (`document_0_Transformer/`, cut to max_passage_length); each tower is a stock BertModel. Loads with
  `SentenceTransformer(folder)`, no flag, no taser_lib needed.
- **shared** (TASER_Shared, or a plain BERT checkpoint used zero-shot): one stock BertModel in the root
  (query_length / document_length set the two cut-offs), then Pooling and Normalize. No flag, no taser_lib.
- **taser** with specialized blocks (Det-R, Seq-R, Tok-R): the root holds the TASER model itself (its config.json
  and one model.safetensors: every shared weight stored once, both routes run through it) under the module
  `taser_lib.models.st_module.TaserEncoder`, which hands sentence-transformers' task to the specialized blocks;
  then Pooling and Normalize. Needs taser_lib installed and `trust_remote_code=True` (sentence-transformers >= 6
  imports no module class outside its own package without it); `taser_lib.models.load_model(folder)` loads it too.

Passages follow the model's `passage_format` (what `DenseEncoder` does with it), recorded in the export (the stock
BERT's config.json, or the TASER config) so that `load_model(folder)` reads passages the same way:

- "pair" (models trained from a plain BERT checkpoint, as in the papers): pass a titled passage as the tuple
  `(title, text)` (tokenised as the pair `[CLS] title [SEP] text [SEP]`, as our encoder does) and an untitled one
  as a plain string. The stock modules (dpr, shared) truncate a pair "longest_first" where our encoder cuts the
  text only ("only_second"); the two agree unless the title alone takes more than about half of max_passage_length.
- "concat" (models trained from a sentence-transformers checkpoint such as the default, and the default itself):
  pass every passage as one string, `title + " " + text` for a titled one (`common.passage_string`, BEIR's
  convention), as sentence-transformers users do. The TASER module joins a `(title, text)` tuple itself; the stock
  modules (dpr, shared) would read a tuple as a pair, so give them the string.

ColBERT (token vectors) and cross-encoders are not bi-encoders with one vector per text and are refused, as are
models with an embedding projection (`projection_dim`, the DE capacity axis), which the stock modules would drop.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, TaserError
from ..io import atomic_dir
from .card import find_run_dir, write_model_card
from ..models.colbert import ColbertModel
from ..models.dpr import DPRModel
from ..models.encoding import DenseEncoder, model_passage_format
from ..models.taser import TaserLayer, TaserModel
from ..models.weights import DEFAULT, default_checkpoint

if TYPE_CHECKING:
    from transformers import BertModel

FORMATS = ("sentence-transformers",)
MODEL_DIRS = ("best", "final")  # a run folder's models, in the order export prefers them


def default_lengths() -> tuple[int, int]:
    """(max_query_length, max_passage_length) that `DenseEncoder` (and so `taser encode` / `taser index`) uses."""
    params = inspect.signature(DenseEncoder.__init__).parameters
    return params["max_query_length"].default, params["max_passage_length"].default


def resolve_model_dir(source: str | Path) -> tuple[Path, Path | None]:
    """(model folder, its run folder or None) of a run folder (its best/, else final/ model), a model folder, or
    'default'. Raises a one-line TaserError when there is no model."""
    if str(source) == DEFAULT:
        return default_checkpoint(), None
    path = Path(source).expanduser()
    if not path.exists():
        raise TaserError(f"{path} does not exist: expected a training run folder, its best/ or final/ model, or a "
                         f"saved model folder")
    if not path.is_dir():
        raise TaserError(f"{path} is a file: expected a training run folder or a model folder")
    if (path / "config.json").is_file():
        return path, find_run_dir(path)
    for name in MODEL_DIRS:
        if (path / name / "config.json").is_file():
            return path / name, path
    raise TaserError(f"{path} holds no model: no config.json, and no {' or '.join(d + '/' for d in MODEL_DIRS)} "
                     f"model folder in it (has the run finished?)")


def _bert_config(config):
    """A stock BertConfig with the BERT fields of one of our configs."""
    from transformers import BertConfig

    names = {f.name for f in dataclasses.fields(BertConfig)} - {"model_type", "architectures"}
    fields = {k: v for k, v in config.to_dict().items() if k in names}
    # kept in the stock config.json: `load_model` of the export reads passages as the model was trained to
    return BertConfig(**fields, architectures=["BertModel"],
                      passage_format=getattr(config, "passage_format", None) or "pair")


def plain_bert(model) -> BertModel:
    """A TASER_Shared model as the stock BertModel it is structurally (each TaserLayer's one expert as the block's
    FFN), the same weights. Anything with more than one expert per block raises."""
    from transformers import BertModel

    renamed = {}
    for i, layer in enumerate(model.encoder.layer):
        if isinstance(layer, TaserLayer):
            if len(layer.experts) != 1 or layer.router is not None:
                raise ConfigError(f"layer {i} has {len(layer.experts)} experts: only shared routing is a plain BERT")
            renamed[f"encoder.layer.{i}.experts.0."] = f"encoder.layer.{i}."
    state = {}
    for key, value in model.state_dict().items():
        if key.startswith("mlm_head."):
            continue
        for old, new in renamed.items():
            if key.startswith(old):
                key = new + key[len(old):]
        state[key] = value
    bert = BertModel(_bert_config(model.config), add_pooling_layer=False)
    bert.load_state_dict(state, strict=True)
    return bert.eval()


def _tower(tower, config) -> BertModel:
    from transformers import BertModel

    bert = BertModel(_bert_config(config), add_pooling_layer=False)
    bert.load_state_dict(tower.state_dict(), strict=True)
    return bert.eval()


def _transformer(bert, tokenizer, folder: Path, **lengths):
    """sentence-transformers' stock Transformer module over `bert` (written to `folder` first: it loads by path)."""
    from sentence_transformers.sentence_transformer.modules import Transformer

    bert.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return Transformer(str(folder), model_kwargs={"add_pooling_layer": False}, **lengths)


def architecture(model) -> str:
    """'dpr', 'shared' or 'taser' (specialized blocks); other models cannot be exported."""
    if isinstance(model, ColbertModel) or not isinstance(model, (DPRModel, TaserModel)):
        raise ConfigError(f"{type(model).__name__} cannot be exported to sentence-transformers: only the bi-encoders "
                          f"with one vector per text (dpr, taser, shared) can")
    if getattr(model.config, "projection_dim", None):
        raise ConfigError(f"a model with an embedding projection (projection_dim = {model.config.projection_dim}) "
                          f"cannot be exported to sentence-transformers yet: the exported modules would leave the "
                          f"projection out")
    if isinstance(model, DPRModel):
        return "dpr"
    return "shared" if model.config.strategy.experts == 1 else "taser"  # one FFN: one tower for both sides


def sentence_transformer(model, tokenizer, work: Path, max_query_length: int, max_passage_length: int):
    """(SentenceTransformer, arch) equivalent to `DenseEncoder(model, tokenizer)` with these lengths; `work` is a
    scratch folder for the stock towers."""
    arch = architecture(model)
    try:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Router

        from ..models.st_module import TaserEncoder
    except ImportError as err:
        raise TaserError(f"the sentence-transformers export needs sentence-transformers >= 6 ({err}); "
                         f"pip install 'taser-lib[export]'") from None

    config = model.config
    if arch == "dpr":
        first = Router.for_query_document(
            [_transformer(_tower(model.question_encoder, config), tokenizer, work / "query",
                          max_seq_length=max_query_length)],
            [_transformer(_tower(model.passage_encoder, config), tokenizer, work / "document",
                          max_seq_length=max_passage_length)],
            default_route="document")
    elif arch == "shared":
        first = _transformer(plain_bert(model), tokenizer, work / "shared", max_seq_length=max_passage_length,
                             query_length=max_query_length, document_length=max_passage_length)
    else:
        if getattr(model, "mlm_head", None) is not None:  # training-only: not part of the export
            model.mlm_head, model.config.mlm_head = None, False
        first = TaserEncoder(model.eval(), tokenizer, max_query_length, max_passage_length)
    modules = [first, Pooling(config.hidden_size, pooling_mode=config.pooling)]
    if config.normalize:
        modules.append(Normalize())
    st = SentenceTransformer(modules=modules, similarity_fn_name="cosine" if config.normalize else "dot",
                             device="cpu")
    return st, arch


def _keep_pooler_off(folder: Path) -> None:
    """Stock Transformer modules load their BertModel without BERT's pooler (the papers pool the final token
    vectors; none is stored): sentence-transformers reads `model_kwargs` from sentence_bert_config.json."""
    for path in folder.rglob("sentence_bert_config.json"):
        config = json.loads(path.read_text(encoding="utf-8"))
        config["model_kwargs"] = {**config.get("model_kwargs", {}), "add_pooling_layer": False}
        path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")


def export_sentence_transformers(source: str | Path, out: str | Path, *, force: bool = False,
                                 max_query_length: int | None = None, max_passage_length: int | None = None,
                                 allow_pickle: bool = False) -> Path:
    """Write `source` (a run folder, its best/ or final/ model, any saved model folder, or 'default') as a
    sentence-transformers folder `out` with a model card, atomically; an existing `out` is refused unless `force`.
    Lengths default to `DenseEncoder`'s. Returns `out`."""
    from ..models import load_model, load_tokenizer

    out = Path(out).expanduser()
    if out.exists() and not force:
        raise TaserError(f"{out} already exists; pass --force to replace it")
    model_dir, run_dir = resolve_model_dir(source)
    q_default, p_default = default_lengths()
    lengths = (max_query_length or q_default, max_passage_length or p_default)
    model = load_model(model_dir, allow_pickle=allow_pickle).eval()
    tokenizer = load_tokenizer(model_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as work, atomic_dir(out) as tmp:
        st, arch = sentence_transformer(model, tokenizer, Path(work), *lengths)
        st.save(str(tmp), create_model_card=False)
        _keep_pooler_off(tmp)
        write_model_card(tmp, config=model.config.to_dict(), run_dir=run_dir, source=model_dir,
                         base_model=DEFAULT if str(source) == DEFAULT else None,
                         export={"format": "sentence-transformers", "arch": arch, "max_query_length": lengths[0],
                                 "max_passage_length": lengths[1], "passage_format": model_passage_format(model)})
    return out
