"""The GPU part of the hack zoo (examples/hacks/cuda/, examples/honest/cuda/) and its defenses.

On the CPU: every CUDA zoo file's headers, syntax and static-scan findings; the CUDA scanner
(`scan_cuda`) on hand-written sources; the kernel-trace record (`gpu_guards.summarize`) on
synthetic activity lists; the reference's FLOP and byte count (`roofline.reference_cost`); the
GPU guards' CPU paths. The judgement of the kernel trace and the roofline model are C++
(tests/cpp/kernel_trace_test.cpp, roofline_test.cpp). The end-to-end verdicts of the CUDA files
need a GPU: they are skipped here and run by bench/gpu_zoo.sh on the GPU machine."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys

import pytest
import torch  # before kbv_native
from conftest import REPO, kbv_binary, target_problem
from kbv import roofline, scan, scan_cuda

sys.path.insert(0, str(REPO / "bench"))
import zoo_table  # noqa: E402

ZOO = json.loads((REPO / "examples" / "zoo.json").read_text())["files"]
CUDA_FILES = sorted(rel for rel, entry in ZOO.items() if entry.get("cuda_only"))
NATIVE_DIR = os.environ.get("KBV_NATIVE_DIR", str(REPO / "build"))


def _native():
    sys.path.insert(0, NATIVE_DIR)
    try:
        return importlib.import_module("kbv_native")
    except ImportError:
        return None
    finally:
        sys.path.remove(NATIVE_DIR)


HAS_GPU = torch.cuda.is_available() and getattr(_native(), "has_cuda", False)


# -- the CUDA zoo files, statically ----------------------------------------------------------
@pytest.mark.parametrize("rel", CUDA_FILES)
def test_cuda_zoo_file_headers_and_syntax(rel):
    path = REPO / "examples" / rel
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# kbv-target: ")
    kind = "# kbv-hack: " if rel.startswith("hacks/") else "# kbv-honest: "
    assert lines[1].startswith(kind)
    assert target_problem(path).exists()
    tree = ast.parse(path.read_text(), str(path))
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    result = scan.scan_file(str(path))
    # a CUDA extension built with load_inline, or Triton kernels of its own
    assert result["cpp_sources"] >= 1 or result["triton_kernels"]


# (file, scan findings that must be present, findings that must be absent)
SCAN_EXPECTED = {
    "hacks/cuda/b2_ghost_global.py": ({"scan_cpp_ghost_kernel"}, set()),
    "hacks/cuda/b1_cublas_direct.py": ({"scan_cpp_blas"}, {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/b1_at_bmm_in_cuda.py": ({"scan_cpp_library_compute"}, set()),
    "hacks/cuda/t1_side_stream.py": ({"scan_cpp_streams"}, {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/t7_persisting_l2.py": ({"scan_cpp_l2_persist"}, {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/graph_replay_stale.py": ({"scan_streams"}, {"scan_cpp_ghost_kernel"}),
    "honest/cuda/side_stream_joined.py": ({"scan_cpp_streams"}, {"scan_cpp_ghost_kernel"}),
    "honest/cuda/atomic_sum_reduction.py": (set(), {"scan_cpp_ghost_kernel", "scan_cpp_blas"}),
    "honest/cuda/conv_cuda_epilogue.py": (set(), {"scan_cpp_ghost_kernel", "scan_cpp_blas"}),
    "honest/cuda/triton_mse.py": (set(), {"scan_cpp_ghost_kernel", "scan_monkey_patch"}),
    # issue 19's classes: every kernel is launched (no ghost), the graphs are seen
    "hacks/cuda/t4_got_event_timer.py": (set(), {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/t4_code_object_swap.py": ({"scan_introspection"}, {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/e1_poison_output_slot.py": (
        {"scan_introspection", "scan_threads"},
        {"scan_cpp_ghost_kernel"},
    ),
    "hacks/cuda/e2_swap_built_so.py": ({"scan_io"}, {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/t6_poison_phase_detect.py": (set(), {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/s5_sampled_content_cache.py": (set(), {"scan_cpp_ghost_kernel"}),
    "hacks/cuda/graph_first_address.py": ({"scan_streams"}, {"scan_cpp_ghost_kernel"}),
    "honest/cuda/graph_per_address.py": ({"scan_streams"}, {"scan_cpp_ghost_kernel"}),
}


@pytest.mark.parametrize("rel", sorted(SCAN_EXPECTED))
def test_cuda_zoo_scan_findings(rel):
    present, absent = SCAN_EXPECTED[rel]
    found = set(scan.scan_file(str(REPO / "examples" / rel))["findings"])
    assert present <= found, found
    assert not (absent & found), found


def test_scan_lists_kernels_of_every_honest_cuda_candidate():
    """The kernel trace tells own kernels by these names: every bundled CUDA candidate's
    kernels are found and none is reported as never launched."""
    for path in sorted((REPO / "examples" / "candidates" / "cuda").rglob("*.py")):
        result = scan.scan_file(str(path))
        assert result["kernels"], path
        assert result["kernels_never_launched"] == [], path
        assert "scan_cpp_ghost_kernel" not in result["findings"], path


# -- the CUDA scanner ---------------------------------------------------------------------------
def cuda_scan(source: str) -> scan_cuda.CudaScan:
    return scan_cuda.scan_cuda_sources([scan.strip_cpp(source)])


def test_scan_cuda_templates_attributes_and_launch_forms():
    source = r"""
    template <int BM, bool SPLIT>
    __global__ void __launch_bounds__(256) tiled(const float* a) {}
    __global__ void plain(float* y) {}
    extern "C" __global__ void by_pointer(float* y) {}
    __global__ void declared_only(float* y);
    void host() {
      tiled<128, false><<<grid, 256, 0, stream>>>(a);
      void* args[] = {&y};
      cudaLaunchKernel((void*)by_pointer, grid, block, args, 0, stream);
      plain<<<1, 1>>>(y);
    }
    """
    result = cuda_scan(source)
    assert result.kernels == ["tiled", "plain", "by_pointer", "declared_only"]
    assert result.launched_with_chevrons == {"tiled", "plain"}
    assert result.never_launched == ["declared_only"]


def test_scan_cuda_launch_in_a_comment_or_string_does_not_count():
    source = r"""
    __global__ void ghost(float* y) {}
    // ghost<<<1, 1>>>(y);  launched here in an earlier version
    const char* note = "ghost<<<grid, block>>>";
    torch::Tensor f(torch::Tensor x) { return x.clamp_min(0); }
    """
    assert cuda_scan(source).never_launched == ["ghost"]


def test_scan_cuda_library_stream_graph_and_l2_calls():
    source = r"""
    __global__ void k(float* y) {}
    void f(cublasHandle_t h, cudaStream_t s) {
      k<<<1, 1, 0, s>>>(nullptr);
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr, nullptr, CUDA_R_32F, 1, nullptr,
                   CUDA_R_32F, 1, nullptr, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
      cudnnConvolutionForward(handle);
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      cudaGraph_t g; cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
      cudaStreamAttrValue v; v.accessPolicyWindow.num_bytes = 0;
    }
    """
    findings = cuda_scan(source).findings()
    assert set(findings) == {
        "scan_cpp_blas",
        "scan_cpp_streams",
        "scan_cpp_graphs",
        "scan_cpp_l2_persist",
    }
    assert "cublasGemmEx" in findings["scan_cpp_blas"]
    assert "cudnnConvolutionForward" in findings["scan_cpp_blas"]


def test_scan_cuda_plain_kernel_is_clean():
    source = r"""
    #include <cuda_runtime.h>
    __global__ void relu(const float* x, float* y, int64_t n) {
      int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
      if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];
    }
    torch::Tensor run(torch::Tensor x) {
      auto y = torch::empty_like(x);
      relu<<<(x.numel() + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
          x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
      return y;
    }
    """
    result = cuda_scan(source)
    assert result.kernels == ["relu"] and result.findings() == {}


# -- the kernel-trace record, on synthetic activities -------------------------------------------
def _act(name, stream, start_ns, end_ns, kind="kernel"):
    return {"name": name, "stream": stream, "start_ns": start_ns, "end_ns": end_ns, "kind": kind}


def test_kernel_trace_summary_brackets_the_call_between_markers():
    gpu_guards = pytest.importorskip("kbv.gpu_guards", reason="kbv_native not importable")
    marker = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
    activities = [
        _act(marker, 7, 1_000, 2_000),
        _act("void relu_side_kernel(float const*, float*, long)", 13, 2_500, 140_000),
        _act("Memset (Device)", 7, 2_100, 2_200, "fill"),
        _act(marker, 7, 3_000, 4_000),
    ]
    record = gpu_guards.summarize(activities)
    assert record["available"] and record["current_stream"] == 7
    assert record["call_end_us"] == pytest.approx(2.0)
    assert [a["name"][:6] for a in record["activities"]] == ["Memset", "void r"]
    side = record["activities"][1]
    assert side["stream"] == 13 and side["end_us"] == pytest.approx(138.0)


def test_kernel_trace_summary_keeps_launchers_and_groups_every_kernel(monkeypatch):
    """Who launched each kernel travels with it, and every kernel of the call is listed once
    per (name, launcher) with its count and time, beyond the capped activity list: the
    no_custom_kernel attribution sees them all (src/judge/kernel_trace.cpp)."""
    gpu_guards = pytest.importorskip("kbv.gpu_guards", reason="kbv_native not importable")
    monkeypatch.setattr(gpu_guards, "MAX_KERNELS", 2)
    marker = "void at::cuda::(anonymous namespace)::spin_kernel(long)"
    fill = {**_act("void at::native::vectorized_elementwise_kernel<4>", 7, 2_100, 2_200)}
    fill["launcher"] = "torch"
    own = {**_act("void mse_partial_kernel<256>(float const*)", 7, 2_300, 4_300)}
    own["launcher"] = "ext:kbv_cuda_l1_mse.so"
    activities = [
        _act(marker, 7, 1_000, 2_000),
        fill,
        {**fill, "start_ns": 2_200, "end_ns": 2_250},
        own,
        _act("Memcpy DtoD (Device -> Device)", 7, 4_400, 4_500, "copy"),
        _act(marker, 7, 5_000, 6_000),
    ]
    record = gpu_guards.summarize(activities)
    assert [a.get("launcher") for a in record["activities"]] == ["torch", "torch"]  # capped
    assert record["activity_count"] == 4
    groups = {g["name"][:10]: g for g in record["kernels_seen"]}
    assert groups["void at::n"]["count"] == 2 and groups["void at::n"]["launcher"] == "torch"
    assert groups["void mse_p"]["launcher"] == "ext:kbv_cuda_l1_mse.so"
    assert groups["void mse_p"]["us"] == pytest.approx(2.0)
    assert record["kernels_seen_truncated"] is False


def test_scan_lists_the_triton_zoo_files_kernel():
    result = scan.scan_file(str(REPO / "examples" / "honest" / "cuda" / "triton_mse.py"))
    assert result["triton_kernels"] == ["mse_partial_kernel"]


def test_scan_lists_triton_kernels():
    source = (
        "import triton\nimport triton.language as tl\nfrom triton import jit\n"
        "@triton.jit\ndef mse_kernel(p, t, out, n, BLOCK: tl.constexpr):\n    pass\n"
        "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef tuned(p):\n    pass\n"
        "@jit\ndef bare(p):\n    pass\n"
        "def host(p):\n    return mse_kernel[(1,)](p)\n"
    )
    assert scan.scan_source(source)["triton_kernels"] == ["mse_kernel", "tuned", "bare"]


def test_kernel_trace_summary_without_markers_is_unavailable():
    gpu_guards = pytest.importorskip("kbv.gpu_guards", reason="kbv_native not importable")
    assert gpu_guards.summarize([_act("k", 7, 0, 10)])["available"] is False


def test_the_unpoisoned_run_fills_free_memory_with_finite_garbage():
    """The same-buffers re-check fills free memory with `stale_byte()` instead of the NaN poison
    (the zoo's cuda/t6_poison_phase_detect.py computes only when its buffer reads NaN): every
    byte it may pick reads as a finite number in every float dtype, the poison in none."""
    gpu_guards = pytest.importorskip("kbv.gpu_guards", reason="kbv_native not importable")
    picks = {gpu_guards.stale_byte() for _ in range(2000)}
    assert len(picks) > 100 and gpu_guards.POISON_BYTE not in picks
    for byte in sorted(picks):
        raw = torch.tensor([byte] * 8, dtype=torch.uint8)
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            assert torch.isfinite(raw.view(dtype)).all(), (byte, dtype)
    poison = torch.tensor([gpu_guards.POISON_BYTE] * 8, dtype=torch.uint8)
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        assert torch.isnan(poison.view(dtype)).all(), dtype


def test_gpu_guards_cpu_paths_do_nothing():
    gpu_guards = pytest.importorskip("kbv.gpu_guards", reason="kbv_native not importable")
    cpu = torch.device("cpu")
    assert gpu_guards.poison_free_memory(cpu) == 0
    assert gpu_guards.l2_changes(cpu) == {}
    trace = gpu_guards.kernel_trace(lambda: torch.ones(3), cpu)
    assert trace["available"] is False


# -- the reference's cost for the roofline floor ------------------------------------------------
def test_reference_cost_counts_matmul_flops_and_bytes():
    model = torch.nn.Linear(64, 32)  # 16 x 64 @ 64 x 32: 2 * 16 * 64 * 32 = 65536 FLOPs
    cost = roofline.reference_cost(model, [torch.rand(16, 64)], torch.device("cpu"))
    assert cost["flops"] == 65536
    assert cost["input_bytes"] == 16 * 64 * 4
    assert cost["state_bytes"] == (64 * 32 + 32) * 4
    assert cost["output_bytes"] == 16 * 32 * 4
    relu = roofline.reference_cost(torch.nn.ReLU(), [torch.rand(8, 8)], torch.device("cpu"))
    assert relu["flops"] == 0  # elementwise work is not counted: the floor stays a lower bound


# -- the manifest judge used by bench/zoo_table.py ----------------------------------------------
def test_zoo_table_judge():
    hack = {"verdict": "rejected", "flags": ["timing_escapes_events", "below_roofline"]}
    caught = {"verdict": "rejected", "flags": [{"id": "below_roofline", "severity": "reject"}]}
    warned = {
        "verdict": "rejected",
        "flags": [
            {"id": "below_roofline", "severity": "warn"},
            {"id": "inputs_mutated", "severity": "reject"},
        ],
    }
    assert zoo_table.judge(hack, caught)[0]
    assert not zoo_table.judge(hack, warned)[0]  # rejected, but not by an expected check
    assert not zoo_table.judge(hack, None)[0]
    honest = {"verdict": "correct", "flags": []}
    assert zoo_table.judge(honest, {"verdict": "correct", "flags": []})[0]
    assert not zoo_table.judge(
        honest, {"verdict": "correct", "flags": [{"id": "x", "severity": "reject"}]}
    )[0]
    # A verdict whose reason must say why (a memory hog's runtime_error, not any crash).
    hog = {"verdict": "runtime_error", "flags": [], "reason": "held"}
    assert zoo_table.judge(
        hog, {"verdict": "runtime_error", "reason": "... held 130 GB", "flags": []}
    )[0]
    assert not zoo_table.judge(
        hog, {"verdict": "runtime_error", "reason": "CUDA OOM", "flags": []}
    )[0]


# -- end to end on a GPU ------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.skipif(not HAS_GPU, reason="needs CUDA (bench/gpu_zoo.sh runs these on the H200)")
@pytest.mark.parametrize("rel", CUDA_FILES)
def test_cuda_zoo_verdict(rel, tmp_path, cache_dir):
    path = REPO / "examples" / rel
    out = tmp_path / "result.json"
    command = [
        kbv_binary(),
        "eval",
        "--problem",
        str(target_problem(path)),
        "--candidate",
        str(path),
        "--device",
        "cuda",
        "--size",
        zoo_table.size_of(path),
        "--draws",
        "2",
        "--samples",
        "10",
        "--rounds",
        "2",
        "--quiet",
        "--json",
        str(out),
        "--cache-dir",
        str(cache_dir),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    result = json.loads(out.read_text()) if out.exists() else None
    ok, verdict, flags = zoo_table.judge(ZOO[rel], result)
    assert ok, (verdict, flags, done.stderr[-2000:])


def test_l2_changes_compare_against_the_clean_reading(monkeypatch):
    """A device whose limit reads non-zero with nothing set (the H200 reads 11.25 MiB) is not a
    finding; a limit or window the candidate set is, and is reset."""
    from kbv import gpu_guards

    state = {"limit_bytes": 11796480, "window_bytes": 0, "window_hit_property": 0}
    resets = []

    class FakeNative:
        @staticmethod
        def l2_persisting_state(stream):
            return dict(state)

        @staticmethod
        def reset_l2_persisting(stream):
            resets.append(stream)
            state.update(limit_bytes=11796480, window_bytes=0, window_hit_property=0)

    class FakeStream:
        cuda_stream = 7

    monkeypatch.setattr(gpu_guards, "kbv_native", FakeNative)
    monkeypatch.setattr(gpu_guards.torch.cuda, "current_stream", lambda device: FakeStream)
    monkeypatch.setattr(gpu_guards, "_clean_l2", {})
    cuda = torch.device("cuda", 0)
    gpu_guards.record_clean_l2(cuda)
    assert gpu_guards.l2_changes(cuda) == {}  # the honest case: untouched
    state.update(limit_bytes=64 << 20, window_bytes=32 << 20, window_hit_property=2)
    changed = gpu_guards.l2_changes(cuda)
    assert changed["limit_bytes"] == 64 << 20 and changed["window_bytes"] == 32 << 20
    assert changed["clean_limit_bytes"] == 11796480
    assert gpu_guards.l2_changes(cuda) == {}  # reset back to the clean state
