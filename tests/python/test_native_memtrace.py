"""Tests of kbv_native's memory tracer (MemoryTrace), its accounting (_peak_from_events) and the
NVML probe (nvml_sample).

The module is looked up in $KBV_NATIVE_DIR (default: <repo>/build). The accounting is pure C++ and
tested everywhere. MemoryTrace and nvml_sample are tested for their failure modes on any machine
(a build without CUDA raises RuntimeError; a CUDA build without a GPU reports available=False) and
for real figures where a GPU is visible (the allocation paths of docs/measurement.md).
"""

import ctypes
import importlib
import os
import sys
from pathlib import Path

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
            f"kbv_native cannot be imported from KBV_NATIVE_DIR={NATIVE_DIR} ({error})",
            allow_module_level=True,
        )
    finally:
        sys.path.remove(NATIVE_DIR)


kn = _import_native()
if not hasattr(kn, "_peak_from_events"):
    pytest.skip("this kbv_native predates the memory tracer; rebuild it", allow_module_level=True)

GPU = bool(kn.has_cuda) and torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs kbv_native built with CUDA and a visible GPU")


def peak(events):
    return kn._peak_from_events(events)


# ---- the accounting (no CUDA) ---------------------------------------------------------------


def test_empty_event_list_is_all_zero():
    r = peak([])
    assert r["peak_bytes"] == 0
    assert r["allocated_bytes"] == r["freed_bytes"] == r["live_at_exit_bytes"] == 0
    assert r["by_source"] == {}


def test_interleaved_allocations_and_frees():
    r = peak(
        [
            (10, 0xA, 100, "torch"),
            (20, 0xB, 300, "cublas"),
            (30, 0xA, -100, "torch"),
            (40, 0xC, 150, "torch"),  # live: B 300 + C 150 = 450 > 400
            (50, 0xB, -300, "cublas"),
            (60, 0xD, 10, "ext:cand.so"),
        ]
    )
    assert r["peak_bytes"] == 450
    assert r["peak_timestamp_ns"] == 40
    assert r["allocated_bytes"] == 560
    assert r["freed_bytes"] == 400
    assert r["live_at_exit_bytes"] == 160
    assert r["allocations"] == 4 and r["frees"] == 2


def test_events_are_sorted_by_timestamp_whatever_the_input_order():
    ordered = [(1, 0xA, 100, "s"), (2, 0xA, -100, "s"), (3, 0xB, 80, "s")]
    shuffled = [ordered[2], ordered[0], ordered[1]]
    assert peak(shuffled)["peak_bytes"] == peak(ordered)["peak_bytes"] == 100
    assert peak(shuffled)["live_at_exit_bytes"] == 80


def test_free_of_a_block_allocated_before_the_trace_is_ignored():
    r = peak(
        [
            (5, 0x999, -4096, "torch"),  # allocated before the trace
            (6, 0xA, 100, "torch"),
        ]
    )
    assert r["peak_bytes"] == 100
    assert r["freed_bytes"] == 0
    assert r["untracked_frees"] == 1
    assert r["live_at_exit_bytes"] == 100


def test_only_frees_never_go_negative():
    r = peak([(1, 0x1, -100, "a"), (2, 0x2, -200, "b")])
    assert r["peak_bytes"] == 0
    assert r["live_at_exit_bytes"] == 0
    assert r["freed_bytes"] == 0
    assert r["untracked_frees"] == 2


def test_a_release_is_charged_the_size_allocated_not_the_size_it_carries():
    r = peak([(1, 0xA, 100, "a"), (2, 0xA, -1, "a")])
    assert r["freed_bytes"] == 100
    assert r["live_at_exit_bytes"] == 0


def test_equal_timestamps_apply_allocations_before_frees():
    # At one timestamp the free of A and the allocation of B cannot be ordered by the clock; the
    # tracer takes the upper bound (B allocated while A still live).
    events = [(1, 0xA, 100, "s"), (2, 0xA, -100, "s"), (2, 0xB, 100, "s")]
    assert peak(events)["peak_bytes"] == 200
    assert peak(list(reversed(events)))["peak_bytes"] == 200


def test_allocation_and_free_of_one_block_at_one_timestamp_pair_up():
    r = peak([(7, 0xA, -64, "s"), (7, 0xA, 64, "s")])
    assert r["peak_bytes"] == 64
    assert r["freed_bytes"] == 64
    assert r["live_at_exit_bytes"] == 0
    assert r["untracked_frees"] == 0


