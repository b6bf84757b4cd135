"""CUPTI in the worker: the tracer's one-time warm-up, and the kernel-activity audit beside the
headline time.

- `warm_tracer`: CUPTI's first trace initialises it and allocates its buffers at the first kernel
  it sees; done once per process, before any trace whose figures count (this audit, the memory
  tracer in memory.py, the kernel trace in gpu_guards.py), so none of them pays for it.
- `kernel_audit`: CUPTI kernel records of a few calls: the span of the kernels against the
  call's event time (work left running on another stream makes the span longer), and which
  kernels the first call launched (`kernel_signature`): the same code on the same inputs in two
  processes launches the same kernels unless a library chose another plan in one of them
  (kbv audit compares its reference's copy with the TF32 baseline so).
"""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

import kbv_native  # noqa: E402  (imported after torch: it shares torch's CUDA runtime)
import torch

from .devices import device_index, synchronize

_cupti_warmed = False


def warm_tracer(device: torch.device) -> None:
    """CUPTI's first trace initialises it (and it allocates its own buffers at the first kernel
    seen): one trace around a tiny kernel, once per process."""
    global _cupti_warmed
    if _cupti_warmed:
        return
    _cupti_warmed = True
    with kbv_native.MemoryTrace(device_index(device)):
        torch.zeros(1, device=device).add_(1)
        synchronize(device)


def kernel_signature(names: list[str]) -> dict[str, Any]:
    """The kernels of one call, comparable across processes: how many distinct ones, a hash of
    their names with how often each ran (their order left out: streams may interleave them),
    and the most frequent few by name."""
    counts = Counter(names)
    text = "\n".join(f"{name}\t{n}" for name, n in sorted(counts.items()))
    return {
        "distinct": len(counts),
        "sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
        "top": [name[:160] for name, _ in sorted(counts.items(), key=lambda c: (-c[1], c[0]))[:4]],
    }


def kernel_audit(call: Callable[[int], Any], device: torch.device, calls: int) -> dict[str, Any]:
    """Kernel-activity audit: `calls` cold, unblocked calls, each under CUPTI kernel records.
    event_ms: the CUDA-event time on the current stream; kernel_span_ms: first kernel start to
    last kernel end on the device, any stream. An honest single-stream call has span <= event
    time (the event time also holds launch gaps); work left running on another stream past the
    end event makes the span longer. Only the figures: the judgement is the caller's."""
    if device.type != "cuda" or not kbv_native.has_cuda:
        return {"available": False, "why": "not a CUDA device"}
    try:
        return _kernel_audit(call, device, calls)
    except Exception as error:  # noqa: BLE001 - an audit that fails is reported, never a verdict
        synchronize(device)
        return {"available": False, "why": f"audit failed: {type(error).__name__}: {error}"}


def _kernel_audit(call: Callable[[int], Any], device: torch.device, calls: int) -> dict[str, Any]:
    stream = torch.cuda.current_stream(device).cuda_stream
    event_ms: list[float] = []
    span_ms: list[float] = []
    kernels: list[int] = []
    signature: dict[str, Any] | None = None
    with torch.no_grad():
        warm_tracer(device)
        for k in range(calls):
            # The first call's kernels by name too (its activities recorded); the others count.
            with kbv_native.MemoryTrace(device_index(device), k == 0) as trace:
                r = kbv_native.time_cuda(lambda _i, k=k: call(k), 1, 0, stream, True, False)
                torch.cuda.synchronize(device)
            if not trace.available:
                return {"available": False, "why": trace.why_unavailable}
            summary = trace.summary()
            event_ms.append(r["samples_ms"][0])
            span_ms.append(summary["kernel_span_ns"] / 1e6)
            kernels.append(summary["kernels"])
            if k == 0 and not summary.get("dropped") and not summary.get("record_errors"):
                names = [a["name"] for a in summary["activities"] if a["kind"] == "kernel"]
                signature = kernel_signature(names) if names else None
    ratio = statistics.median(span_ms) / statistics.median(event_ms) if event_ms else None
    return {
        "available": True,
        "event_ms": event_ms,
        "kernel_span_ms": span_ms,
        "kernels": kernels,
        "span_over_event": ratio,
        "signature": signature,
        "method": "cupti_concurrent_kernel_records",
    }
