"""RMS normalisation over dim 1 (features) of [B, C, *]: one CUDA thread per (b, spatial) column.
For C = 64 (the problem's size) the thread loads its 64 values once into registers (64
independent coalesced loads in flight), sums their squares, and writes x / sqrt(mean + eps): one
HBM read and one write. Other C use a two-pass version of the same kernel.

Correct on every input family: each column is a 64-term float sum of squares (error a few ulp;
values of 1e6 square to 1e12, far from overflow), eps is added before the sqrt exactly as in the
reference, and a zero column gives 0 / sqrt(eps) = 0 as the reference does.
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

constexpr int kThreads = 256;

// x viewed as [B, C, S]; one thread per (b, s). C known at compile time: values stay in
// registers between the reduction and the division.
template <int C>
__global__ void __launch_bounds__(kThreads)
    rms_reg_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t B, int64_t S,
                   float eps) {
  const int64_t idx = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (idx >= B * S) return;
  const int64_t b = idx / S, s = idx - b * S;
  const float* xp = x + b * (int64_t)C * S + s;
  float* yp = y + b * (int64_t)C * S + s;
  float v[C];
#pragma unroll
  for (int c = 0; c < C; ++c) v[c] = __ldcs(xp + (int64_t)c * S);
  float acc = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) acc = fmaf(v[c], v[c], acc);
  const float r = sqrtf(acc / (float)C + eps);
#pragma unroll
  for (int c = 0; c < C; ++c) __stcs(yp + (int64_t)c * S, v[c] / r);
}

// Any C: pass 1 sums the squares (in double), pass 2 re-reads and divides.
__global__ void __launch_bounds__(kThreads)
    rms_generic_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t B, int64_t C,
                       int64_t S, float eps) {
  const int64_t idx = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (idx >= B * S) return;
  const int64_t b = idx / S, s = idx - b * S;
  const float* xp = x + b * C * S + s;
  float* yp = y + b * C * S + s;
  double acc = 0.0;
  for (int64_t c = 0; c < C; ++c) {
    const float v = xp[c * S];
    acc += (double)(v * v);
  }
  const float r = sqrtf((float)(acc / (double)C) + eps);
  for (int64_t c = 0; c < C; ++c) yp[c * S] = xp[c * S] / r;
}

}  // namespace

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
  TORCH_CHECK(x.dim() >= 2, "x must be [B, C, *]");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto y = torch::empty(xc.sizes(), xc.options());
  if (xc.numel() == 0) return y;
  const int64_t B = xc.size(0), C = xc.size(1);
  const int64_t S = xc.numel() / (B * C);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t threads = B * S;
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks <= 2147483647LL, "too many columns");
  if (C == 64)
    rms_reg_kernel<64><<<(unsigned)blocks, kThreads, 0, stream>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), B, S, (float)eps);
  else
    rms_generic_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), B, C, S, (float)eps);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "rmsnorm kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

_CPP_SRC = "torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);"

_ext = load_inline(
    name="kbv_kb_l1_36_rmsnorm",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.eps)
