"""Memory of one module: the bytes it keeps between calls, and the peak of one warm forward call
through the native extension (the CUPTI memory tracer and the RSS sampler live in C++).

- `state_bytes`: parameters, buffers and tensor attributes, each storage counted once.
- `observe_first_call`: what the process's first forward took and kept (lazy module loading,
  library handles, workspaces), recorded once and reported beside every later figure.
- `peak_memory`: one warm forward call under the CUPTI memory tracer (fallback: torch's
  allocator and cudaMemGetInfo, marked partial), with bytes by source; on the CPU, the peak
  resident set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import kbv_native  # noqa: E402  (imported after torch: it shares torch's CUDA runtime)
import torch

from .devices import device_index, synchronize
from .kernel_audit import warm_tracer


def state_bytes(module: torch.nn.Module) -> int:
    """Bytes the module keeps between calls: parameters, buffers and tensor attributes."""
    seen: set[int] = set()
    total = 0

    def add(t: torch.Tensor) -> None:
        nonlocal total
        key = t.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()

    for sub in module.modules():
        for value in (
            list(sub.__dict__.values())
            + list(sub._parameters.values())
            + list(sub._buffers.values())
        ):
            if isinstance(value, torch.Tensor):
                add(value)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, torch.Tensor):
                        add(item)
    return total


# -- first call ------------------------------------------------------------------------------
_first_call: dict[str, Any] | None = None


def observe_first_call(call: Callable[[], Any], device: torch.device) -> Any:
    """Runs call(); the process's first call through here also records the device memory it
    took and kept (cudaMemGetInfo; lazy module loading, library handles and workspaces, torch's
    cache growing, local-memory growth) and torch's allocator peak during it."""
    global _first_call
    if _first_call is not None or device.type != "cuda" or not kbv_native.has_cuda:
        return call()
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    allocated = torch.cuda.memory_allocated(device)
    free_before, _ = kbv_native.cuda_mem_get_info()
    result = call()
    synchronize(device)
    free_after, _ = kbv_native.cuda_mem_get_info()
    _first_call = {
        "device_growth_bytes": max(0, free_before - free_after),
        "allocator_peak_bytes": torch.cuda.max_memory_allocated(device) - allocated,
        "method": "cuda_mem_get_info",
    }
    return result


def first_call_record() -> dict[str, Any] | None:
    return _first_call


# -- one warm call ------------------------------------------------------------------------------
def source_group(label: str) -> str:
    """The memory issue's three sources from the tracer's labels: torch, the math libraries,
    the candidate's own extension; everything else is `other`."""
    if label == "torch":
        return "torch"
    if label in ("cublas", "cudnn", "cufft", "cusparse", "cusolver", "curand"):
        return "cublas_cudnn"
    if label.startswith("ext:") or label == "ctypes":  # ctypes: the candidate calling CUDA itself
        return "candidate_extension"
    return "other"


def _fallback_cuda(call: Callable[[], Any], device: torch.device) -> dict[str, Any]:
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    allocated_before = torch.cuda.memory_allocated(device)
    reserved_before = torch.cuda.memory_reserved(device)
    free_before, _ = kbv_native.cuda_mem_get_info()
    output = call()
    synchronize(device)
    allocator_peak = torch.cuda.max_memory_allocated(device) - allocated_before
    reserved_peak = torch.cuda.max_memory_reserved(device)
    free_after, _ = kbv_native.cuda_mem_get_info()
    del output
    reserved = torch.cuda.memory_reserved(device)
    # Device memory that left the driver's free pool but not into PyTorch's cache: library
    # workspaces, raw cudaMalloc kept by the candidate, local-memory growth.
    driver_growth = max(0, (free_before - free_after) - (reserved - reserved_before))
    return {
        "peak_bytes": allocator_peak + driver_growth,
        "allocator_peak_bytes": allocator_peak,
        "driver_growth_bytes": driver_growth,
        "reserved_bytes": reserved,
        "reserved_peak_bytes": reserved_peak,
        "method": "torch_allocator_peak+driver_mem_info",
    }


