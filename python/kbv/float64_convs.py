"""Float64 transposed convolutions on the GPU through PyTorch's own path, not cuDNN's.

The float64 truth of KernelBench's transposed convolutions was most of the audit's reference
time: in session 31's H100 trace 79 s of truth for 68_conv_transposed_3D alone (4-8 s a case
against 0.04 s for its float32 forward). cuDNN has no fast float64 algorithm for them (its
benchmark search finds none faster than its heuristic's pick: session 33's probe), while PyTorch's
own path (columns and cuBLAS's DGEMM) takes a tenth of the time for the same values, to the last
bits or so: 0.25 s against 2.78 s for 68, 0.05 against 0.52 s for 70_conv_transposed_3D, 0.03
against 0.33 s for 78_conv_transposed_2D, the largest relative difference 9e-16
(docs/results/h100-2026-12-07-s33/). Its columns buffer takes several times cuDNN's workspace
(16 GB against 3.6 GB at 68's peak), so a call that runs out of device memory there is made
again through cuDNN. Ordinary convolutions are left alone: the two paths were as fast there, or
cuDNN faster (87_conv_pointwise_2D) with half the memory.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

_TRANSPOSED = {torch.conv_transpose1d, torch.conv_transpose2d, torch.conv_transpose3d}


def has_transposed_convs(model: nn.Module) -> bool:
    """Whether `model` holds a transposed convolution module (the calls the mode routes)."""
    return any(isinstance(m, nn.modules.conv._ConvTransposeNd) for m in model.modules())


class NativeTransposedConvs(TorchFunctionMode):
    """Within it, a transposed convolution of a float64 tensor on `device_type` runs with cuDNN
    off (every other call as it would); one that runs out of device memory so runs again with
    cuDNN as it was. `routed` and `fell_back` count the calls (read by the tests; no result
    records them)."""

    def __init__(self, device_type: str = "cuda") -> None:
        super().__init__()
        self.device_type = device_type
        self.routed = 0
        self.fell_back = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _TRANSPOSED and self._applies(args):
            previous = torch.backends.cudnn.enabled
            torch.backends.cudnn.enabled = False
            try:
                result = func(*args, **kwargs)
                self.routed += 1
                return result
            except torch.OutOfMemoryError:
                self.fell_back += 1  # its columns did not fit: cuDNN's way, with less memory
            finally:
                torch.backends.cudnn.enabled = previous
        return func(*args, **kwargs)

    def _applies(self, args: tuple[Any, ...]) -> bool:
        x = args[0] if args else None
        return (
            isinstance(x, torch.Tensor)
            and x.dtype == torch.float64
            and x.device.type == self.device_type
        )
