"""GPU-only checks around the candidate's code, run in the candidate's worker (threats T1, T7,
B1/B2 and S1/S2 on the GPU). Like `guards`, they only gather evidence; the orchestrator judges
it (src/eval/kernel_trace.cpp).

- `kernel_trace`: the GPU activities (kernels, copies, fills) of one forward with their streams
  and device timestamps, recorded by kbv_native's CUPTI tracer (torch.profiler where that is
  unavailable: its first use costs 4-6 s per process on the H200), between two marker
  kernels launched on the current stream before and after the call. The second marker ends
  where CUDA events on the current stream would end the timed region: work on another stream
  that ends later escaped the timer (T1). Each kernel carries its launcher (the library that
  called the launch API, read by the tracer's launch callbacks) and its name: together they tell
  the candidate's own kernels (its extension's, its JIT-compiled Triton kernels; the static scan
  lists their names) from PyTorch's and the libraries' (B1, no_custom_kernel) and find kernels
  that are defined and never launched (B2).
- `poison_free_memory`: fills every free block of PyTorch's caching allocator with 0xFF bytes
  (NaN as float32/float64/half) before a checked call, so an output taken from
  `torch.empty`/`empty_like` and not fully written, or scratch read before it is written,
  shows NaN instead of whatever an earlier call left there (S1, S2). CUDA only: on the CPU
  the worker's large blocks come fresh from the kernel (MALLOC_MMAP_THRESHOLD_), already zero.
  `stale_byte` gives the fill of the one checked call that must look like a timed one (the
  unpoisoned same-buffers re-check): a random byte whose pattern is a finite number, so a
  forward that computes only when its fresh buffer reads NaN (and serves stale or cached
  values otherwise) takes its timing path there too, even from a block poisoned earlier.
- `l2_changes`: the persisting-L2 limit and the current stream's access-policy window, which a
  candidate may set so its data survive the L2 flush between timed calls (T7); reported and
  reset (the timing loop also resets them before every sample)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import kbv_native  # noqa: E402  (imported after torch: it shares torch's CUDA runtime)
import torch

from .devices import device_index
from .kernel_audit import warm_tracer

MARKER_CYCLES = 2000  # ~1 us spin: a kernel on the current stream that brackets the forward
MARKER_NAME = "spin_kernel"  # torch.cuda._sleep's kernel
MAX_KERNELS = 256  # activities kept in the record (their streams and times)
MAX_KERNEL_GROUPS = 512  # distinct (name, launcher) kernels kept for the attribution
POISON_BYTE = 0xFF


def kernel_trace(
    call: Callable[[], Any], device: torch.device, extensions: Any = None
) -> dict[str, Any]:
    """GPU activities of one call of `call`, times in microseconds relative to the end of the
    first marker. {"available", "current_stream", "call_end_us", "activities": [{name, stream,
    start_us, end_us, kind}]}; {"available": False, "why": ...} where it cannot be recorded."""
    if device.type != "cuda":
        return {"available": False, "why": "not a CUDA device"}
    native = _native_kernel_trace(call, device, extensions)
    if native is not None:
        return native
    try:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CUDA])
        calls = _between_markers(call, device, extensions, prof)
        events = prof.profiler.kineto_results.events()
    except Exception as error:  # noqa: BLE001 - no profiler, CUPTI busy: no evidence
        return {"available": False, "why": f"{type(error).__name__}: {str(error)[:200]}"}
    activities = []
    for event in events:
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = event.name()
        kind = (
            "copy"
            if name.startswith("Memcpy")
            else "fill"
            if name.startswith("Memset")
            else "kernel"
        )
        activities.append(
            {
                "name": name[:300],
                "stream": int(event.device_resource_id()),
                "start_ns": int(event.start_ns()),
                "end_ns": int(event.end_ns()),
                "kind": kind,
            }
        )
    record = summarize(activities)
    record["recorded_by"] = "torch.profiler"
    if calls is not None:
        record["extension_calls"] = calls  # completed extension calls in this very forward
    return record


def _between_markers(
    call: Callable[[], Any], device: torch.device, extensions: Any, recorder: Any
) -> int | None:
    """One call of `call` inside `recorder` (a context manager), bracketed by marker kernels on
    the current stream; the extension calls it completed (None without `extensions`)."""
    torch.cuda.synchronize(device)
    before = extensions.total() if extensions is not None else 0
    with torch.no_grad(), recorder:
        torch.cuda._sleep(MARKER_CYCLES)
        output = call()
        torch.cuda._sleep(MARKER_CYCLES)
        torch.cuda.synchronize(device)
    del output
    return extensions.total() - before if extensions is not None else None


def _native_kernel_trace(
    call: Callable[[], Any], device: torch.device, extensions: Any
) -> dict[str, Any] | None:
    """kernel_trace through kbv_native's CUPTI tracer; None where that tracer is unavailable
    (no CUPTI in the build, CUPTI refused), so the caller falls back to torch.profiler."""
    if not kbv_native.has_cuda:
        return None
    index = device_index(device)
    try:
        warm_tracer(device)
        trace = kbv_native.MemoryTrace(index, True)
        calls = _between_markers(call, device, extensions, trace)
    except Exception as error:  # noqa: BLE001 - a forward that fails here: no evidence
        return {"available": False, "why": f"{type(error).__name__}: {str(error)[:200]}"}
    if not trace.available:
        return None
    summary = trace.summary()
    if summary["kernels"] == 0:
        return None  # not even the markers: kernel records are off in this CUPTI
    if summary["dropped"] or summary["record_errors"]:
        # A kernel missing from an incomplete record could read as one never launched.
        return {
            "available": False,
            "why": "CUPTI dropped or could not read activity records: "
            + "; ".join(summary["notes"])[:300],
        }
    activities = [{**a, "name": a["name"][:300]} for a in summary["activities"]]
    record = summarize(activities)
    record["recorded_by"] = "cupti"
    if calls is not None:
        record["extension_calls"] = calls
    return record


def summarize(activities: list[dict[str, Any]]) -> dict[str, Any]:
    """The record the orchestrator judges: markers found, times relative to the first marker's
    end, the current stream (the markers'), everything between the markers."""
    markers = sorted(
        (a for a in activities if MARKER_NAME in a["name"]), key=lambda a: a["start_ns"]
    )
    if len(markers) < 2:
        return {"available": False, "why": "the marker kernels were not recorded"}
    first, last = markers[0], markers[-1]
    origin = first["end_ns"]
    work = [a for a in activities if a is not first and a is not last]
    work.sort(key=lambda a: a["start_ns"])
    # Every kernel of the call, grouped by name and launcher: who computed is judged on all of
    # them, while the activities themselves (streams and times) are capped.
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for a in work:
        if a["kind"] != "kernel":
            continue
        key = (a["name"], a.get("launcher") or "")
        group = groups.get(key)
        if group is None:
            if len(groups) >= MAX_KERNEL_GROUPS:
                continue
            group = groups[key] = {"name": a["name"], "count": 0, "us": 0.0}
            if key[1]:
                group["launcher"] = key[1]
        group["count"] += 1
        group["us"] += max(0, a["end_ns"] - a["start_ns"]) / 1e3
    kernel_count = sum(1 for a in work if a["kind"] == "kernel")
    return {
        "available": True,
        "current_stream": last["stream"],
        "call_end_us": (last["end_ns"] - origin) / 1e3,
        "activity_count": len(work),
        "activities": [
            {
                "name": a["name"],
                "stream": a["stream"],
                "start_us": (a["start_ns"] - origin) / 1e3,
                "end_us": (a["end_ns"] - origin) / 1e3,
                "kind": a["kind"],
                # who launched it (kbv_native's launch callbacks): the candidate's extension,
                # Triton's launcher, libtorch, cuBLAS... (src/judge/kernel_trace.hpp)
                **({"launcher": a["launcher"]} if a.get("launcher") else {}),
            }
            for a in work[:MAX_KERNELS]
        ],
        "kernels_seen": list(groups.values()),
        "kernels_seen_truncated": sum(g["count"] for g in groups.values()) < kernel_count,
    }


def stale_byte() -> int:
    """A fill byte whose repeated pattern reads as a finite number in every float dtype (half's
    exponent bits are all ones from 0x7C, and 0xFC, up)."""
    return random.choice([b for b in range(1, 0x7C)] + [b for b in range(0x81, 0xFC)])


def poison_free_memory(device: torch.device, byte: int = POISON_BYTE) -> int:
    """Fills the caching allocator's free blocks on `device` with `byte` (0xFF: NaN); returns
    the bytes."""
    if device.type != "cuda":
        return 0
    index = device_index(device)
    torch.cuda.synchronize(device)  # no free block still has work pending on another stream
    stream = torch.cuda.current_stream(device).cuda_stream
    total = 0
    for segment in torch.cuda.memory_snapshot():
        # Only the default pool's fixed segments: a CUDA graph's private pool belongs to its
        # replays, and a free range of an expandable segment may be unmapped.
        if segment.get("device", index) != index or segment.get("is_expandable", False):
            continue
        if tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0):
            continue
        address = segment["address"]
        for block in segment["blocks"]:
            size = int(block["size"])
            if block["state"] == "inactive":
                kbv_native.fill_device(int(block.get("address", address)), byte, size, stream)
                total += size
            address += size
    torch.cuda.synchronize(device)
    return total


