"""Speed engineering beside the core, optional: the int8 encoder for indexing a corpus (`quantized`: PyTorch's int8
kernels, or ONNX Runtime's where it is installed, `onnx_int8`), each engine measured on this machine before it is
chosen, and the float encoder compiled by `torch.compile` (`compiled`). The core (`taser_lib.models`, `retrieval`,
`training`, ...) never imports it; `taser index --precision int8` and the book's benchmarks do.

    >>> from taser_lib.speed.quantized import int8_encoder
    >>> int8 = int8_encoder(load_encoder(run.model_path))   # passages in int8, questions at fp32
    >>> from taser_lib.speed.compiled import compiled_encoder
    >>> fast = compiled_encoder(load_encoder(run.model_path, precision="auto"))   # `taser index --compile`
"""
