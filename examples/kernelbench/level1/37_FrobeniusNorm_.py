"""x / ||x||_F (one global norm over the whole tensor) as two CUDA kernels: kernel 1 has a fixed
grid of blocks each sum squares over a grid-stride share (float4 loads, sums of four in float then
double per thread, a double block tree) into one double partial per block; kernel 2 has every
block reduce those partials in the same fixed order (identical norm everywhere, deterministic,
no atomics), take sqrt, and stream y = x / norm with float4 loads and stores.

Correct on every input family: the 1.9e9-term sum of squares is accumulated in double, so its
error is far below float rounding; values of 1e6 square to 1e12 (no overflow); the divide is a
true IEEE x / norm, so an all-zero input gives 0/0 = NaN everywhere, as torch and the float64
truth do.
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
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Block-wide double sum; the result is valid in thread 0. Fixed order: deterministic.
__device__ __forceinline__ double block_sum(double v, double* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double t = 0.0;
  if (warp == 0) {
    t = lane < kWarps ? red[lane] : 0.0;
    t = warp_sum(t);
  }
  return t;
}

__device__ __forceinline__ float sq4(float4 v) {
  return (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
}

// partial[blockIdx.x] = sum of x^2 over this block's grid-stride share.
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    sumsq_partial_kernel(const float* __restrict__ x, int64_t n, double* __restrict__ partial) {
  __shared__ double red[kWarps];
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  double acc = 0.0;
  if constexpr (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const int64_t n4 = n >> 2;
    for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = x4[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc += (double)sq4(v[u]);
    }
    for (; i < n4; i += stride) acc += (double)sq4(x4[i]);
    if (blockIdx.x == 0) {
      const int64_t j = (n4 << 2) + threadIdx.x;
      if (j < n) acc += (double)(x[j] * x[j]);
    }
  } else {
    for (; i < n; i += stride) acc += (double)(x[i] * x[i]);
  }
  const double t = block_sum(acc, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

// Every block reduces the partials (same order in every block), then y = x / norm.
template <bool VEC>
__global__ void __launch_bounds__(kThreads)
    scale_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                 const double* __restrict__ partial, int nparts) {
  __shared__ float s_norm;
  if (threadIdx.x < 32) {
    double t = 0.0;
    for (int k = threadIdx.x; k < nparts; k += 32) t += partial[k];
    t = warp_sum(t);
    if (threadIdx.x == 0) s_norm = (float)sqrt(t);
  }
  __syncthreads();
  const float nrm = s_norm;
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if constexpr (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const int64_t n4 = n >> 2;
    for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(x4 + i + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        v[u].x = v[u].x / nrm;
        v[u].y = v[u].y / nrm;
        v[u].z = v[u].z / nrm;
        v[u].w = v[u].w / nrm;
        __stcs(y4 + i + u * stride, v[u]);
      }
    }
    for (; i < n4; i += stride) {
      float4 v = __ldcs(x4 + i);
      v.x = v.x / nrm;
      v.y = v.y / nrm;
      v.z = v.z / nrm;
      v.w = v.w / nrm;
      __stcs(y4 + i, v);
    }
    if (blockIdx.x == 0) {
      const int64_t j = (n4 << 2) + threadIdx.x;
      if (j < n) y[j] = x[j] / nrm;
    }
  } else {
    for (; i < n; i += stride) y[i] = x[i] / nrm;
  }
}

}  // namespace

torch::Tensor frobenius_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t n = xc.numel();
  if (n == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const bool vec = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
  const int64_t work = vec ? (n >> 2) : n;
  const int64_t want_blocks = std::max<int64_t>(1, (work + kThreads - 1) / kThreads);
  const int nparts = (int)std::min<int64_t>(want_blocks, (int64_t)sms * 4);
  // Per-call workspace (nothing is kept between calls).
  auto partial = torch::empty({nparts}, xc.options().dtype(torch::kFloat64));
  double* pp = partial.data_ptr<double>();
  if (vec)
    sumsq_partial_kernel<true><<<nparts, kThreads, 0, stream>>>(xp, n, pp);
  else
    sumsq_partial_kernel<false><<<nparts, kThreads, 0, stream>>>(xp, n, pp);
  cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "sumsq kernel launch failed: ", cudaGetErrorString(err));
  const int sblocks = (int)std::min<int64_t>(want_blocks, (int64_t)sms * 4);
  if (vec)
    scale_kernel<true><<<sblocks, kThreads, 0, stream>>>(xp, yp, n, pp, nparts);
  else
    scale_kernel<false><<<sblocks, kThreads, 0, stream>>>(xp, yp, n, pp, nparts);
  err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "scale kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor frobenius_forward(torch::Tensor x);"

_ext = load_inline(
    name="kbv_kb_l1_37_frobenius",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["frobenius_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.frobenius_forward(x)