def test_equal_timestamps_keep_input_order_among_allocations():
    r = peak([(1, 0xA, 10, "first"), (1, 0xB, 20, "second")])
    assert r["peak_bytes"] == 30
    assert r["by_source"] == {"first": 10, "second": 20}


def test_by_source_at_peak_sums_to_peak_and_allocated_sums_to_allocated():
    events = [
        (1, 0x1, 100, "torch"),
        (2, 0x2, 50, "cublas"),
        (3, 0x3, 25, "ext:cand.so"),
        (4, 0x1, -100, "torch"),
        (5, 0x4, 60, "ext:cand.so"),
        (6, 0x2, -50, "cublas"),
    ]
    r = peak(events)
    assert r["peak_bytes"] == 175
    assert r["by_source"] == {"torch": 100, "cublas": 50, "ext:cand.so": 25}
    assert sum(r["by_source"].values()) == r["peak_bytes"]
    assert r["by_source_allocated"] == {"torch": 100, "cublas": 50, "ext:cand.so": 85}
    assert sum(r["by_source_allocated"].values()) == r["allocated_bytes"]
    assert r["by_source_live_at_exit"] == {"ext:cand.so": 85}
    assert sum(r["by_source_live_at_exit"].values()) == r["live_at_exit_bytes"]


def test_a_free_is_charged_to_the_allocating_source():
    r = peak([(1, 0xA, 100, "torch"), (2, 0xA, -100, "cudart"), (3, 0xB, 40, "cublas")])
    assert r["by_source_live_at_exit"] == {"cublas": 40}
    assert r["peak_bytes"] == 100


def test_reallocating_a_live_address_counts_a_missing_release():
    r = peak([(1, 0xA, 100, "s"), (2, 0xA, 30, "s")])
    assert r["duplicate_allocs"] == 1
    assert r["live_at_exit_bytes"] == 30
    assert r["peak_bytes"] == 100


def test_key_spaces_keep_handles_and_addresses_apart():
    # A VMM handle (space 1) that happens to equal a device address (space 0).
    r = peak([(1, 0x10, 100, "torch", 0), (2, 0x10, 200, "vmm", 1), (3, 0x10, -1, "vmm", 1)])
    assert r["duplicate_allocs"] == 0
    assert r["peak_bytes"] == 300
    assert r["live_at_exit_bytes"] == 100


def test_zero_byte_events_are_ignored():
    r = peak([(1, 0xA, 0, "s"), (2, 0xB, 5, "s")])
    assert r["allocations"] == 1
    assert r["peak_bytes"] == 5


def test_malformed_events_raise():
    with pytest.raises(ValueError):
        peak([(1, 0xA, 5)])
    with pytest.raises(ValueError):
        peak([(-1, 0xA, 5, "s")])
    with pytest.raises((TypeError, RuntimeError)):
        peak([("t", 0xA, 5, "s")])


def test_large_sizes_do_not_overflow():
    big = 100 << 30  # 100 GiB
    r = peak([(1, 0xA, big, "s"), (2, 0xB, big, "s"), (3, 0xA, -big, "s")])
    assert r["peak_bytes"] == 2 * big
    assert r["live_at_exit_bytes"] == big


@pytest.mark.parametrize(
    "path, label",
    [
        ("/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so", "torch"),
        ("/venv/site-packages/torch/lib/libtorch_cuda.so", "torch"),
        ("/venv/site-packages/nvidia/cu13/lib/libcublasLt.so.13", "cublas"),
        ("/venv/site-packages/nvidia/cu13/lib/libcublas.so.13", "cublas"),
        ("/venv/site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "cudnn"),
        ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "driver"),
        ("/venv/site-packages/nvidia/cu13/lib/libcudart.so.13", "cudart"),
        ("/root/.triton/cache/abc/cuda_utils.so", "ext:cuda_utils.so"),
        ("/venv/site-packages/triton/_C/libtriton.so", "triton"),
        ("/tmp/torch_extensions/py312_cu130/cand_ext/cand_ext.so", "ext:cand_ext.so"),
        ("/usr/bin/python3.12", "other:python3.12"),
        ("/usr/lib/x86_64-linux-gnu/libffi.so.8", "ctypes"),
        ("/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so", "ctypes"),
        ("", "unknown"),
    ],
)
def test_allocation_sources_are_classified(path, label):
    assert kn._classify_allocation_source(path) == label