def _traced_cuda(call: Callable[[], Any], device: torch.device) -> dict[str, Any]:
    """One call under the CUPTI tracer, with torch's counters read over the same call."""
    warm_tracer(device)
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    allocated_before = torch.cuda.memory_allocated(device)
    with kbv_native.MemoryTrace(device_index(device)) as trace:
        output = call()
        synchronize(device)
    allocator_peak = torch.cuda.max_memory_allocated(device) - allocated_before
    reserved_peak = torch.cuda.max_memory_reserved(device)
    del output
    s = dict(trace.summary())
    s["valid"] = trace.valid
    return {
        "trace": s,
        "allocator_peak_bytes": allocator_peak,
        "reserved_peak_bytes": reserved_peak,
    }


def peak_memory(call: Callable[[], Any], device: torch.device) -> dict[str, Any]:
    """Memory of one warm forward call, above what was allocated before it.

    CUDA: the CUPTI tracer's logical peak (torch's tensor peak plus every other allocator's
    running peak), reserved peak, persistent growth, local memory and bytes by source; when the
    tracer is unusable, the v1 figure (torch allocator peak + cudaMemGetInfo growth) with
    `partial: True`. CPU: the process's peak resident set during the call."""
    with torch.no_grad():
        if device.type == "cuda":
            result = _fallback_cuda(call, device)
            result["partial"] = True
            first = first_call_record()
            if first is not None:
                result["first_call"] = first
                result["first_call_overhead_bytes"] = max(
                    0, first["device_growth_bytes"] - result["driver_growth_bytes"]
                )
            try:
                traced = _traced_cuda(call, device)
            except Exception as error:  # noqa: BLE001 - the fallback figure stands, marked
                synchronize(device)
                result["why_partial"] = f"memory tracer failed: {type(error).__name__}: {error}"
                return result
            trace = traced["trace"]
            result["trace"] = {k: v for k, v in trace.items() if k not in ("notes",)}
            result["trace_notes"] = list(trace.get("notes", []))
            if not trace["available"] or not trace["valid"]:
                result["why_partial"] = (
                    trace["why_unavailable"]
                    if not trace["available"]
                    else "trace not valid: " + "; ".join(trace.get("notes", []))
                )
                return result
            allocator_peak = traced["allocator_peak_bytes"]
            result["fallback_peak_bytes"] = result["peak_bytes"]
            by_source: Counter[str] = Counter()
            for label, n in trace["by_source_allocated"].items():
                if label != "torch" and label != "cupti":
                    by_source[source_group(label)] += n
            by_source["torch"] = allocator_peak
            # No allocation in the call at all (a warm caching allocator): nothing to attribute.
            if trace["attribution"] == "library" or trace["allocations"] == 0:
                logical = allocator_peak + trace["peak_excluding_torch_bytes"]
                result["partial"] = False
            else:
                logical = max(result["peak_bytes"], trace["peak_bytes"])
                result["why_partial"] = "CUPTI gave no allocation sources"
            result.update(
                {
                    "peak_bytes": logical,
                    "logical_peak_bytes": logical,
                    "allocator_peak_bytes": allocator_peak,
                    "reserved_peak_bytes": traced["reserved_peak_bytes"]
                    + trace["pool_peak_size_bytes"],
                    "persistent_growth_bytes": trace["live_at_exit_bytes"],
                    "local_memory_bytes": trace["local_memory_bytes"],
                    "local_memory_above_default_bytes": trace["local_memory_above_default_bytes"],
                    "bytes_by_source": dict(by_source),
                    "method": "cupti_memory_trace",
                }
            )
            return result
        with kbv_native.PeakRss() as rss:
            output = call()
        del output
        return {
            "peak_bytes": max(0, rss.peak_bytes - rss.baseline_bytes),
            "method": f"process_peak_rss({rss.method})",
            "partial": False,
        }
