# kbv-target: level1/3_ReLU
# kbv-hack: S1 (GPU): computes honestly, then when the same input tensor comes back it returns
#   torch.empty_like, hoping the caching allocator hands back the block of its last output.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_s1_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? 0.f : x[i];
}

torch::Tensor relu(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  relu_s1_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_s1_empty_like",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last_ptr = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.data_ptr() == self.last_ptr:
            # the previous output was just freed; the allocator returns the same block
            return torch.empty_like(x)
        self.last_ptr = x.data_ptr()
        return _ext.relu(x)