def test_throttle_reasons_are_decoded():
    assert kn._decode_throttle_reasons(0) == []
    assert kn._decode_throttle_reasons(0x4) == ["sw_power_cap"]
    assert kn._decode_throttle_reasons(0x1 | 0x8 | 0x20 | 0x40) == [
        "gpu_idle",
        "hw_slowdown",
        "sw_thermal",
        "hw_thermal",
    ]
    assert kn._decode_throttle_reasons(1 << 40) == ["bit_40"]


# ---- MemoryTrace and nvml_sample: failure modes (any machine) --------------------------------


@pytest.mark.skipif(kn.has_cuda, reason="build with CUDA")
def test_without_cuda_the_gpu_apis_raise_runtime_error():
    with pytest.raises(RuntimeError, match="built without CUDA"):
        kn.MemoryTrace(0)
    with pytest.raises(RuntimeError, match="built without CUDA"):
        kn.nvml_sample(0)


@pytest.mark.skipif(
    not kn.has_cuda or torch.cuda.is_available(), reason="needs a CUDA build, no GPU"
)
def test_without_a_gpu_the_trace_is_unavailable_and_the_block_still_runs():
    ran = []
    with kn.MemoryTrace(0) as trace:
        ran.append(True)
    assert ran == [True]
    assert trace.available is False
    assert trace.why_unavailable
    assert trace.valid is False
    assert trace.peak_bytes == 0 and trace.dropped == 0 and trace.records == 0
    summary = trace.summary()
    assert summary["available"] is False
    assert summary["why_unavailable"] == trace.why_unavailable
    assert summary["activities"] == []


@pytest.mark.skipif(
    not kn.has_cuda or torch.cuda.is_available(), reason="needs a CUDA build, no GPU"
)
def test_an_activity_trace_without_a_gpu_is_unavailable_and_empty():
    with kn.MemoryTrace(0, activities=True) as trace:
        pass
    assert trace.available is False
    assert trace.summary()["activities"] == []


@pytest.mark.skipif(not kn.has_cuda, reason="needs a CUDA build")
def test_a_trace_can_be_entered_only_once():
    trace = kn.MemoryTrace(0)
    with trace:
        pass
    with pytest.raises(RuntimeError, match="only once"):
        with trace:
            pass


@pytest.mark.skipif(not kn.has_cuda, reason="needs a CUDA build")
def test_an_exception_in_the_block_propagates():
    with pytest.raises(ZeroDivisionError):
        with kn.MemoryTrace(0):
            raise ZeroDivisionError


@pytest.mark.skipif(not kn.has_cuda, reason="needs a CUDA build")
def test_a_missing_device_is_unavailable_not_an_error():
    with kn.MemoryTrace(1 << 20) as trace:
        pass
    assert trace.available is False
    assert trace.why_unavailable


@pytest.mark.skipif(not kn.has_cuda, reason="needs a CUDA build")
def test_nvml_sample_raises_runtime_error_or_returns_a_sample():
    try:
        sample = kn.nvml_sample(0)
    except RuntimeError as error:
        assert "NVML" in str(error) or "device" in str(error)
        return
    for key in (
        "sm_clock_mhz",
        "mem_clock_mhz",
        "temperature_c",
        "power_w",
        "throttle_reasons",
        "throttle_reason_names",
        "errors",
    ):
        assert key in sample


# ---- MemoryTrace on a GPU -------------------------------------------------------------------


def _cudart():
    for name in ("libcudart.so.13", "libcudart.so"):
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    pytest.skip("libcudart not loadable through ctypes")


def _trace(fn, device=0):
    torch.cuda.synchronize(device)
    with kn.MemoryTrace(device) as trace:
        fn()
        torch.cuda.synchronize(device)
    assert trace.available, trace.why_unavailable
    assert trace.dropped == 0
    assert trace.valid, trace.summary()
    return trace


@pytest.fixture(scope="module")
def gpu():
    if not GPU:
        pytest.skip("needs kbv_native built with CUDA and a visible GPU")
    torch.zeros(1, device="cuda")  # a context, current on this thread
    status = kn._cupti_init()
    if status["error"]:
        pytest.skip(f"CUPTI unusable here: {status['error']}")
    # The first trace initialises CUPTI's activity machinery (and its buffers for kernel records,
    # hence the kernel); keep that out of the measured ones.
    with kn.MemoryTrace(0):
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
    return status


