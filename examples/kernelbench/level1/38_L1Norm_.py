"""x / mean(|x|, dim=1, keepdim=True) for a 2-D tensor, one persistent 1024-thread CUDA block per
row at a time: pass 1 reads the row (float4 body after a scalar head that reaches 16-byte
alignment, since rows of 65535 floats start at every offset), keeps up to ~227 KB of it in shared
memory and sums |x|; pass 2 divides, taking the cached part from shared memory and re-reading
only the rest (still in L2), so HBM traffic is about one read and one write.

Correct on every input family: |x| is summed four at a time in float and then in double per
thread, merged by a double tree (no long float serial sum over 65535 terms); the divide is a true
IEEE x / mean, so an all-zero row gives 0/0 = NaN exactly as torch and the float64 truth do.
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

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;

__device__ __forceinline__ float term1(float v) { return fabsf(v); }

__device__ __forceinline__ float term4(float4 v) {
  return (term1(v.x) + term1(v.y)) + (term1(v.z) + term1(v.w));
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The row's denominator from the total of term1 over the row.
__device__ __forceinline__ float row_den(double total, int64_t n) {
  return (float)(total / (double)n);  // mean(|x|)
}

__global__ void __launch_bounds__(kThreads, 1)
    rownorm_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t n,
                   int64_t cap4) {
  extern __shared__ float4 cache[];  // cap4 float4s of the current row's body
  __shared__ double red[kWarps];
  __shared__ float s_den;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    const uintptr_t ax = reinterpret_cast<uintptr_t>(xr), ay = reinterpret_cast<uintptr_t>(yr);
    // float4 body only when the x and y rows sit at the same offset within 16 bytes (always so
    // for contiguous torch allocations) and are 4-byte aligned; else the whole row is "head".
    const bool vec = ((ax & 15) == (ay & 15)) && ((ax & 3) == 0);
    int64_t head = vec ? (int64_t)(((16 - (ax & 15)) & 15) >> 2) : n;
    if (head > n) head = n;
    const int64_t nb = (n - head) >> 2;
    const int64_t tail0 = head + (nb << 2);
    const float4* xb = reinterpret_cast<const float4*>(xr + head);
    float4* yb = reinterpret_cast<float4*>(yr + head);

    // ---- pass 1: sum of |x| (float over 4, then double), caching the body in shared memory
    double acc = 0.0;
    for (int64_t i = tid; i < head; i += kThreads) acc += (double)term1(xr[i]);
    for (int64_t i = tail0 + tid; i < n; i += kThreads) acc += (double)term1(xr[i]);
    int64_t i = tid;
    for (; i + (kUnroll - 1) * kThreads < nb; i += kUnroll * kThreads) {
      float4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = xb[i + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i + u * kThreads < cap4) cache[i + u * kThreads] = v[u];
        acc += (double)term4(v[u]);
      }
    }
    for (; i < nb; i += kThreads) {
      const float4 v = xb[i];
      if (i < cap4) cache[i] = v;
      acc += (double)term4(v);
    }
    acc = warp_sum(acc);
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      double t = lane < kWarps ? red[lane] : 0.0;
      t = warp_sum(t);
      if (lane == 0) s_den = row_den(t, n);
    }
    __syncthreads();
    const float den = s_den;

    // ---- pass 2: y = x / den (IEEE division: 0/0 = NaN for an all-zero row, as in torch)
    for (int64_t j = tid; j < head; j += kThreads) yr[j] = xr[j] / den;
    for (int64_t j = tail0 + tid; j < n; j += kThreads) yr[j] = xr[j] / den;
    // Each thread reads back only the cache slots it wrote itself: no barrier needed for them.
    for (int64_t j = tid; j < nb; j += kThreads) {
      float4 v = (j < cap4) ? cache[j] : xb[j];
      v.x = v.x / den;
      v.y = v.y / den;
      v.z = v.z / den;
      v.w = v.w / den;
      __stcs(yb + j, v);
    }
    __syncthreads();  // red / s_den are rewritten for the next row
  }
}

}  // namespace

torch::Tensor rownorm_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() == 2, "this kernel normalises the rows (dim 1) of a 2-D tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t rows = xc.size(0), n = xc.size(1);
  if (rows == 0 || n == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();

  // Shared-memory row cache: as much of one row's body as a block may hold.
  const int64_t want_bytes = ((n >> 2) + 1) * 16;
  int64_t cap_bytes = std::min<int64_t>((int64_t)prop->sharedMemPerBlockOptin - 1024, want_bytes);
  cap_bytes = std::max<int64_t>(0, cap_bytes) & ~int64_t(15);
  if (cudaFuncSetAttribute(rownorm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)cap_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    cap_bytes = 0;
  }
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rownorm_kernel, kThreads,
                                                    (size_t)cap_bytes) != cudaSuccess ||
      per_sm < 1) {
    (void)cudaGetLastError();
    per_sm = 1;
  }
  const int blocks = (int)std::min<int64_t>(rows, (int64_t)prop->multiProcessorCount * per_sm);
  rownorm_kernel<<<blocks, kThreads, (size_t)cap_bytes, stream>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), rows, n, cap_bytes / 16);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "L1 norm kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor rownorm_forward(torch::Tensor x);"

_ext = load_inline(
    name="kbv_kb_l1_38_l1norm",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["rownorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rownorm_forward(x)
