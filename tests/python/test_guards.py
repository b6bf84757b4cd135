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


# Bindings of kbv modules the old hand-written list left out (kbv.numerics, kbv.loading, names
# imported into a module, module references, constants, methods), and the split measurement
# modules. Each is (module, owner path inside it, attribute).
UNLISTED = [
    ("kbv.numerics", "", "snapshot"),  # called by the candidate worker after every call
    ("kbv.numerics", "", "changes"),
    ("kbv.numerics", "", "restore"),
    ("kbv.loading", "", "construct"),
    ("kbv.candidate", "", "construct"),  # the name candidate.py imported and calls
    ("kbv.timing", "", "kbv_native"),  # a module reference: a fake timer behind it
    ("kbv.timing", "", "SLOWDOWN_MASK"),  # a constant: no sample ever discarded
    ("kbv.timing", "ThrottleTally", "keep"),
    ("kbv.kernel_audit", "", "kernel_audit"),
    ("kbv.memory", "", "peak_memory"),
    ("kbv.memory", "", "warm_tracer"),
    ("kbv.devices", "", "synchronize"),
    ("kbv.guards", "", "WAIT_AFTER_RETURN_S"),
    ("kbv", "", "numerics"),  # the package's attribute: `import kbv.numerics` reads it
]


@pytest.mark.parametrize("module_name, owner_path, attr", UNLISTED)
def test_snapshot_sees_every_kbv_binding_replaced(guards, module_name, owner_path, attr):
    import kbv.candidate  # noqa: F401 - loads every module the candidate worker has loaded

    owner = importlib.import_module(module_name)
    if owner_path:
        owner = getattr(owner, owner_path)
    label = ".".join(p for p in (module_name, owner_path, attr) if p)
    original = vars(owner)[attr]
    snapshot = guards.HarnessSnapshot()
    setattr(owner, attr, lambda *a, **k: {})
    try:
        assert snapshot.check() == [label]
        assert vars(owner)[attr] is original  # put back
        assert snapshot.check() == []
    finally:
        setattr(owner, attr, original)


def test_snapshot_sees_a_swapped_code_object(guards):
    """A function's body replaced in place keeps its identity (T4 code object: the zoo's
    t4_code_object_swap.py): the code, defaults and closure are part of the snapshot."""
    import kbv.timing

    snapshot = guards.HarnessSnapshot()
    target = kbv.timing.time_calls
    code, defaults = target.__code__, target.__defaults__

    def fake(call, device, calls, warmup, steady=False):
        return {"samples_ms": [0.0] * calls}

    target.__code__ = fake.__code__
    target.__defaults__ = (True,)
    try:
        changed = snapshot.check()
        assert "kbv.timing.time_calls.__code__" in changed, changed
        assert "kbv.timing.time_calls.__defaults__" in changed, changed
        assert target.__code__ is code and target.__defaults__ is defaults
        assert snapshot.check() == []
    finally:
        target.__code__, target.__defaults__ = code, defaults


def test_snapshot_sees_the_channels_serializer_replaced(guards):
    """What the worker's answers go through: json.dumps (rewriting every answer after kbv
    composed it) and os.write."""
    import json

    import kbv.channel  # noqa: F401

    snapshot = guards.HarnessSnapshot()
    dumps, write = json.dumps, os.write
    json.dumps = lambda *a, **k: "{}"
    os.write = lambda fd, data: len(data)
    try:
        changed = snapshot.check()
        assert "json.dumps" in changed and "os.write" in changed, changed
        assert json.dumps is dumps and os.write is write
    finally:
        json.dumps, os.write = dumps, write


def test_snapshot_is_quiet_when_nothing_is_touched(guards):
    import kbv.candidate  # noqa: F401

    snapshot = guards.HarnessSnapshot()
    assert snapshot.check() == []
    assert snapshot.check() == []


def test_snapshot_is_quiet_for_reading_kbv_and_for_the_harness_itself(guards):
    """Reading kbv modules, importing them again, calling their functions and the harness's
    own measuring (which updates its module state: first-call record, CUPTI warm-up flag) is
    not tampering."""
    import kbv.candidate  # noqa: F401

    snapshot = guards.HarnessSnapshot()
    import kbv
    import kbv.numerics
    from kbv import devices, kernel_audit, memory, numerics, timing

    importlib.import_module("kbv.hosting")
    flags = kbv.numerics.snapshot()
    assert numerics.changes(flags, numerics.snapshot()) == {}
    assert isinstance(kbv.__version__, str) and callable(timing.time_calls)
    cpu = torch.device("cpu")
    x = torch.randn(32, 32)
    timing.time_calls(lambda i: x @ x, cpu, 3, 1, steady=True)
    timing.secondary_times(lambda i: x @ x, cpu, 2)
    kernel_audit.kernel_audit(lambda i: x @ x, cpu, 2)
    memory.peak_memory(lambda: x @ x, cpu)
    memory.observe_first_call(lambda: x @ x, cpu)
    memory.state_bytes(torch.nn.Linear(4, 4))
    devices.synchronize(cpu)
    assert snapshot.check() == []


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


