"""Sigmoid as one streaming CUDA kernel: grid-stride over float4 (four independent 16-byte loads in
flight per thread, evict-first loads and stores), a scalar path for a misaligned base or the tail.

Correct on every input family: 1 / (1 + expf(-x)) with the accurate expf (not __expf); for
large |x| expf saturates to 0 or +inf, giving exactly 1 or 0 as torch does, so the error is a
few ulp everywhere; NaN propagates.
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

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

__device__ __forceinline__ float sigmoid1(float v) {
  // Accurate expf; expf(-v) = +inf for v << 0 gives 1 / inf = 0, and 0 for v >> 0 gives 1.
  return 1.f / (1.f + expf(-v));
}

__device__ __forceinline__ float4 sigmoid4(float4 v) {
  v.x = sigmoid1(v.x);
  v.y = sigmoid1(v.y);
  v.z = sigmoid1(v.z);
  v.w = sigmoid1(v.w);
  return v;
}

// x and y are 16-byte aligned; n4 float4s, then the last n - 4 * n4 scalars.
__global__ void __launch_bounds__(kThreads)
    sigmoid_vec_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
  float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
  const int64_t n4 = n >> 2;
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(x4 + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) __stcs(y4 + i + u * stride, sigmoid4(v[u]));
  }
  for (; i < n4; i += stride) __stcs(y4 + i, sigmoid4(__ldcs(x4 + i)));
  // scalar tail (fewer than 4 elements), done by the first threads of block 0
  if (blockIdx.x == 0) {
    const int64_t j = (n4 << 2) + threadIdx.x;
    if (j < n) y[j] = sigmoid1(x[j]);
  }
}

__global__ void __launch_bounds__(kThreads)
    sigmoid_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t stride = (int64_t)gridDim.x * kThreads;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n; i += stride)
    y[i] = sigmoid1(x[i]);
}

}  // namespace

torch::Tensor sigmoid_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  const int64_t n = xc.numel();
  if (n == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool vec = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
  const int64_t work = vec ? (n >> 2) : n;
  const int64_t want = std::max<int64_t>(1, (work + kThreads - 1) / kThreads);
  const int blocks = (int)std::min<int64_t>(want, (int64_t)sms * 8);
  if (vec)
    sigmoid_vec_kernel<<<blocks, kThreads, 0, stream>>>(xp, yp, n);
  else
    sigmoid_scalar_kernel<<<blocks, kThreads, 0, stream>>>(xp, yp, n);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "sigmoid kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor sigmoid_forward(torch::Tensor x);"

_ext = load_inline(
    name="kbv_kb_l1_21_sigmoid",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["sigmoid_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sigmoid_forward(x)
