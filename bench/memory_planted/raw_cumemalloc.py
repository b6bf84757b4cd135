"""Planted: 256 MiB from cuMemAlloc, written and freed with cuMemFree inside the call (invisible
to torch's counters and to cudaMemGetInfo after the call)."""

import ctypes

import torch
from _cuda import MIB, check, driver


class ModelNew(torch.nn.Module):
    PLANTED_BYTES = 256 * MIB

    def __init__(self) -> None:
        super().__init__()
        self.cu = driver()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ptr = ctypes.c_uint64(0)
        check(
            self.cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(self.PLANTED_BYTES)),
            "cuMemAlloc",
        )
        check(
            self.cu.cuMemsetD8_v2(ptr, ctypes.c_ubyte(1), ctypes.c_size_t(self.PLANTED_BYTES)),
            "cuMemsetD8",
        )
        out = x * 2.0
        check(self.cu.cuMemFree_v2(ptr), "cuMemFree")
        return out
