"""Unit tests of the candidate worker's dynamic guards (python/kbv/guards.py), in-process:
harness snapshot, the after-return watch, the operator trace and extension call counting."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch

NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(Path(__file__).resolve().parents[2] / "build"))


@pytest.fixture(scope="module")
def guards():
    sys.path.insert(0, NATIVE_DIR)
    try:
        importlib.import_module("kbv_native")
    except ImportError as error:
        pytest.skip(f"kbv_native cannot be imported from {NATIVE_DIR}: {error}")
    from kbv import guards

    return guards


def test_snapshot_reports_and_restores_a_patched_clock(guards):
    snapshot = guards.HarnessSnapshot()
    original = time.perf_counter
    time.perf_counter = lambda: 0.0
    try:
        assert snapshot.check() == ["time.perf_counter"]
        assert time.perf_counter is original
        assert snapshot.check() == []
    finally:
        time.perf_counter = original


def test_snapshot_sees_replaced_harness_function_and_module(guards):
    import kbv.timing

    snapshot = guards.HarnessSnapshot()
    original = kbv.timing.time_calls
    kbv.timing.time_calls = lambda *a: None
    sys.modules["kbv.timing"] = types.ModuleType("kbv.timing")
    try:
        changed = snapshot.check()
        assert "kbv.timing.time_calls" in changed
        assert "sys.modules['kbv.timing']" in changed
        assert kbv.timing.time_calls is original
        assert sys.modules["kbv.timing"] is kbv.timing
    finally:
        kbv.timing.time_calls = original
        sys.modules["kbv.timing"] = kbv.timing


def _watch(guards, call):
    return guards.guarded_call(call, lambda r: [r], lambda: None)[3]


def test_watch_flags_output_finished_by_a_thread(guards):
    x = torch.randn(64)

    def forward():
        out = torch.empty_like(x)
        out.zero_()

        def work():
            time.sleep(0.03)
            torch.clamp(x, min=0, out=out)

        threading.Thread(target=work, name="late").start()
        return out

    report = _watch(guards, forward)
    assert report["threads_left_running"] == ["late"]
    assert report["outputs_changed_after_return"] == [0]


def test_watch_is_quiet_for_an_honest_pool(guards):
    from concurrent.futures import ThreadPoolExecutor

    x = torch.randn(64)

    def forward():
        with ThreadPoolExecutor(2) as pool:
            return pool.submit(torch.relu, x).result()

    report = _watch(guards, forward)
    assert report["threads_left_running"] == []
    assert report["outputs_changed_after_return"] == []


def test_trace_records_aten_ops_and_extension_calls(guards):
    calls = guards.ExtensionCalls()
    module = types.ModuleType("fake_ext")
    module.kernel = lambda a: a + 1
    calls.wrap(module)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    trace = guards.trace_forward(lambda: module.kernel(a @ b), calls)
    assert "aten::mm" in trace["ops"]
    assert trace["extension_calls"] == {"fake_ext.kernel": 1}
    assert trace["extension_functions"] == ["fake_ext.kernel"]


def test_failed_extension_call_is_not_counted(guards):
    calls = guards.ExtensionCalls()
    module = types.ModuleType("fake_ext2")

    def broken(x):
        raise RuntimeError("block too large")

    module.kernel = broken
    calls.wrap(module)
    with pytest.raises(RuntimeError):
        module.kernel(1)
    assert calls.total() == 0
