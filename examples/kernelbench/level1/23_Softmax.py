"""Softmax over dim 1 of a 2-D tensor, one CUDA block per row: pass 1 reads the row once and keeps
an online (running max, sum of exp(x - max)) pair per thread (float4 loads), merged across the
block by a shuffle/shared-memory tree; pass 2 re-reads the row and writes exp(x - max) / sum.

Correct on every input family: the max is subtracted before exp (no overflow for values up to
1e6 and beyond), each thread sums under a thousand terms in [0, 1] before the tree merge, a
constant row gives exactly 1/n, and NaN propagates to its row as in torch.
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
#include <cmath>
#include <cstdint>

namespace {

constexpr int kThreads = 512;

// Fold one value into the running (m, s): s = sum exp(v - m) over the values seen.
__device__ __forceinline__ void fold1(float& m, float& s, float v) {
  if (v > m) {
    s = s * expf(m - v) + 1.f;  // m = -inf (nothing seen yet): s * 0 + 1
    m = v;
  } else if (v != -INFINITY || m != -INFINITY) {
    s += expf(v - m);  // NaN v makes s NaN, as torch's row becomes NaN
  }
}

// Fold four values: rescale once with the new max, then add four exps.
__device__ __forceinline__ void fold4(float& m, float& s, float4 v) {
  const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
  if (mx > m) {
    s = (m == -INFINITY) ? s * 0.f : s * expf(m - mx);  // s * 0 keeps an earlier NaN
    m = mx;
  }
  if (m == -INFINITY) {  // all four are -inf (or NaN): fall back to the exact scalar rule
    fold1(m, s, v.x);
    fold1(m, s, v.y);
    fold1(m, s, v.z);
    fold1(m, s, v.w);
    return;
  }
  s += (expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m));
}

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) {  // both empty: keep s = s + s2 (0 unless NaN)
    s = s + s2;
    return;
  }
  const float a = (m == -INFINITY) ? s * 0.f : s * expf(m - mn);  // keeps NaN
  const float b = (m2 == -INFINITY) ? s2 * 0.f : s2 * expf(m2 - mn);
  m = mn;
  s = a + b;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                        int64_t n) {
  constexpr int NW = kThreads / 32;
  __shared__ float sh_m[NW], sh_s[NW];
  __shared__ float row_m, row_inv;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float m = -INFINITY, s = 0.f;
    if constexpr (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      const int64_t n4 = n >> 2;
      int64_t i = threadIdx.x;
      for (; i + kThreads < n4; i += 2 * kThreads) {
        const float4 a = x4[i];
        const float4 b = x4[i + kThreads];
        fold4(m, s, a);
        fold4(m, s, b);
      }
      for (; i < n4; i += kThreads) fold4(m, s, x4[i]);
    } else {
      for (int64_t i = threadIdx.x; i < n; i += kThreads) fold1(m, s, xr[i]);
    }
    warp_merge(m, s);
    if (lane == 0) {
      sh_m[warp] = m;
      sh_s[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
      m = lane < NW ? sh_m[lane] : -INFINITY;
      s = lane < NW ? sh_s[lane] : 0.f;
      warp_merge(m, s);
      if (lane == 0) {
        row_m = m;
        row_inv = 1.f / s;
      }
    }
    __syncthreads();
    const float rm = row_m, inv = row_inv;
    if constexpr (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(xr);
      float4* y4 = reinterpret_cast<float4*>(yr);
      const int64_t n4 = n >> 2;
      for (int64_t i = threadIdx.x; i < n4; i += kThreads) {
        float4 v = x4[i];
        v.x = expf(v.x - rm) * inv;
        v.y = expf(v.y - rm) * inv;
        v.z = expf(v.z - rm) * inv;
        v.w = expf(v.w - rm) * inv;
        __stcs(y4 + i, v);
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += kThreads) yr[i] = expf(xr[i] - rm) * inv;
    }
    __syncthreads();  // row_m / row_inv / sh_* are rewritten for the next row
  }
}

}  // namespace

torch::Tensor softmax_forward(torch::Tensor x, int64_t dim) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim == x.dim() - 1, "this kernel normalises over the last dimension");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t n = xc.size(dim);
  if (xc.numel() == 0) return y;
  const int64_t rows = xc.numel() / n;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const uintptr_t addr_bits = reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp);
  const bool vec = (n % 4 == 0) && ((addr_bits & 15) == 0);
  const int blocks = (int)std::min<int64_t>(rows, 1 << 30);
  if (vec)
    softmax_rows_kernel<true><<<blocks, kThreads, 0, stream>>>(xp, yp, rows, n);
  else
    softmax_rows_kernel<false><<<blocks, kThreads, 0, stream>>>(xp, yp, rows, n);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "softmax kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x, int64_t dim);"

_ext = load_inline(
    name="kbv_kb_l1_23_softmax",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x, 1 if x.dim() > 1 else 0)
