"""Timing and memory of one module's forward, through the native extension (timing loops and
counters live in C++; this file only wires PyTorch objects to them).

The orchestrator asks each worker for rounds of samples in turn (reference, candidate,
reference), so drift cancels and neither process ever runs the other's code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kbv_native  # noqa: E402  (imported after torch: it shares torch's CUDA runtime)
import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(
    call: Callable[[int], Any], device: torch.device, calls: int, warmup: int
) -> dict[str, Any]:
    """Per-call times in ms. On CUDA: cold L2, launch latency hidden behind a blocking kernel;
    a forward that synchronises internally defeats the blocker and is re-timed unblocked."""
    with torch.no_grad():
        if device.type != "cuda":
            return {
                "samples_ms": kbv_native.time_cpu(call, calls, warmup),
                "method": "cpu_steady_clock",
            }
        stream = torch.cuda.current_stream(device).cuda_stream
        result = dict(kbv_native.time_cuda(call, calls, warmup, stream, True, True))
        result["method"] = "cuda_events_blocked_cold_l2"
        if result["block_timeouts"]:
            result = dict(kbv_native.time_cuda(call, calls, warmup, stream, True, False))
            result["method"] = "cuda_events_unblocked_cold_l2"
            result["synchronizes_internally"] = True
        return result


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


def peak_memory(call: Callable[[], Any], device: torch.device) -> dict[str, Any]:
    """Peak memory of one forward call, above what was allocated before it.

    CUDA: PyTorch's allocator peak plus any growth of driver-level usage (library workspaces,
    raw cudaMalloc that stays allocated). CPU: the process's peak resident set during the call.
    """
    with torch.no_grad():
        if device.type == "cuda":
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            allocated_before = torch.cuda.memory_allocated(device)
            reserved_before = torch.cuda.memory_reserved(device)
            free_before, _ = kbv_native.cuda_mem_get_info()
            output = call()
            synchronize(device)
            allocator_peak = torch.cuda.max_memory_allocated(device) - allocated_before
            free_after, _ = kbv_native.cuda_mem_get_info()
            del output
            reserved = torch.cuda.memory_reserved(device)
            # Device memory that left the driver's free pool but not into PyTorch's cache:
            # library workspaces, raw cudaMalloc kept by the candidate, local-memory growth.
            driver_growth = max(0, (free_before - free_after) - (reserved - reserved_before))
            return {
                "peak_bytes": allocator_peak + driver_growth,
                "allocator_peak_bytes": allocator_peak,
                "driver_growth_bytes": driver_growth,
                "reserved_bytes": reserved,
                "method": "torch_allocator_peak+driver_mem_info",
            }
        with kbv_native.PeakRss() as rss:
            output = call()
        del output
        return {
            "peak_bytes": max(0, rss.peak_bytes - rss.baseline_bytes),
            "method": f"process_peak_rss({rss.method})",
        }
