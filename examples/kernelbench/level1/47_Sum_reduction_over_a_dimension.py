"""torch.sum(x, dim, keepdim=True) with x viewed as [outer, R, inner]. For inner > 1 (the problem:
[128, 4096, 4095] over dim 1) one CUDA block of 32 x 8 threads owns 32 adjacent output columns:
each warp reads 32 consecutive floats of a row (coalesced), the 8 warps stride over the R rows
with 8 independent loads in flight per thread, accumulating in double, and a fixed shared-memory
tree adds the 8 partials. For inner == 1 one block reduces each contiguous row.

Correct on every input family: every sum is accumulated in double (the 4096-term sums of mixed
sign, offset or 1e6-sized values carry no float cancellation error) and rounded to float once;
the order is fixed, so the result is deterministic; zeros and constants are exact.
"""

# kbv-kernelbench: 423217d
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

constexpr int kTX = 32;  // columns per block
constexpr int kTY = 8;   // row groups per block
constexpr int kUnroll = 8;

// y[o, j] = sum_r x[o, r, j]; block (kTX, kTY) over columns [j0, j0 + kTX) of one outer index.
__global__ void __launch_bounds__(kTX * kTY)
    sum_cols_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R, int64_t inner,
                    int64_t col_tiles) {
  __shared__ double sh[kTY][kTX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = blockIdx.x / col_tiles;
  const int64_t j = (blockIdx.x - o * col_tiles) * kTX + tx;
  double acc = 0.0;
  if (j < inner) {
    const float* p = x + o * R * inner + j;
    int64_t r = ty;
    for (; r + (kUnroll - 1) * kTY < R; r += kUnroll * kTY) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + (r + u * kTY) * inner);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc += (double)v[u];
    }
    for (; r < R; r += kTY) acc += (double)__ldcs(p + r * inner);
  }
  sh[ty][tx] = acc;
  __syncthreads();
#pragma unroll
  for (int h = kTY / 2; h > 0; h >>= 1) {
    if (ty < h) sh[ty][tx] += sh[ty + h][tx];
    __syncthreads();
  }
  if (ty == 0 && j < inner) y[o * inner + j] = (float)sh[0][tx];
}

// inner == 1: one block per contiguous row of R values.
constexpr int kRowThreads = 256;
__global__ void __launch_bounds__(kRowThreads)
    sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t R) {
  __shared__ double red[kRowThreads / 32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* p = x + row * R;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < R; i += kRowThreads) acc += (double)p[i];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
      double t = threadIdx.x < kRowThreads / 32 ? red[threadIdx.x] : 0.0;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
      if (threadIdx.x == 0) y[row] = (float)t;
    }
    __syncthreads();
  }
}

}  // namespace

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() >= 1, "x must have a dimension to reduce");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  std::vector<int64_t> out_sizes(xc.sizes().begin(), xc.sizes().end());
  out_sizes[dim] = 1;
  auto y = torch::empty(out_sizes, xc.options());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= xc.size(i);
  for (int64_t i = dim + 1; i < xc.dim(); ++i) inner *= xc.size(i);
  const int64_t R = xc.size(dim);
  if (y.numel() == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (inner > 1) {
    const int64_t col_tiles = (inner + kTX - 1) / kTX;
    const int64_t blocks = outer * col_tiles;
    TORCH_CHECK(blocks <= 2147483647LL, "too many column tiles");
    sum_cols_kernel<<<(unsigned)blocks, dim3(kTX, kTY), 0, stream>>>(xp, yp, R, inner, col_tiles);
  } else {
    const int blocks = (int)std::min<int64_t>(outer, 1 << 30);
    sum_rows_kernel<<<blocks, kRowThreads, 0, stream>>>(xp, yp, outer, R);
  }
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "sum kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

_ext = load_inline(
    name="kbv_kb_l1_47_sum_dim",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x, self.dim)
