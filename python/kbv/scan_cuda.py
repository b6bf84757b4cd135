"""Static scan of a candidate's C++/CUDA sources for GPU-only patterns: evidence, never a
verdict. The sources (the string constants passed to `load_inline`) are stripped of comments
and string literals (`scan.strip_cpp`) and cut into tokens; the findings come from the token
stream, not from regular expressions over raw text:

- `__global__` kernels defined, and which of them the sources ever name again (a launch with
  `<<<...>>>`, `cudaLaunchKernel`, a function pointer): a kernel defined and never named is a
  ghost (B2 on the GPU);
- cuBLAS/cuDNN called directly (B1 without aten, invisible to the dispatcher trace);
- streams created or taken from a pool (T1), CUDA graphs (stale replay), persisting-L2 access
  policy windows and limits (T7).

The kernel names also let the GPU kernel trace tell the candidate's own kernels from library
kernels (`kernels` in the result)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"<<<|>>>|::|[A-Za-z_]\w*|\d[\w.]*|\S")
# Attributes that may sit between `__global__` and the kernel's name, each with its own (...)
_ATTRIBUTES = {
    "__launch_bounds__",
    "__attribute__",
    "__declspec",
    "alignas",
    "__maxnreg__",
    "__cluster_dims__",
    "__align__",
}
_STREAM_CALLS = {
    "cudaStreamCreate",
    "cudaStreamCreateWithFlags",
    "cudaStreamCreateWithPriority",
    "cuStreamCreate",
    "cuStreamCreateWithPriority",
    "getStreamFromPool",
    "getStreamFromExternal",
}
_L2_NAMES = {
    "accessPolicyWindow",
    "cudaStreamAttributeAccessPolicyWindow",
    "cudaKernelNodeAttributeAccessPolicyWindow",
    "cudaLimitPersistingL2CacheSize",
    "cudaAccessPropertyPersisting",
    "CU_LIMIT_PERSISTING_L2_CACHE_SIZE",
    "CU_ACCESS_PROPERTY_PERSISTING",
    "cudaLaunchAttributeAccessPolicyWindow",
}
_GRAPH_PREFIXES = ("cudaGraph", "cuGraph", "cudaStreamBeginCapture", "cuStreamBeginCapture")

FINDINGS = {
    "scan_cpp_ghost_kernel": (
        "warn",
        "C++/CUDA source defines a __global__ kernel it never launches or names",
    ),
    "scan_cpp_blas": ("warn", "C++/CUDA source calls cuBLAS or cuDNN directly"),
    "scan_cpp_streams": ("warn", "C++/CUDA source creates CUDA streams"),
    "scan_cpp_graphs": ("warn", "C++/CUDA source builds or replays CUDA graphs"),
    "scan_cpp_l2_persist": ("warn", "C++/CUDA source sets persisting-L2 windows or limits"),
}


def tokens(code: str) -> list[str]:
    """Tokens of C++ source that has already been through `strip_cpp`."""
    return _TOKEN.findall(code)


def _skip_parens(toks: list[str], i: int) -> int:
    """Index just past the balanced (...) that starts at toks[i] == '('."""
    depth = 0
    while i < len(toks):
        if toks[i] == "(":
            depth += 1
        elif toks[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


@dataclass
class CudaScan:
    kernels: list[str] = field(default_factory=list)  # __global__ names, in order defined
    named_again: set[str] = field(default_factory=set)
    launched_with_chevrons: set[str] = field(default_factory=set)
    blas: list[str] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)
    l2: list[str] = field(default_factory=list)

    @property
    def never_launched(self) -> list[str]:
        return [k for k in self.kernels if k not in self.named_again]

    def findings(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.never_launched:
            out["scan_cpp_ghost_kernel"] = [
                f"__global__ {k} is never launched" for k in self.never_launched
            ]
        for key, items in (
            ("scan_cpp_blas", self.blas),
            ("scan_cpp_streams", self.streams),
            ("scan_cpp_graphs", self.graphs),
            ("scan_cpp_l2_persist", self.l2),
        ):
            if items:
                out[key] = sorted(set(items))[:5]
        return out


def scan_cuda_sources(sources: list[str]) -> CudaScan:
    """`sources`: C++/CUDA texts already stripped of comments and literals."""
    toks: list[str] = []
    for source in sources:
        toks.extend(tokens(source))
        toks.append(";")
    result = CudaScan()
    definition_sites: set[int] = set()
    for i, tok in enumerate(toks):
        if tok != "__global__":
            continue
        j = i + 1
        while j < len(toks) and toks[j] not in (";", "{"):
            if re.match(r"[A-Za-z_]", toks[j]) and j + 1 < len(toks) and toks[j + 1] == "(":
                if toks[j] in _ATTRIBUTES:
                    j = _skip_parens(toks, j + 1)
                    continue
                definition_sites.add(j)
                if toks[j] not in result.kernels:
                    result.kernels.append(toks[j])
                break
            j += 1
    kernels = set(result.kernels)
    for i, tok in enumerate(toks):
        following = toks[i + 1] if i + 1 < len(toks) else ""
        if tok in kernels and i not in definition_sites:
            result.named_again.add(tok)
            if following == "<<<" or (following == "<" and "<<<" in toks[i + 1 : i + 40]):
                result.launched_with_chevrons.add(tok)
        if following == "(" and (tok.startswith(("cublas", "cudnn")) or tok == "cublasLtMatmul"):
            result.blas.append(tok)
        if tok == "getCurrentCUDABlasHandle":
            result.blas.append(tok)
        if tok in _STREAM_CALLS:
            result.streams.append(tok)
        if tok.startswith(_GRAPH_PREFIXES):
            result.graphs.append(tok)
        if tok in _L2_NAMES:
            result.l2.append(tok)
    return result
