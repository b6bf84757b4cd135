"""Tests of kbv_native, the extension the worker uses for timing and memory probes.

The module is looked up in $KBV_NATIVE_DIR (default: <repo>/build). The CPU API is tested
everywhere; the CUDA timing path is tested only where a GPU is visible, and on a machine without one
time_cuda must fail cleanly with RuntimeError.
"""

import importlib
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch  # before kbv_native: the module must share torch's CUDA runtime

NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(Path(__file__).resolve().parents[2] / "build"))
MIB = 1 << 20


def _import_native():
    sys.path.insert(0, NATIVE_DIR)
    try:
        return importlib.import_module("kbv_native")
    except ImportError as error:
        pytest.skip(
            f"kbv_native cannot be imported from KBV_NATIVE_DIR={NATIVE_DIR} ({error}); build it "
            "with `cmake --build <build dir> --target kbv_native` and point KBV_NATIVE_DIR at the "
            "build directory",
            allow_module_level=True,
        )
    finally:
        sys.path.remove(NATIVE_DIR)


kn = _import_native()

GPU = bool(kn.has_cuda) and torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs kbv_native built with CUDA and a visible GPU")


def _touch_bytes(nbytes):
    """Allocate nbytes and write every page, so the allocation is resident."""
    return np.ones(nbytes // 8, dtype=np.float64)


# ---- time_cpu ------------------------------------------------------------------------------


def test_has_cuda_is_bool():
    assert isinstance(kn.has_cuda, bool)


def test_time_cpu_calls_warmup_first_then_timed_calls_with_continuing_index():
    seen = []
    samples = kn.time_cpu(seen.append, 5, 3)
    assert seen == list(range(8))
    assert len(samples) == 5
    assert all(isinstance(s, float) and s > 0.0 for s in samples)


def test_time_cpu_without_warmup_and_without_calls():
    seen = []
    assert len(kn.time_cpu(seen.append, 4, 0)) == 4
    assert seen == [0, 1, 2, 3]
    seen.clear()
    assert kn.time_cpu(seen.append, 0, 2) == []
    assert seen == [0, 1]


def test_time_cpu_measures_milliseconds():
    samples = kn.time_cpu(lambda i: time.sleep(0.005), 3, 1)
    assert all(4.5 <= s < 1000.0 for s in samples)


def test_time_cpu_rejects_negative_counts():
    with pytest.raises(ValueError):
        kn.time_cpu(lambda i: None, -1, 0)
    with pytest.raises(ValueError):
        kn.time_cpu(lambda i: None, 1, -1)


@pytest.mark.parametrize("failing_index", [1, 4])  # in the warm-up, in the timed calls
def test_time_cpu_propagates_exceptions_from_fn(failing_index):
    seen = []

    def fn(i):
        seen.append(i)
        if i == failing_index:
            raise KeyError(f"boom at {i}")

    with pytest.raises(KeyError, match=f"boom at {failing_index}"):
        kn.time_cpu(fn, 5, 2)
    assert seen == list(range(failing_index + 1))


def test_time_cpu_rejects_non_callable():
    with pytest.raises(TypeError):
        kn.time_cpu(42, 1, 0)


# ---- rss_bytes and PeakRss ---------------------------------------------------------------------


def test_rss_bytes_is_plausible_and_follows_allocations():
    rss = kn.rss_bytes()
    assert 1 * MIB < rss < os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    buffer = _touch_bytes(100 * MIB)
    assert kn.rss_bytes() - rss >= 90 * MIB
    del buffer


@pytest.mark.parametrize("use_hwm", [True, False])
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_peak_rss_sees_an_allocation_made_inside_the_block(use_hwm, library):
    with kn.PeakRss(use_hwm=use_hwm) as peak:
        if library == "numpy":
            buffer = _touch_bytes(200 * MIB)
        else:
            buffer = torch.ones(200 * MIB // 4, dtype=torch.float32)
        del buffer  # freed before the block ends: only the peak can see it
    assert peak.peak_bytes - peak.baseline_bytes >= 180 * MIB
    if use_hwm:
        assert peak.method in ("vmhwm+sampling", "sampling")
    else:
        assert peak.method == "sampling"


@pytest.mark.parametrize("use_hwm", [True, False])
def test_peak_rss_ignores_an_allocation_made_before_the_block(use_hwm):
    buffer = _touch_bytes(200 * MIB)
    with kn.PeakRss(use_hwm=use_hwm) as peak:
        buffer[::4096] += 1.0  # use it, without growing
    assert peak.peak_bytes - peak.baseline_bytes < 50 * MIB
    with kn.PeakRss(use_hwm=use_hwm) as peak:
        del buffer  # freeing it inside the block does not count either
    assert peak.peak_bytes - peak.baseline_bytes < 50 * MIB


def test_peak_rss_is_reusable_and_not_reentrant():
    peak = kn.PeakRss()
    with peak as entered:
        assert entered is peak
        with pytest.raises(RuntimeError):
            peak.__enter__()
    first = peak.peak_bytes
    with peak:
        pass
    assert peak.peak_bytes >= peak.baseline_bytes > 0
    assert first > 0


def test_peak_rss_lets_exceptions_through():
    peak = kn.PeakRss()
    with pytest.raises(ZeroDivisionError):
        with peak:
            _ = 1 / 0
    assert peak.peak_bytes >= peak.baseline_bytes


# ---- CUDA ----------------------------------------------------------------------------------


@pytest.mark.skipif(GPU, reason="a GPU is visible; the GPU tests cover time_cuda")
def test_time_cuda_without_gpu_raises_runtime_error():
    with pytest.raises(RuntimeError) as error:
        kn.time_cuda(lambda i: None, 2, 1, 0)
    if not kn.has_cuda:
        assert "built without CUDA" in str(error.value)
    with pytest.raises(RuntimeError):
        kn.cuda_mem_get_info()
    kn.release_scratch()  # nothing to free; must not fail


@needs_gpu
def test_cuda_mem_get_info():
    free, total = kn.cuda_mem_get_info()
    assert 0 < free <= total


@needs_gpu
def test_time_cuda_samples_indices_and_flush():
    a = torch.randn(1024, 1024, device="cuda")
    seen = []

    def fn(i):
        seen.append(i)
        return a @ a

    stream = torch.cuda.current_stream()
    result = kn.time_cuda(fn, 10, 3, stream.cuda_stream)
    assert seen == list(range(13))
    assert len(result["samples_ms"]) == 10
    assert all(0.0 < s < 1000.0 for s in result["samples_ms"])
    assert result["block_timeouts"] == 0
    assert result["sample_block_timeout"] == [False] * 10
    assert result["stopped_early"] is False
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    assert result["l2_bytes"] == l2
    assert result["flush_bytes"] == 2 * l2
    unflushed = kn.time_cuda(fn, 2, 0, stream.cuda_stream, flush_l2=False, block=False)
    assert unflushed["flush_bytes"] == 0 and len(unflushed["samples_ms"]) == 2


@needs_gpu
def test_time_cuda_on_a_side_stream():
    a = torch.randn(512, 512, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        result = kn.time_cuda(lambda i: a @ a, 5, 1, side.cuda_stream)
    assert len(result["samples_ms"]) == 5 and result["block_timeouts"] == 0


@needs_gpu
def test_blocker_hides_launch_latency():
    x = torch.randn(1024, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    # No flush: the flush memset ahead of an unblocked call would itself hide part of the latency.
    blocked = kn.time_cuda(lambda i: x.add(1.0), 30, 3, stream, flush_l2=False)["samples_ms"]
    unblocked = kn.time_cuda(lambda i: x.add(1.0), 30, 3, stream, flush_l2=False, block=False)[
        "samples_ms"
    ]
    assert statistics.median(blocked) < statistics.median(unblocked)


@needs_gpu
def test_time_cuda_reports_a_blocker_timeout_when_fn_synchronises():
    a = torch.randn(256, 256, device="cuda")

    def fn(i):
        out = a @ a
        torch.cuda.synchronize()  # waits for the blocker, which can only time out
        return out

    stream = torch.cuda.current_stream().cuda_stream
    result = kn.time_cuda(fn, 3, 1, stream, block_timeout_ms=50.0)
    assert result["block_timeouts"] == 1
    assert result["sample_block_timeout"] == [True]
    assert result["stopped_early"] is True
    every = kn.time_cuda(fn, 2, 0, stream, block_timeout_ms=50.0, stop_on_block_timeout=False)
    assert every["block_timeouts"] == 2 and len(every["samples_ms"]) == 2
    unblocked = kn.time_cuda(fn, 3, 0, stream, block=False)
    assert unblocked["block_timeouts"] == 0 and len(unblocked["samples_ms"]) == 3


@needs_gpu
def test_time_cuda_propagates_exceptions_and_releases_the_stream():
    a = torch.randn(256, 256, device="cuda")

    def fn(i):
        if i == 2:
            raise KeyError("boom")
        return a @ a

    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(KeyError, match="boom"):
        kn.time_cuda(fn, 5, 1, stream, block_timeout_ms=60000.0)
    start = time.monotonic()
    torch.cuda.synchronize()  # the abandoned blocker was released, not left to time out
    assert time.monotonic() - start < 5.0
    assert len(kn.time_cuda(lambda i: a @ a, 3, 1, stream)["samples_ms"]) == 3


@needs_gpu
def test_time_cuda_is_not_reentrant_and_scratch_can_be_released():
    stream = torch.cuda.current_stream().cuda_stream

    def fn(i):
        kn.time_cuda(lambda j: None, 1, 0, stream)

    with pytest.raises(RuntimeError, match="while time_cuda is running"):
        kn.time_cuda(fn, 1, 0, stream)
    kn.release_scratch()
    result = kn.time_cuda(lambda i: torch.ones(8, device="cuda"), 2, 1, stream)
    assert len(result["samples_ms"]) == 2
    kn.release_scratch()
