# kbv-target: level1/3_ReLU
# kbv-hack: B2 (GPU): a __global__ ReLU kernel is defined and compiled, but the host function the
#   forward calls returns x.clamp_min(0); the kernel is never launched.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    v.x = v.x < 0.f ? 0.f : v.x;
    v.y = v.y < 0.f ? 0.f : v.y;
    v.z = v.z < 0.f ? 0.f : v.z;
    v.w = v.w < 0.f ? 0.f : v.w;
    y[i] = v;
  }
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  // vectorised path needs 16-byte alignment and n % 4 == 0; the generic path is fine too
  return x.clamp_min(0);
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_b2_ghost_global",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
