"""Timing and memory of one module's forward, through the native extension (timing loops and
counters live in C++; this file only wires PyTorch objects to them).

The orchestrator asks each worker for rounds of samples in turn (reference, candidate,
reference; src/eval/measurement.cpp decides how many), so drift cancels and neither process
ever runs the other's code. Per worker request this module gives:

- `time_calls`: the headline samples (cold L2, launch latency hidden behind a blocking kernel),
  each sample bracketed by NVML reads of the SM clock and the clocks-event reasons; samples under
  thermal or hardware slowdown are discarded and retaken (bounded), power-capped ones kept and
  counted. The first round also warms up until successive batch medians agree (steady clocks).
- `secondary_times`: host-inclusive time (what KernelBench reports) and hot back-to-back time.
- `kernel_audit`: CUPTI kernel records of a few calls: the span of the kernels against the
  call's event time.
- `peak_memory`: one warm forward call under the CUPTI memory tracer (fallback: torch's
  allocator and cudaMemGetInfo, marked partial), plus what the process's first call cost.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import kbv_native  # noqa: E402  (imported after torch: it shares torch's CUDA runtime)
import torch

# NVML clocks-event reasons (nvml.h): a sample under one of these is discarded and retaken.
SLOWDOWN_MASK = 0x8 | 0x20 | 0x40 | 0x80  # hw_slowdown, sw_thermal, hw_thermal, hw_power_brake
POWER_CAP_MASK = 0x4  # sw_power_cap: the normal state of sustained heavy work; kept, counted

STEADY_TOLERANCE = 0.02  # successive warm-up batch medians within 2%
STEADY_BATCH = 5
STEADY_MAX_BATCHES = 10
STEADY_MAX_SECONDS = 3.0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _reason_names(mask: int) -> list[str]:
    return list(kbv_native._decode_throttle_reasons(mask)) if mask > 0 else []


class ClockProbe:
    """NVML's SM clock and clocks-event reasons for one device; `ok` False (with `why`) when
    NVML is not there."""

    def __init__(self, device: torch.device) -> None:
        self.index = _device_index(device)
        self.ok = False
        self.why = ""
        try:
            kbv_native.nvml_clocks(self.index)
            self.ok = True
        except (RuntimeError, AttributeError) as error:
            self.why = str(error)

    def read(self) -> tuple[int, int]:
        try:
            return tuple(kbv_native.nvml_clocks(self.index))  # type: ignore[return-value]
        except RuntimeError:
            return (-1, -1)  # one failed read adds no reason; the sample is kept


def classify_sample(before: tuple[int, int], after: tuple[int, int]) -> tuple[int, int]:
    """The reasons mask and SM clock of one sample from the reads around it: the union of the
    two masks (a query that failed reads -1 and adds nothing), the higher clock."""
    mask = 0
    for _, m in (before, after):
        if m > 0:
            mask |= m
    clock = max(before[0], after[0])
    return mask, clock


class ThrottleTally:
    """What the per-sample NVML reads said, in the form the orchestrator merges."""

    def __init__(self, max_retries: int) -> None:
        self.max_retries = max_retries
        self.clocks: list[int] = []
        self.reasons: Counter[str] = Counter()
        self.discarded_reasons: Counter[str] = Counter()
        self.discarded = 0
        self.power_capped = 0
        self.retries_exhausted = False

    def keep(self, mask: int, clock: int) -> bool:
        """Whether the sample with this mask counts; False: discard it and take another."""
        names = _reason_names(mask)
        if mask & SLOWDOWN_MASK:
            if self.discarded < self.max_retries:
                self.discarded += 1
                self.discarded_reasons.update(names)
                return False
            self.retries_exhausted = True
        if mask & POWER_CAP_MASK:
            self.power_capped += 1
        self.reasons.update(names)
        if clock > 0:
            self.clocks.append(clock)
        return True

    def report(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "kept": len(self.clocks),
            "discarded": self.discarded,
            "power_capped": self.power_capped,
            "reasons": dict(self.reasons),
            "discarded_reasons": dict(self.discarded_reasons),
            "retries_exhausted": self.retries_exhausted,
            "sm_clock_mhz": self.clocks,
        }


def steady_warmup(
    sample: Callable[[int], list[float]],
    tolerance: float = STEADY_TOLERANCE,
    max_batches: int = STEADY_MAX_BATCHES,
    max_seconds: float = STEADY_MAX_SECONDS,
    batch: int = STEADY_BATCH,
) -> dict[str, Any]:
    """Timed batches (thrown away) until two successive batch medians agree within
    `tolerance`, at most `max_batches` or `max_seconds`. `sample(n)` returns n timings."""
    started = time.monotonic()
    medians: list[float] = []
    steady = False
    while len(medians) < max_batches:
        medians.append(statistics.median(sample(batch)))
        if len(medians) >= 2 and medians[-2] > 0:
            steady = abs(medians[-1] - medians[-2]) / medians[-2] <= tolerance
        if steady or time.monotonic() - started >= max_seconds:
            break
    return {
        "batches": len(medians),
        "calls_per_batch": batch,
        "steady": steady,
        "medians_ms": medians,
        "seconds": time.monotonic() - started,
    }


def time_calls(
    call: Callable[[int], Any],
    device: torch.device,
    calls: int,
    warmup: int,
    steady: bool = False,
) -> dict[str, Any]:
    """Per-call times in ms. On CUDA: cold L2, launch latency hidden behind a blocking kernel;
    a forward that synchronises internally defeats the blocker and is re-timed unblocked."""
    with torch.no_grad():
        if device.type != "cuda":
            result: dict[str, Any] = {}
            if steady:
                kbv_native.time_cpu(call, 0, warmup)
                result["warmup"] = steady_warmup(lambda n: kbv_native.time_cpu(call, n, 0))
                warmup = 0
            result["samples_ms"] = kbv_native.time_cpu(call, calls, warmup)
            result["method"] = "cpu_steady_clock"
            result["throttle"] = {"status": "not_applicable"}
            return result
        return _time_cuda(call, device, calls, warmup, steady)


_synchronizes = False


def _time_cuda(call, device, calls, warmup, steady) -> dict[str, Any]:
    stream = torch.cuda.current_stream(device).cuda_stream
    counter = [0]

    def next_call(_: int) -> Any:
        counter[0] += 1
        return call(counter[0] - 1)

    def timed(n: int, block: bool) -> dict[str, Any]:
        return dict(kbv_native.time_cuda(next_call, n, 0, stream, True, block))

    if warmup:
        kbv_native.time_cuda(next_call, 0, warmup, stream, True, True)
    global _synchronizes
    result: dict[str, Any] = {}
    # A forward that synchronised once in this worker is timed unblocked from then on: every
    # blocked sample of it would wait out the blocker's timeout.
    block = not _synchronizes
    if steady:

        def warm_batch(n: int) -> list[float]:
            nonlocal block
            r = timed(n, block)
            if r["block_timeouts"] and block:
                block = False  # synchronises internally: warm up (and time) unblocked
                r = timed(n, block)
            return r["samples_ms"]

        result["warmup"] = steady_warmup(warm_batch)
    probe = ClockProbe(device)
    if not probe.ok:
        r = timed(calls, block)
        if r["block_timeouts"] and block:
            block = False
            r = timed(calls, False)
        result.update(r)
        result["throttle"] = {"status": "unavailable", "why": probe.why}
    else:
        tally = ThrottleTally(max_retries=max(3, calls))
        samples: list[float] = []
        while len(samples) < calls:
            before = probe.read()
            r = timed(1, block)
            after = probe.read()
            if r["block_timeouts"] and block:
                # Synchronises internally: every blocked sample would wait out the timeout.
                block = False
                samples.clear()
                tally = ThrottleTally(max_retries=max(3, calls))
                continue
            mask, clock = classify_sample(before, after)
            if tally.keep(mask, clock):
                samples.append(r["samples_ms"][0])
        result["samples_ms"] = samples
        result["block_timeouts"] = 0 if block else 1
        result["throttle"] = tally.report()
    _synchronizes = _synchronizes or not block
    if block:
        result["method"] = "cuda_events_blocked_cold_l2"
    else:
        result["method"] = "cuda_events_unblocked_cold_l2"
        result["synchronizes_internally"] = True
    return result


def secondary_times(call: Callable[[int], Any], device: torch.device, calls: int) -> dict[str, Any]:
    """The figures beside the headline. host_inclusive: the host's wall time of one call plus
    the synchronisation after it (KernelBench's figure includes launch cost this way), warm L2.
    hot: calls launched back to back with no flush and no blocker, events around a batch, the
    batch's time over its length (steady-state throughput, warm caches)."""
    with torch.no_grad():
        host: list[float] = []
        for k in range(calls):
            synchronize(device)
            started = time.perf_counter()
            out = call(k)
            synchronize(device)
            host.append((time.perf_counter() - started) * 1e3)
            del out
        estimate = max(statistics.median(host), 1e-3) if host else 1.0
        batch = int(min(100, max(3, 2.0 / estimate)))  # about 2 ms a batch
        hot: list[float] = []
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for k in range(calls):
                synchronize(device)
                start.record()
                for b in range(batch):
                    call(k * batch + b)
                end.record()
                end.synchronize()
                hot.append(start.elapsed_time(end) / batch)
            hot_method = "cuda_events_back_to_back_warm_l2"
        else:
            for k in range(calls):
                started = time.perf_counter()
                for b in range(batch):
                    call(k * batch + b)
                hot.append((time.perf_counter() - started) * 1e3 / batch)
            hot_method = "cpu_back_to_back"
        return {
            "host_inclusive_ms": host,
            "host_inclusive_method": "host_wall_call_plus_synchronize",
            "hot_ms": hot,
            "hot_method": hot_method,
            "hot_batch": batch,
        }


_cupti_warmed = False


def _warm_tracer(device: torch.device) -> None:
    """CUPTI's first trace initialises it (and it allocates its own buffers at the first kernel
    seen): one trace around a tiny kernel, once per process."""
    global _cupti_warmed
    if _cupti_warmed:
        return
    _cupti_warmed = True
    with kbv_native.MemoryTrace(_device_index(device)):
        torch.zeros(1, device=device).add_(1)
        synchronize(device)


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
    with torch.no_grad():
        _warm_tracer(device)
        for k in range(calls):
            with kbv_native.MemoryTrace(_device_index(device)) as trace:
                r = kbv_native.time_cuda(lambda _i, k=k: call(k), 1, 0, stream, True, False)
                torch.cuda.synchronize(device)
            if not trace.available:
                return {"available": False, "why": trace.why_unavailable}
            summary = trace.summary()
            event_ms.append(r["samples_ms"][0])
            span_ms.append(summary["kernel_span_ns"] / 1e6)
            kernels.append(summary["kernels"])
    ratio = statistics.median(span_ms) / statistics.median(event_ms) if event_ms else None
    return {
        "available": True,
        "event_ms": event_ms,
        "kernel_span_ms": span_ms,
        "kernels": kernels,
        "span_over_event": ratio,
        "method": "cupti_concurrent_kernel_records",
    }


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


# -- memory ------------------------------------------------------------------------------------
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
    _warm_tracer(device)
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    allocated_before = torch.cuda.memory_allocated(device)
    with kbv_native.MemoryTrace(_device_index(device)) as trace:
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
