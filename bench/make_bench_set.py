"""Writes the suite benchmark's candidate set (issue 4, "Benchmark"): KernelBench generation
layout (`<out>/candidates/bench/level_L_problem_P_sample_S_kernel.py`) over one problem tree
(`<out>/problems/levelN/...`) holding kbv's bundled suite and a KernelBench level-1 subset.

The mix is meant to look like a model's samples: honest CUDA kernels (the bundled examples),
block-size variants of them, pure-PyTorch rewrites, wrong kernels (from examples/wrong), CUDA
sources that do not compile, and for the KernelBench subset kernels written here. Hangs and
segfaults are left out: under eval_from_generations each costs its full 180 s timeout (a
crashed pool worker never answers), which would dominate the comparison and the time budget.

    python3 bench/make_bench_set.py --out DIR [--kernelbench .deps/KernelBench]

Writes DIR/manifest.json: one entry per candidate (problem file, candidate file, kind)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = REPO / "problems"
CUDA = REPO / "examples" / "candidates" / "cuda"
WRONG = REPO / "examples" / "wrong"

# The KernelBench level-1 subset: problems whose inputs and output fit kbv's file-based cases
# at KernelBench's own sizes (the elementwise problems of KernelBench 0.2 hold 6.4 GB inputs).
KB_SUBSET = [
    "12_Matmul_with_diagonal_matrices_.py",
    "13_Matmul_for_symmetric_matrices.py",
    "14_Matmul_for_upper_triangular_matrices.py",
    "16_Matmul_with_transposed_A.py",
    "17_Matmul_with_transposed_B.py",
]

WRONG_SET = [  # (file, target) pure-PyTorch or host-only kernels that are wrong on the GPU
    "relu_zeros.py",
    "relu_identity.py",
    "relu_nan.py",
    "mutates_input.py",
    "returns_input_alias.py",
    "raises_in_forward.py",
    "matmul_fp16.py",
    "matmul_wrong_shape.py",
    "softmax_no_max_subtraction.py",
]

BLOCK_VARIANT = "const int threads = 256;"


def problem_files() -> dict[tuple[int, int], Path]:
    out = {}
    for path in sorted(PROBLEMS.glob("level*/*.py")):
        level = int(path.parent.name.removeprefix("level"))
        out[(level, int(path.name.split("_")[0]))] = path
    return out


def pure_pytorch(problem: Path) -> str:
    """The problem's own Model as ModelNew: what a model that gives up on kernels writes."""
    text = problem.read_text()
    text = re.sub(r"\bclass Model\(", "class ModelNew(", text)
    return "# bench: pure PyTorch (the reference's own operators)\n" + text


def compile_error(source: str) -> str:
    return source.replace(
        '_CUDA_SRC = r"""\n', '_CUDA_SRC = r"""\n#error bench: this kernel does not compile\n', 1
    )


ROWSCALE = r'''# bench: CUDA row scaling, KernelBench level1/12 (diag(A) @ B), {threads} threads
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void rowscale(const float* a, const float* b, float* y, long n, long m) {{
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n * m; i += stride)
    y[i] = a[i / m] * b[i]{bug};
}}

torch::Tensor rowscale_cuda(torch::Tensor a, torch::Tensor b) {{
  a = a.contiguous();
  b = b.contiguous();
  auto y = torch::empty_like(b);
  long n = b.size(0), m = b.size(1);
  int threads = {threads};
  long blocks = std::min<long>((n * m + threads - 1) / threads, 65535L * 8);
  rowscale<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n, m);
  return y;
}}
"""

_ext = load_inline(
    name="bench_rowscale_{threads}{tag}",
    cpp_sources="torch::Tensor rowscale_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=_CUDA_SRC,
    functions=["rowscale_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.rowscale_cuda(A, B)
'''

TILED = r'''# bench: CUDA tiled FP32 matmul ({tile}x{tile} tiles), KernelBench level1/{pid}
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#define T {tile}
// C[M,N] = op(A) op(B); A element (i,k) at a[i*sai + k*sak], B element (k,j) at b[k*sbk + j*sbj]
__global__ void tiled(const float* a, const float* b, float* c, int M, int N, int K,
                      long sai, long sak, long sbk, long sbj) {{
  __shared__ float As[T][T + 1], Bs[T][T + 1];
  int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += T) {{
    int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? a[row * sai + ka * sak] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? b[kb * sbk + col * sbj] : 0.f;
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }}
  if (row < M && col < N) c[(long)row * N + col] = acc;
}}

torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b, bool ta, bool tb) {{
  a = a.contiguous();
  b = b.contiguous();
  int M = ta ? a.size(1) : a.size(0), K = ta ? a.size(0) : a.size(1);
  int N = tb ? b.size(0) : b.size(1);
  auto c = torch::empty({{M, N}}, a.options());
  long sai = ta ? 1 : K, sak = ta ? M : 1, sbk = tb ? 1 : N, sbj = tb ? K : 1;
  dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
  tiled<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K, sai, sak, sbk, sbj);
  return c;
}}
"""

_ext = load_inline(
    name="bench_tiled_{pid}_{tile}",
    cpp_sources="torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b, bool ta, bool tb);",
    cuda_sources=_CUDA_SRC,
    functions=["matmul_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return {call}
'''