@needs_gpu
def test_an_empty_block_reads_zero(gpu):
    trace = _trace(lambda: None)
    assert trace.peak_bytes == 0
    assert trace.live_at_exit_bytes == 0


@needs_gpu
def test_raw_cuda_malloc_freed_inside_is_the_peak_and_not_persistent(gpu):
    rt = _cudart()
    ptr = ctypes.c_void_p()

    def body():
        assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(512 * MIB)) == 0
        assert rt.cudaFree(ptr) == 0

    trace = _trace(body)
    assert trace.peak_bytes >= 512 * MIB
    assert trace.live_at_exit_bytes == 0
    assert trace.freed_bytes >= 512 * MIB


@needs_gpu
def test_memory_kept_after_the_block_is_live_at_exit(gpu):
    rt = _cudart()
    ptr = ctypes.c_void_p()
    try:
        trace = _trace(lambda: rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(64 * MIB)))
        assert trace.live_at_exit_bytes >= 64 * MIB
    finally:
        rt.cudaFree(ptr)


@needs_gpu
def test_free_of_memory_allocated_before_the_block_does_not_go_negative(gpu):
    rt = _cudart()
    ptr = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(128 * MIB)) == 0
    trace = _trace(lambda: rt.cudaFree(ptr))
    assert trace.peak_bytes == 0
    assert trace.freed_bytes == 0
    assert trace.summary()["untracked_frees"] >= 1


@needs_gpu
def test_cuda_malloc_async_is_counted(gpu):
    rt = _cudart()
    ptr = ctypes.c_void_p()

    def body():
        assert rt.cudaMallocAsync(ctypes.byref(ptr), ctypes.c_size_t(256 * MIB), None) == 0
        assert rt.cudaFreeAsync(ptr, None) == 0
        assert rt.cudaStreamSynchronize(None) == 0

    trace = _trace(body)
    assert trace.peak_bytes >= 256 * MIB
    assert trace.live_at_exit_bytes == 0


@needs_gpu
def test_allocations_between_traces_are_discarded(gpu):
    rt = _cudart()
    ptr = ctypes.c_void_p()
    with kn.MemoryTrace(0):
        pass
    assert rt.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(32 * MIB)) == 0
    assert rt.cudaFree(ptr) == 0
    trace = _trace(lambda: None)
    assert trace.peak_bytes == 0
    assert trace.allocated_bytes == 0


@needs_gpu
def test_vmm_physical_allocations_are_counted(gpu):
    cuda = ctypes.CDLL("libcuda.so.1")

    class Location(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    class AllocFlags(ctypes.Structure):
        _fields_ = [
            ("compressionType", ctypes.c_ubyte),
            ("gpuDirectRDMACapable", ctypes.c_ubyte),
            ("usage", ctypes.c_ushort),
            ("reserved", ctypes.c_ubyte * 4),
        ]

    class Prop(ctypes.Structure):
        _fields_ = [
            ("type", ctypes.c_int),
            ("requestedHandleTypes", ctypes.c_int),
            ("location", Location),
            ("win32HandleMetaData", ctypes.c_void_p),
            ("allocFlags", AllocFlags),
        ]

    prop = Prop()
    prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = 1  # CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = 0
    granularity = ctypes.c_size_t()
    assert cuda.cuMemGetAllocationGranularity(ctypes.byref(granularity), ctypes.byref(prop), 0) == 0
    size = max(granularity.value, 1) * ((64 * MIB) // max(granularity.value, 1))
    handle = ctypes.c_uint64()

    def body():
        assert (
            cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), 0)
            == 0
        )
        assert cuda.cuMemRelease(handle) == 0

    trace = _trace(body)
    summary = trace.summary()
    assert summary["vmm_counted_via"] in ("callback", "memory2"), summary
    assert trace.peak_bytes >= size
    assert trace.live_at_exit_bytes == 0


@needs_gpu
def test_torch_allocations_are_attributed_to_torch(gpu):
    torch.cuda.empty_cache()

    def body():
        x = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x

    trace = _trace(body)
    # The caching allocator reserves a segment (cudaMalloc) and keeps it: CUPTI sees the segment.
    assert trace.peak_bytes >= 256 * MIB
    if trace.attribution == "library":
        assert trace.by_source.get("torch", 0) >= 256 * MIB
        assert trace.peak_excluding_torch_bytes < 256 * MIB
    assert sum(trace.by_source.values()) == trace.peak_bytes
    torch.cuda.empty_cache()


