"""Planted: a library workspace. Each call creates a cuBLAS handle of its own, runs one SGEMM
with it (so libcublas allocates its workspace) and destroys it: device memory allocated and
released by libcublas inside the call. Its size is not a constant of ours: PLANTED_BYTES is what
the same sequence took with the handle kept, read from cudaMemGetInfo outside any trace."""

import ctypes

import torch
from _cuda import cublas, current_stream


class ModelNew(torch.nn.Module):
    PLANTED_BYTES = 0

    def __init__(self) -> None:
        super().__init__()
        self.lib = cublas()
        self.a = torch.ones(256, 256, device="cuda")
        self.c = torch.empty(256, 256, device="cuda")
        self._cycle(keep=False)  # loads cuBLAS's kernels: not part of the planted figure
        torch.cuda.synchronize()
        free_before, _ = torch.cuda.mem_get_info()
        handle = self._cycle(keep=True)
        torch.cuda.synchronize()
        free_after, _ = torch.cuda.mem_get_info()
        self.lib.cublasDestroy_v2(handle)
        torch.cuda.synchronize()
        self.PLANTED_BYTES = free_before - free_after

    def _cycle(self, keep: bool) -> ctypes.c_void_p:
        handle = ctypes.c_void_p()
        assert self.lib.cublasCreate_v2(ctypes.byref(handle)) == 0
        assert self.lib.cublasSetStream_v2(handle, current_stream()) == 0
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        n = ctypes.c_int(256)
        a, c = ctypes.c_void_p(self.a.data_ptr()), ctypes.c_void_p(self.c.data_ptr())
        status = self.lib.cublasSgemm_v2(
            handle, 0, 0, n, n, n, ctypes.byref(one), a, n, a, n, ctypes.byref(zero), c, n
        )
        assert status == 0, f"cublasSgemm_v2: {status}"
        if not keep:
            self.lib.cublasDestroy_v2(handle)
        return handle

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.lib.cublasDestroy_v2(self._cycle(keep=True))
        return x * 2.0