PURE = (
    "# bench: {what}\nimport torch\nimport torch.nn as nn\n\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, A, B):\n        return {expr}\n"
)


def kb_candidates() -> dict[int, list[tuple[str, str]]]:
    """KernelBench problem id -> [(kind, source)]."""
    return {
        12: [
            ("cuda", ROWSCALE.format(threads=256, bug="", tag="")),
            ("cuda_variant", ROWSCALE.format(threads=128, bug="", tag="")),
            ("pytorch", PURE.format(what="pure PyTorch broadcast", expr="A[:, None] * B")),
            ("wrong", ROWSCALE.format(threads=256, bug=" + 1e-3f", tag="_bias")),
        ],
        13: [
            ("pytorch", PURE.format(what="pure PyTorch", expr="A @ B")),
            ("cuda", TILED.format(tile=16, pid=13, call="_ext.matmul_cuda(A, B, False, False)")),
        ],
        14: [
            ("pytorch", PURE.format(what="pure PyTorch", expr="torch.triu(A @ B)")),
            ("wrong", PURE.format(what="wrong: no triu", expr="A @ B")),
        ],
        16: [
            ("pytorch", PURE.format(what="pure PyTorch", expr="A.t() @ B")),
            ("cuda", TILED.format(tile=32, pid=16, call="_ext.matmul_cuda(A, B, True, False)")),
        ],
        17: [
            ("pytorch", PURE.format(what="pure PyTorch", expr="A @ B.t()")),
            ("wrong", PURE.format(what="wrong: A @ B", expr="A @ B.t() * 1.001")),
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernelbench", type=Path, default=REPO / ".deps" / "KernelBench")
    args = parser.parse_args()
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    cands = out / "candidates" / "bench"
    cands.mkdir(parents=True)
    manifest = []
    samples: dict[tuple[int, int], int] = {}

    def add(level, pid, problem: Path, kind, source):
        sample = samples.get((level, pid), 0)
        samples[(level, pid)] = sample + 1
        path = cands / f"level_{level}_problem_{pid}_sample_{sample}_kernel.py"
        path.write_text(source)
        manifest.append(
            {
                "level": level,
                "problem_id": pid,
                "sample": sample,
                "kind": kind,
                "problem": str(problem.relative_to(out)),
                "candidate": str(path.relative_to(out)),
            }
        )

    problems = {}
    for (level, pid), src in problem_files().items():
        dst = out / "problems" / f"level{level}" / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
        problems[(level, pid)] = dst
    kb_level1 = args.kernelbench / "KernelBench" / "level1"
    if kb_level1.is_dir():
        for name in KB_SUBSET:
            dst = out / "problems" / "level1" / name
            shutil.copy(kb_level1 / name, dst)
            problems[(1, int(name.split("_")[0]))] = dst
    else:
        print(f"no KernelBench mirror at {args.kernelbench}: the KernelBench subset is left out")

    by_name = {(lvl, p.name): key for key, p in problems.items() for lvl in [key[0]]}
    for (level, pid), problem in sorted(problems.items()):
        honest = CUDA / f"level{level}" / problem.name
        if not honest.exists():
            continue
        source = honest.read_text()
        add(level, pid, problem, "cuda", source)
        if BLOCK_VARIANT in source:
            add(
                level,
                pid,
                problem,
                "cuda_variant",
                source.replace(BLOCK_VARIANT, "const int threads = 128;"),
            )
        if pid in (3, 4, 5) and level == 1:
            add(level, pid, problem, "compile_error", compile_error(source))
        if (level, pid) in {(1, 3), (1, 4), (1, 5), (1, 9), (2, 1), (3, 1)}:
            add(level, pid, problem, "pytorch", pure_pytorch(problem))
    for name in WRONG_SET:
        text = (WRONG / name).read_text()
        target = text.splitlines()[0].split(":", 1)[1].strip()  # levelN/Name
        level = int(target.split("/")[0].removeprefix("level"))
        key = by_name[(level, target.split("/")[1] + ".py")]
        add(level, key[1], problems[key], "wrong", text)
    if kb_level1.is_dir():
        for pid, entries in kb_candidates().items():
            for kind, source in entries:
                add(1, pid, problems[(1, pid)], kind, source)

    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    kinds: dict[str, int] = {}
    for m in manifest:
        kinds[m["kind"]] = kinds.get(m["kind"], 0) + 1
    print(f"{len(manifest)} candidates over {len(problems)} problems: {kinds}")


if __name__ == "__main__":
    main()
