# Honest CUDA candidate for level1/10_MSELoss: one streaming pass (float4 loads where both inputs
# are 16-byte aligned), squared differences accumulated in double per thread, one partial per
# block, and a second kernel that adds the partials in a fixed order (deterministic) and writes
# the mean.
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

inline void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

__device__ __forceinline__ double sq(float a, float b) {
  const double d = (double)a - (double)b;
  return d * d;
}

// Block-wide sum of one double per thread; the result is valid in thread 0.
__device__ __forceinline__ double block_sum(double v, double* sh) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.0;
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

__global__ void __launch_bounds__(kThreads)
    mse_partial_kernel(const float* __restrict__ p, const float* __restrict__ t,
                       double* __restrict__ partial, int64_t n, bool vec4) {
  __shared__ double sh[kThreads / 32];
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  double acc = 0.0;
  int64_t tail = 0;
  if (vec4) {
    const int64_t n4 = n / 4;
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    for (int64_t i = start; i < n4; i += stride) {
      const float4 a = __ldcs(p4 + i);
      const float4 b = __ldcs(t4 + i);
      acc += sq(a.x, b.x) + sq(a.y, b.y) + sq(a.z, b.z) + sq(a.w, b.w);
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + start; i < n; i += stride) acc += sq(p[i], t[i]);
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads)
    mse_finish_kernel(const double* __restrict__ partial, int blocks, float* __restrict__ y,
                      int64_t n) {
  __shared__ double sh[kThreads / 32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) *y = n > 0 ? (float)(acc / (double)n) : __int_as_float(0x7fc00000);
}

}  // namespace

torch::Tensor mse(torch::Tensor p, torch::Tensor t) {
  TORCH_CHECK(p.is_cuda() && t.is_cuda(), "mse: inputs must be CUDA tensors");
  TORCH_CHECK(p.scalar_type() == torch::kFloat32 && t.scalar_type() == torch::kFloat32,
              "mse: inputs must be float32");
  TORCH_CHECK(p.sizes() == t.sizes(), "mse: predictions and targets differ in shape");
  const c10::cuda::CUDAGuard guard(p.device());
  auto pc = p.contiguous();
  auto tc = t.contiguous();
  const int64_t n = pc.numel();
  auto y = torch::empty({}, pc.options());
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t wanted = (n / 4 + kThreads - 1) / kThreads;
  const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>(wanted, 4LL * sms));
  auto partial = torch::empty({blocks}, pc.options().dtype(torch::kFloat64));
  const bool vec4 = (reinterpret_cast<uintptr_t>(pc.data_ptr<float>()) % 16 == 0) &&
                    (reinterpret_cast<uintptr_t>(tc.data_ptr<float>()) % 16 == 0);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  mse_partial_kernel<<<blocks, kThreads, 0, stream>>>(pc.data_ptr<float>(), tc.data_ptr<float>(),
                                                      partial.data_ptr<double>(), n, vec4);
  check_launch("mse_partial_kernel");
  mse_finish_kernel<<<1, kThreads, 0, stream>>>(partial.data_ptr<double>(), blocks,
                                                y.data_ptr<float>(), n);
  check_launch("mse_finish_kernel");
  return y;
}
"""

_CPP_SRC = r"""
torch::Tensor mse(torch::Tensor p, torch::Tensor t);
"""

_ext = load_inline(
    name="kbv_cuda_l1_mse",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["mse"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.mse(predictions, targets)
