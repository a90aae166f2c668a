"""The settings of one `taser bench` run (no heavy imports at module level, so the CLI stays quick to start)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BenchConfig:
    """Settings of one `taser bench` run. `quick` shrinks every size so the whole suite takes seconds."""

    quick: bool = False
    device: str = "cpu"
    seed: int = 0
    data_dir: str | None = None
    mirror: str | None = None
    progress: bool = True

    def __post_init__(self):
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ValueError("device 'cuda' asked for, but torch sees no GPU")

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full

    @property
    def model(self) -> str:
        """The model the training and precision benchmarks build: the packaged default, or in a quick run (a smoke
        test of the code, not a measurement) the tiny random BERT (`taser_lib.models.TINY`)."""
        return self.pick("default", "tiny")

    @property
    def torch_device(self):
        import torch

        return torch.device(self.device)