# The persisting-L2 state a clean process reads after kbv's own reset. It is not always 0: on
# the H200 the limit reads back as 11.25 MiB with nothing set (measured 2026-12-02), so every
# comparison is against this reading, taken before the candidate's code exists.
_clean_l2: dict[str, int] = {}


def record_clean_l2(device: torch.device) -> None:
    """Resets persisting L2 and remembers what the reset state reads as (call before import)."""
    if device.type != "cuda" or not hasattr(kbv_native, "l2_persisting_state"):
        return
    stream = torch.cuda.current_stream(device).cuda_stream
    kbv_native.reset_l2_persisting(stream)
    state = dict(kbv_native.l2_persisting_state(stream))
    _clean_l2.update(limit_bytes=state["limit_bytes"], window_bytes=state["window_bytes"])


def l2_changes(device: torch.device) -> dict[str, Any]:
    """The persisting-L2 limit and the current stream's window when either differs from the
    clean reading (record_clean_l2), after resetting them; {} when untouched or not CUDA."""
    if device.type != "cuda" or not hasattr(kbv_native, "l2_persisting_state"):
        return {}
    stream = torch.cuda.current_stream(device).cuda_stream
    state = dict(kbv_native.l2_persisting_state(stream))
    clean_limit = _clean_l2.get("limit_bytes", 0)
    clean_window = _clean_l2.get("window_bytes", 0)
    if state["limit_bytes"] == clean_limit and state["window_bytes"] == clean_window:
        return {}
    kbv_native.reset_l2_persisting(stream)
    return {
        "limit_bytes": state["limit_bytes"],
        "clean_limit_bytes": clean_limit,
        "window_bytes": state["window_bytes"],
        "window_hit_property": state["window_hit_property"],
    }
