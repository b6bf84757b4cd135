"""The worker's memory figures (python/kbv/memory.py) without a GPU: memory sources, the CPU
peak, and the first-call record that only CUDA keeps."""

from __future__ import annotations

import torch
from conftest import import_native_or_skip_module  # noqa: E402

import_native_or_skip_module()

from kbv import memory  # noqa: E402

CPU = torch.device("cpu")


def test_memory_sources_group_into_the_issues_three():
    assert memory.source_group("torch") == "torch"
    for lib in ("cublas", "cudnn", "cufft"):
        assert memory.source_group(lib) == "cublas_cudnn"
    assert memory.source_group("ext:kbv_relu_ext.so") == "candidate_extension"
    for other in ("cudart", "driver", "other:python3.12", "kind:device"):
        assert memory.source_group(other) == "other"


def test_cpu_peak_memory_sees_a_planted_allocation_and_is_not_partial():
    def call():
        scratch = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB
        return float(scratch.sum())

    result = memory.peak_memory(call, CPU)
    assert result["partial"] is False
    assert result["peak_bytes"] >= 48 * 1024 * 1024
    assert result["method"].startswith("process_peak_rss")


def test_first_call_is_only_recorded_on_cuda():
    assert memory.observe_first_call(lambda: 7, CPU) == 7
    assert memory.first_call_record() is None
