"""ctypes handles on the CUDA driver and cuBLAS for the planted-allocation candidates (the
libraries torch has already loaded; nothing is built)."""

from __future__ import annotations

import ctypes

import torch

MIB = 1 << 20


def driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with CUresult {status}")


def loaded_library(fragment: str) -> str:
    """The path of a shared object this process has mapped whose name contains `fragment`."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = path.rsplit("/", 1)[-1]
            if fragment in name:
                return path
    raise RuntimeError(f"no {fragment} loaded in this process")


def cublas() -> ctypes.CDLL:
    a = torch.ones(64, 64, device="cuda")
    (a @ a).sum().item()  # makes torch load libcublas
    return ctypes.CDLL(loaded_library("libcublas.so"))


def current_stream() -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
