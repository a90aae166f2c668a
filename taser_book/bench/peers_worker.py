"""The peers' side of `taser bench --only peers`: sentence-transformers with its own backends, run by the Python of a
separate environment where a user would install them (`make peers-env`: `sentence-transformers[onnx,openvino]`
and `datasets`),
so that nothing of taser_lib is loaded beside them. Standalone: it imports only the standard library, numpy, torch
and sentence-transformers.

It speaks JSON lines: the first line it reads names the model folder, a work folder, the passages file, the batch
size, the maximum length and the contenders; it answers with what each contender is (or why it could not be
built). Then each line `{"encode": NAME}` encodes every passage with that contender, writes the vectors to
`<work>/<NAME>.npy` and answers `{"ok": true}`; `{"quit": true}` ends it. Its own messages go to stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
from pathlib import Path

CONTENDERS = ("st_fp32", "st_bf16", "st_onnx", "st_onnx_O3", "st_onnx_int8", "st_openvino", "st_openvino_int8")


def _onnx_isa() -> str:
    """The instruction set sentence-transformers' dynamic int8 export is told to target on this CPU."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    return "avx512_vnni" if "avx512_vnni" in flags else "avx512" if "avx512f" in flags else "avx2"


class Peers:
    def __init__(self, model: str, work: str, batch: int, max_length: int):
        self.source, self.work, self.batch, self.max_length = model, Path(work), batch, max_length
        self.models: dict = {}

    def _copy(self, name: str) -> str:
        """A writable copy of the model folder: the ONNX and OpenVINO exports are saved beside its weights."""
        target = self.work / name
        if not target.exists():
            shutil.copytree(self.source, target)
        return str(target)

    def _load(self, path: str, **kwargs):
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(path, device="cpu", local_files_only=True, **kwargs)
        model.max_seq_length = self.max_length
        return model

    def build(self, name: str) -> dict:
        """Build one contender as its documentation says a user does; returns what it is."""
        import torch

        if name == "st_fp32":
            self.models[name] = self._load(self.source)
            return {"what": "SentenceTransformer at its default float32 (PyTorch)"}
        if name == "st_bf16":
            self.models[name] = self._load(self.source).to(torch.bfloat16)
            return {"what": "SentenceTransformer cast to bfloat16 (PyTorch)"}
        if name in ("st_onnx", "st_onnx_O3", "st_onnx_int8"):
            folder = self._copy("onnx-model")
            if not (Path(folder) / "onnx" / "model.onnx").is_file():
                self._load(folder, backend="onnx").save_pretrained(folder)  # the export, kept for the others
            if name == "st_onnx":
                self.models[name] = self._load(folder, backend="onnx")
                return {"what": "backend='onnx' (ONNX Runtime, optimum's export)"}
            base = self._load(folder, backend="onnx")
            if name == "st_onnx_O3":
                from sentence_transformers import export_optimized_onnx_model

                export_optimized_onnx_model(base, "O3", folder)
                self.models[name] = self._load(folder, backend="onnx", model_kwargs={"file_name": "onnx/model_O3.onnx"})
                return {"what": "backend='onnx', export_optimized_onnx_model(O3)"}
            from sentence_transformers import export_dynamic_quantized_onnx_model

            isa = _onnx_isa()
            export_dynamic_quantized_onnx_model(base, isa, folder)
            self.models[name] = self._load(folder, backend="onnx",
                                           model_kwargs={"file_name": f"onnx/model_qint8_{isa}.onnx"})
            return {"what": f"backend='onnx', export_dynamic_quantized_onnx_model({isa!r}): dynamic int8"}
        if name in ("st_openvino", "st_openvino_int8"):
            folder = self._copy("openvino-model")
            if not (Path(folder) / "openvino" / "openvino_model.xml").is_file():
                self._load(folder, backend="openvino").save_pretrained(folder)
            if name == "st_openvino":
                self.models[name] = self._load(folder, backend="openvino")
                return {"what": "backend='openvino' (OpenVINO, optimum-intel's export)"}
            from sentence_transformers import export_static_quantized_openvino_model
            from optimum.intel import OVQuantizationConfig

            calibration = self.work / "calibration"  # the passages themselves: offline, no hub dataset
            base = self._load(folder, backend="openvino")
            export_static_quantized_openvino_model(base, OVQuantizationConfig(), folder,
                                                   dataset_name=str(calibration), dataset_config_name="default",
                                                   dataset_split="train", column_name="text")
            self.models[name] = self._load(folder, backend="openvino",
                                           model_kwargs={"file_name": "openvino/openvino_model_qint8_quantized.xml"})
            return {"what": "backend='openvino', export_static_quantized_openvino_model (int8, calibrated on "
                            "300 of the passages)"}
        raise ValueError(f"unknown contender {name!r}")

    def encode(self, name: str, passages: list[str]) -> None:
        import numpy as np

        vectors = self.models[name].encode(passages, batch_size=self.batch, convert_to_numpy=True,
                                           show_progress_bar=False)
        np.save(self.work / f"{name}.npy", np.asarray(vectors, dtype=np.float32))


def main() -> int:
    answer = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's channel; everything printed goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    setup = json.loads(sys.stdin.readline())
    passages = json.loads(Path(setup["passages"]).read_text(encoding="utf-8"))
    calibration = Path(setup["work"]) / "calibration"
    calibration.mkdir(parents=True, exist_ok=True)
    with open(calibration / "train.jsonl", "w", encoding="utf-8") as f:
        for text in passages[:300]:
            f.write(json.dumps({"text": text}) + "\n")
    peers = Peers(setup["model"], setup["work"], setup["batch"], setup["max_length"])
    built = {}
    for name in setup["contenders"]:
        try:
            built[name] = {"ok": True, **peers.build(name)}
            peers.encode(name, passages[:setup["batch"]])  # warm-up on one batch
        except Exception as err:  # noqa: BLE001 - a contender that cannot be built is reported, not fatal
            traceback.print_exc()
            built[name] = {"ok": False, "why": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("sentence-transformers", "torch", "transformers", "onnxruntime", "optimum", "optimum-onnx",
                    "optimum-intel", "openvino", "nncf", "datasets"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    answer.write(json.dumps({"built": built, "versions": versions, "python": sys.executable}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("quit"):
            break
        peers.encode(command["encode"], passages)
        answer.write(json.dumps({"ok": True}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
