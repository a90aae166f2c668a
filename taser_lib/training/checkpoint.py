"""Training checkpoints that a killed run resumes from exactly.

A checkpoint is a directory `<ckpt_dir>/checkpoint-<step>/` (Hugging Face Trainer's name; runs of older versions
wrote `step-<step, 9 digits>/`, which are found and resumed from as well) holding
- the model weights as safetensors: `model/` (config.json + model.safetensors, loadable with from_pretrained) for a
  transformers PreTrainedModel, else `model.safetensors` (safetensors.torch.save_model: tied tensors handled);
- `optimizer.pt`, `scheduler.pt` (torch.save of the state dicts; loaded with weights_only=True);
- `rng.pt`: python `random`, numpy, torch CPU and CUDA generator states of every rank, plus named
  torch.Generator objects the trainer owns;
- `trainer_state.json`: step, data position (`data_state`), `extra`, world size, run metadata.

It is written into a hidden temporary directory beside it and renamed into place only when complete, so a crash at
any moment leaves the previous checkpoints untouched and loadable; leftovers are cleared by the next save.
In a distributed run every rank calls save/load (they exchange RNG states); rank 0 writes; the directory must be
on a filesystem all ranks see.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from transformers import PreTrainedModel

from ..meta import run_metadata
from ..models.weights import quiet_loading
from .distributed import all_gather_objects, barrier, get_rank, get_world_size, is_main_process

_NAME = re.compile(r"^(?:checkpoint|step)-(\d+)$")
_STATE_FILE = "trainer_state.json"
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"


@dataclass(frozen=True)
class Checkpoint:
    """What load_checkpoint hands back besides the restored objects."""
    path: Path
    step: int
    data_state: dict[str, Any]
    extra: dict[str, Any]


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step}"


def list_checkpoints(ckpt_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints under `ckpt_dir`, oldest step first (temporary and foreign directories ignored)."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir()
             if (m := _NAME.match(p.name)) and (p / _STATE_FILE).is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(ckpt_dir: str | os.PathLike) -> Path | None:
    """The checkpoint with the highest step under `ckpt_dir`, or None when there is none."""
    found = list_checkpoints(ckpt_dir)
    return found[-1] if found else None


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose weights are saved: without DDP (`.module`) or torch.compile (`._orig_mod`) wrappers."""
    while True:
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), torch.nn.Module):
            model = model._orig_mod
        else:
            return model


def _rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    np_state = np.random.get_state(legacy=False)
    return {
        "python": random.getstate(),
        # numpy's key array as a list keeps rng.pt loadable with weights_only=True
        "numpy": {**np_state, "state": {"key": np_state["state"]["key"].tolist(), "pos": np_state["state"]["pos"]}},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "generators": {name: g.get_state() for name, g in generators.items()},
    }


def _set_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    random.setstate(state["python"])
    np_state = state["numpy"]
    np.random.set_state({**np_state, "state": {"key": np.array(np_state["state"]["key"], dtype=np.uint32),
                                               "pos": np_state["state"]["pos"]}})
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(state["cuda"]):
            torch.cuda.set_rng_state_all(state["cuda"])
        else:
            warnings.warn(f"checkpoint holds {len(state['cuda'])} CUDA RNG states but this process sees "
                          f"{torch.cuda.device_count() if torch.cuda.is_available() else 0} GPUs: not restored",
                          stacklevel=3)
    missing = set(generators) - set(state["generators"])
    if missing:
        raise ValueError(f"checkpoint has no state for generators {sorted(missing)}")
    for name, g in generators.items():
        g.set_state(state["generators"][name])