def test_watch_flags_a_copy_written_after_return(guards):
    """A thread that writes what it computed after the return into both the returned tensor
    and the harness's copy of it (the zoo's e1_poison_output_slot.py): the outputs still agree,
    the copy is not what it was at return."""
    x = torch.randn(4096)
    copies: list[torch.Tensor] = []

    def snapshot(outputs):
        copies[:] = [o.detach().clone() for o in outputs]
        return list(copies)

    def forward():
        out = torch.full_like(x, float("nan"))

        def work():
            time.sleep(0.01)
            result = torch.relu(x)
            for c in copies:
                c.copy_(result)
            out.copy_(result)

        threading.Thread(target=work, name="late-writer").start()
        return out

    report = guards.guarded_call(forward, lambda r: [r], lambda: None, snapshot)[3]
    assert report["copies_rewritten_after_return"] == [0]
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


def test_trace_counts_triton_launches_not_warmups(guards, monkeypatch):
    """Triton kernels never reach the dispatcher: their launches are counted by wrapping
    `triton.runtime.jit.JITFunction.run` for the traced call (a stand-in module here; kbv never
    imports Triton itself), and the original is put back afterwards."""

    class JITFunction:
        def __init__(self):
            self.launched = 0

        def run(self, *args, grid, warmup, **kwargs):
            self.launched += 1
            return "ran"

        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    jit = types.ModuleType("triton.runtime.jit")
    jit.JITFunction = JITFunction
    monkeypatch.setitem(sys.modules, "triton.runtime.jit", jit)
    original = JITFunction.run
    kernel = JITFunction()

    def forward():
        kernel[(4,)](1, 2)  # a launch, through __getitem__ as `kernel[grid](...)` does
        kernel.run(1, grid=(1,), warmup=True)  # a warm-up compiles, launches nothing
        kernel.run(1, grid=(1,), warmup=False)
        return torch.ones(2)

    trace = guards.trace_forward(forward, None)
    assert trace["jit_launches"] == 2
    assert kernel.launched == 3  # the wrapped calls still ran
    assert JITFunction.run is original


def test_trace_without_triton_counts_no_launches(guards, monkeypatch):
    monkeypatch.delitem(sys.modules, "triton.runtime.jit", raising=False)
    assert guards.trace_forward(lambda: torch.ones(2) * 2, None)["jit_launches"] == 0


# -- end to end: a candidate file evaluated by `kbv eval` on the CPU --------------------------
RELU_CANDIDATE = Path(__file__).resolve().parents[2] / "examples/candidates/cpu/level1/3_ReLU.py"
RELU_PROBLEM = Path(__file__).resolve().parents[2] / "problems/level1/3_ReLU.py"


def _relu_candidate(tmp_path: Path, preamble: str) -> Path:
    """The honest CPU ReLU candidate with `preamble` run at its import."""
    path = tmp_path / "candidate.py"
    path.write_text(preamble + "\n" + RELU_CANDIDATE.read_text())
    return path


@pytest.mark.e2e
def test_candidate_replacing_numerics_snapshot_is_rejected(tmp_path, run_eval):
    # Hides a lowered precision flag from the worker's check after every call.
    preamble = (
        "import sys\n"
        "_numerics = sys.modules.get('kbv.numerics')\n"
        "if _numerics is not None:\n"
        "    _baseline = _numerics.snapshot()\n"
        "    _numerics.snapshot = lambda: dict(_baseline)\n"
    )
    evaluation = run_eval(RELU_PROBLEM, _relu_candidate(tmp_path, preamble))
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert result["verdict"] == "rejected", (result["reason"], result["flags"])
    assert "harness_tampered" in evaluation.flag_ids("reject"), result["flags"]
    detail = next(f["detail"] for f in result["flags"] if f["id"] == "harness_tampered")
    assert "kbv.numerics.snapshot" in detail


@pytest.mark.e2e
def test_candidate_reading_kbv_modules_is_not_flagged(tmp_path, run_eval):
    # Imports kbv modules (kbv.reference and kbv.scan are not loaded in the candidate's worker
    # until this import), reads them and calls a pure one; replaces nothing.
    preamble = (
        "import kbv\n"
        "import kbv.numerics\n"
        "import kbv.reference\n"
        "from kbv import scan, timing\n"
        "_flags = kbv.numerics.snapshot()\n"
        "_names = sorted(vars(timing)) + sorted(scan.FINDINGS) + [kbv.__version__]\n"
    )
    evaluation = run_eval(RELU_PROBLEM, _relu_candidate(tmp_path, preamble))
    assert evaluation.returncode == 0, evaluation.stderr
    result = evaluation.result
    assert "harness_tampered" not in evaluation.flag_ids(), result["flags"]
    assert result["verdict"] == "correct", (result["reason"], result["flags"])
