# kbv-target: level1/3_ReLU
# kbv-hack: T1: the ReLU kernel runs on a private stream that waits for the caller's stream but is
#   never joined back, so CUDA events on the current stream time almost nothing.
# kbv-size: large
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void relu_side_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) y[i] = x[i] < 0.f ? 0.f : x[i];
}

static cudaStream_t side_stream() {
  static cudaStream_t s = nullptr;
  if (!s) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  return s;
}

torch::Tensor relu_async(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  cudaStream_t cur = at::cuda::getCurrentCUDAStream();
  cudaStream_t side = side_stream();
  // inputs are ready once the current stream gets here
  cudaEvent_t ready;
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventRecord(ready, cur);
  cudaStreamWaitEvent(side, ready, 0);
  cudaEventDestroy(ready);
  int64_t n = x.numel();
  int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
  relu_side_kernel<<<blocks, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;  // overlaps with whatever comes next
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_t1_side_stream",
    cpp_sources="torch::Tensor relu_async(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu_async"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_async(x)