def _fsync_tree(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clear_leftovers(ckpt_dir: Path) -> None:
    """Remove half-written checkpoints of a crashed save; put back a checkpoint a crash left moved aside."""
    for p in ckpt_dir.iterdir():
        if p.name.startswith(_TMP_PREFIX):
            shutil.rmtree(p, ignore_errors=True)
        elif p.name.startswith(_OLD_PREFIX):
            final = ckpt_dir / p.name[len(_OLD_PREFIX):].rsplit("-", 1)[0]
            if final.exists():
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.replace(p, final)


def _write(tmp: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
           scheduler: Any | None, rng_states: list[dict[str, Any]], state: dict[str, Any]) -> None:
    model = _unwrap(model)
    if isinstance(model, PreTrainedModel):
        with quiet_loading():  # no "Writing model shards" bar on stderr / in notebooks
            model.save_pretrained(tmp / "model")
        state["model_format"] = "pretrained"
    else:
        save_model(model, str(tmp / "model.safetensors"))
        state["model_format"] = "safetensors"
    if optimizer is not None:
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    if scheduler is not None:
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_states, tmp / "rng.pt")
    (tmp / _STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _fsync_tree(tmp)


def save_checkpoint(ckpt_dir: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                    scheduler: Any | None, step: int, data_state: dict[str, Any],
                    extra: dict[str, Any] | None = None, keep_last: int | None = 3,
                    generators: dict[str, torch.Generator] | None = None) -> Path:
    """Write `<ckpt_dir>/checkpoint-<step>/` atomically and return its path; then keep only the newest `keep_last`
    checkpoints (None keeps all). Saving a step that already exists replaces it.

    `data_state` and `extra` must be JSON-serialisable (data position: epoch, batch index, sampler seed, ...).
    `generators` are the trainer's own torch.Generator objects, saved per rank with the global RNG states.
    Every rank of a distributed run must call this; rank 0 writes and the others wait for it.
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a non-negative int, got {step!r}")
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be >= 1 or None, got {keep_last}")
    state = {"step": step, "data_state": data_state, "extra": extra or {}, "world_size": get_world_size()}
    try:
        json.dumps(state)
    except TypeError as e:
        raise ValueError(f"data_state and extra must be JSON-serialisable: {e}") from e
    rng_states = all_gather_objects(_rng_state(generators or {}))  # collective: before the rank-0-only part
    ckpt_dir = Path(ckpt_dir)
    final = ckpt_dir / checkpoint_name(step)
    if is_main_process():
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        _clear_leftovers(ckpt_dir)
        token = uuid.uuid4().hex[:8]
        tmp = ckpt_dir / f"{_TMP_PREFIX}{final.name}-{token}"
        tmp.mkdir()
        try:
            _write(tmp, model, optimizer, scheduler, rng_states, {**state, "metadata": run_metadata()})
            if final.exists():
                old = ckpt_dir / f"{_OLD_PREFIX}{final.name}-{token}"
                os.replace(final, old)
                os.replace(tmp, final)
                shutil.rmtree(old)
            else:
                os.replace(tmp, final)
            _fsync_dir(ckpt_dir)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        if keep_last is not None:
            for p in list_checkpoints(ckpt_dir)[:-keep_last]:
                shutil.rmtree(p)
    barrier()
    return final


def load_checkpoint(path: str | os.PathLike, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer | None = None, scheduler: Any | None = None,
                    generators: dict[str, torch.Generator] | None = None, restore_rng: bool = True) -> Checkpoint:
    """Restore the model weights (strictly: every tensor must match), optionally the optimizer, scheduler, this
    rank's RNG states and the named generators, from a checkpoint directory written by save_checkpoint.

    Returns the step, data position and extra fields. A run resumed with another world size gets a warning, and
    rank r takes the RNG states saved by rank r modulo the old world size.
    """
    path = Path(path)
    state_file = path / _STATE_FILE
    if not state_file.is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint: {_STATE_FILE} missing")
    state = json.loads(state_file.read_text(encoding="utf-8"))
    weights = path / "model" / "model.safetensors" if state["model_format"] == "pretrained" \
        else path / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} missing (a sharded or foreign checkpoint is not supported)")
    load_model(_unwrap(model), str(weights), strict=True)
    for obj, name in ((optimizer, "optimizer.pt"), (scheduler, "scheduler.pt")):
        if obj is not None:
            if not (path / name).is_file():
                raise FileNotFoundError(f"{path / name} missing: the checkpoint was saved without it")
            obj.load_state_dict(torch.load(path / name, map_location="cpu", weights_only=True))
    if restore_rng:
        rng_states = torch.load(path / "rng.pt", map_location="cpu", weights_only=True)
        if len(rng_states) != get_world_size():
            warnings.warn(f"{path} was saved by {len(rng_states)} ranks and is resumed by {get_world_size()}: "
                          "the run will not repeat the uninterrupted one exactly", stacklevel=2)
        _set_rng_state(rng_states[get_rank() % len(rng_states)], generators or {})
    return Checkpoint(path=path, step=state["step"], data_state=state["data_state"], extra=state["extra"])
