"""Planted: 256 MiB from cuMemAllocAsync on the current stream, freed with cuMemFreeAsync
inside the call (the stream-ordered pool; torch's counters never see it)."""

import ctypes

import torch
from _cuda import MIB, check, current_stream, driver


class ModelNew(torch.nn.Module):
    PLANTED_BYTES = 256 * MIB

    def __init__(self) -> None:
        super().__init__()
        self.cu = driver()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stream = current_stream()
        ptr = ctypes.c_uint64(0)
        check(
            self.cu.cuMemAllocAsync(ctypes.byref(ptr), ctypes.c_size_t(self.PLANTED_BYTES), stream),
            "cuMemAllocAsync",
        )
        check(
            self.cu.cuMemsetD8Async(
                ptr, ctypes.c_ubyte(1), ctypes.c_size_t(self.PLANTED_BYTES), stream
            ),
            "cuMemsetD8Async",
        )
        out = x * 2.0
        check(self.cu.cuMemFreeAsync(ptr, stream), "cuMemFreeAsync")
        return out
