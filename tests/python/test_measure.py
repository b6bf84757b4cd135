"""The worker's measurement pieces that run without a GPU: per-sample throttle classification,
steady-clock warm-up, CPU timing with the new fields, secondary figures, memory sources, and the
CUDA-only paths answering cleanly on a machine without one."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(Path(__file__).resolve().parents[2] / "build"))
sys.path.insert(0, NATIVE_DIR)
try:
    importlib.import_module("kbv_native")
except ImportError as error:  # pragma: no cover - depends on the build
    pytest.skip(f"kbv_native not importable from {NATIVE_DIR}: {error}", allow_module_level=True)

from kbv import measure  # noqa: E402

CPU = torch.device("cpu")
HW_SLOWDOWN, SW_POWER_CAP, SW_THERMAL, GPU_IDLE = 0x8, 0x4, 0x20, 0x1


def test_classify_takes_the_union_of_both_reads_and_ignores_failed_queries():
    assert measure.classify_sample((1980, GPU_IDLE), (1755, SW_POWER_CAP)) == (
        GPU_IDLE | SW_POWER_CAP,
        1980,
    )
    assert measure.classify_sample((-1, -1), (1500, HW_SLOWDOWN)) == (HW_SLOWDOWN, 1500)
    assert measure.classify_sample((-1, -1), (-1, -1)) == (0, -1)


def test_slowdown_samples_are_discarded_power_capped_ones_kept_and_counted():
    tally = measure.ThrottleTally(max_retries=2)
    assert tally.keep(0, 1980)
    assert tally.keep(SW_POWER_CAP, 1470)  # the normal state of heavy work: kept
    assert not tally.keep(HW_SLOWDOWN, 1200)
    assert not tally.keep(SW_THERMAL, 1300)
    # Retries exhausted: the sample is kept and the report says so.
    assert tally.keep(HW_SLOWDOWN, 1100)
    report = tally.report()
    assert report["kept"] == 3 and report["discarded"] == 2
    assert report["power_capped"] == 1
    assert report["retries_exhausted"] is True
    assert report["discarded_reasons"] == {"hw_slowdown": 1, "sw_thermal": 1}
    assert report["reasons"] == {"sw_power_cap": 1, "hw_slowdown": 1}
    assert report["sm_clock_mhz"] == [1980, 1470, 1100]


def test_honest_clocks_discard_nothing():
    tally = measure.ThrottleTally(max_retries=5)
    for _ in range(10):
        assert tally.keep(GPU_IDLE, 1980)
    report = tally.report()
    assert report["discarded"] == 0 and report["power_capped"] == 0
    assert not report["retries_exhausted"]


def test_steady_warmup_stops_when_successive_medians_agree():
    medians = iter([5.0, 3.0, 2.0, 2.01, 2.0, 2.0])
    seen = []

    def sample(n):
        seen.append(n)
        return [next(medians)] * n

    info = measure.steady_warmup(sample, batch=4)
    assert info["steady"] is True
    assert info["batches"] == 4  # 5 -> 3 -> 2 -> 2.01: steady at the fourth
    assert info["medians_ms"] == [5.0, 3.0, 2.0, 2.01]
    assert seen == [4, 4, 4, 4]


def test_steady_warmup_is_bounded_when_clocks_never_settle():
    values = iter(range(1, 1000))
    info = measure.steady_warmup(lambda n: [float(next(values))] * n, max_batches=6)
    assert info["steady"] is False and info["batches"] == 6


def test_cpu_time_calls_reports_throttle_not_applicable_and_warmup():
    calls = []
    result = measure.time_calls(lambda i: calls.append(i), CPU, 5, 2, steady=True)
    assert len(result["samples_ms"]) == 5
    assert result["method"] == "cpu_steady_clock"
    assert result["throttle"] == {"status": "not_applicable"}
    assert result["warmup"]["batches"] >= 2
    plain = measure.time_calls(lambda i: None, CPU, 3, 1)
    assert "warmup" not in plain and len(plain["samples_ms"]) == 3


def test_cpu_secondary_figures():
    x = torch.randn(256, 256)
    result = measure.secondary_times(lambda i: x @ x, CPU, 4)
    assert len(result["host_inclusive_ms"]) == 4 and len(result["hot_ms"]) == 4
    assert all(v > 0 for v in result["host_inclusive_ms"] + result["hot_ms"])
    assert result["hot_method"] == "cpu_back_to_back"
    assert 3 <= result["hot_batch"] <= 100


def test_kernel_audit_on_the_cpu_is_unavailable_not_an_error():
    out = measure.kernel_audit(lambda i: None, CPU, 3)
    assert out == {"available": False, "why": "not a CUDA device"}


def test_memory_sources_group_into_the_issues_three():
    assert measure.source_group("torch") == "torch"
    for lib in ("cublas", "cudnn", "cufft"):
        assert measure.source_group(lib) == "cublas_cudnn"
    assert measure.source_group("ext:kbv_relu_ext.so") == "candidate_extension"
    for other in ("cudart", "driver", "other:python3.12", "kind:device"):
        assert measure.source_group(other) == "other"


def test_cpu_peak_memory_sees_a_planted_allocation_and_is_not_partial():
    def call():
        scratch = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB
        return float(scratch.sum())

    result = measure.peak_memory(call, CPU)
    assert result["partial"] is False
    assert result["peak_bytes"] >= 48 * 1024 * 1024
    assert result["method"].startswith("process_peak_rss")


def test_first_call_is_only_recorded_on_cuda():
    assert measure.observe_first_call(lambda: 7, CPU) == 7
    assert measure.first_call_record() is None