@needs_gpu
def test_nested_traces_are_refused(gpu):
    with kn.MemoryTrace(0) as outer:
        with pytest.raises(RuntimeError, match="already active"):
            with kn.MemoryTrace(0):
                pass
    assert outer.available


@needs_gpu
def test_nvml_sample_on_the_gpu():
    try:
        sample = kn.nvml_sample(0)
    except RuntimeError as error:
        pytest.skip(str(error))
    assert sample["matched_by"] in ("pci_bus_id", "index")
    assert isinstance(sample["sm_clock_mhz"], int) and sample["sm_clock_mhz"] > 0
    assert isinstance(sample["throttle_reasons"], int)
    assert isinstance(sample["throttle_reason_names"], list)


# A kernel with a 16 KiB per-thread local array (ptxas: "16384 bytes stack frame"), loaded from PTX
# through the driver so no compiler is needed. MEASURED.md: +3960 MiB on an H200.
_BIG_LOCAL_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry kbv_big_local(
    .param .u64 kbv_big_local_out,
    .param .u32 kbv_big_local_idx
)
{
    .local .align 4 .b8 buf[16384];
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [kbv_big_local_out];
    ld.param.u32 %r1, [kbv_big_local_idx];
    mov.u64 %rd2, buf;
    and.b32 %r2, %r1, 4095;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.local.u32 [%rd4], %r1;
    shr.u32 %r3, %r1, 3;
    and.b32 %r4, %r3, 4095;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.local.u32 %r5, [%rd6];
    cvta.to.global.u64 %rd7, %rd1;
    st.global.u32 [%rd7], %r5;
    ret;
}
\x00"""


@needs_gpu
def test_local_memory_growth_of_a_big_stack_kernel(gpu):
    if torch.cuda.get_device_capability(0) < (9, 0):
        pytest.skip("the PTX targets sm_90")
    cuda = ctypes.CDLL("libcuda.so.1")
    module = ctypes.c_void_p()
    status = cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(_BIG_LOCAL_PTX))
    if status != 0:
        pytest.skip(f"cuModuleLoadData failed ({status})")
    function = ctypes.c_void_p()
    assert cuda.cuModuleGetFunction(ctypes.byref(function), module, b"kbv_big_local") == 0
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    out_ptr = ctypes.c_uint64(out.data_ptr())
    idx = ctypes.c_uint32(12345)
    params = (ctypes.c_void_p * 2)(
        ctypes.cast(ctypes.byref(out_ptr), ctypes.c_void_p),
        ctypes.cast(ctypes.byref(idx), ctypes.c_void_p),
    )
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def body():
        assert cuda.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, params, None) == 0

    trace = _trace(body)
    summary = trace.summary()
    capacity = summary["thread_capacity"]
    assert capacity > 0, summary
    assert summary["kernels"] >= 1, summary
    # The reservation grows to at least 16 KiB per thread (the first such kernel in the process).
    assert summary["local_memory_above_default_bytes"] >= (16384 - 1024) * capacity, summary
    assert trace.local_memory_bytes >= (16384 - 1024) * capacity, summary
    cuda.cuModuleUnload(module)


@needs_gpu
def test_activities_name_kernels_and_copies_with_their_streams(gpu):
    """What the kernel trace judges (python/kbv/gpu_guards.py): kernels by demangled name, a
    copy, and the stream of each; a trace without `activities` keeps none."""
    x = torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with kn.MemoryTrace(0, activities=True) as trace:
        torch.cuda._sleep(1000)
        with torch.cuda.stream(side):
            y = x * 2
        host = torch.empty(16, pin_memory=True)
        host.copy_(x[:16], non_blocking=False)
        torch.cuda.synchronize()
    activities = trace.summary()["activities"]
    kinds = [a["kind"] for a in activities]
    assert "kernel" in kinds and "copy" in kinds, activities
    names = [a["name"] for a in activities if a["kind"] == "kernel"]
    assert any("spin_kernel" in n for n in names), names
    streams = {a["stream"] for a in activities if a["kind"] == "kernel"}
    assert len(streams) == 2, activities
    assert all(a["end_ns"] >= a["start_ns"] > 0 for a in activities)
    del y
    with kn.MemoryTrace(0) as plain:
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
    assert plain.summary()["activities"] == [] and plain.summary()["kernels"] >= 1
