# kbv-target: level1/3_ReLU
# kbv-honest: the kernel runs on a private stream, joined to the caller's stream by events on the
#   way in and on the way out (the current stream's events cover it).
# kbv-size: large
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void relu_joined_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) y[i] = x[i] < 0.f ? 0.f : x[i];
}

struct Side {
  cudaStream_t stream = nullptr;
  cudaEvent_t in = nullptr, out = nullptr;
  Side() {
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&in, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&out, cudaEventDisableTiming);
  }
};

torch::Tensor relu_joined(torch::Tensor x) {
  static Side side;
  x = x.contiguous();
  auto y = torch::empty_like(x);
  cudaStream_t cur = at::cuda::getCurrentCUDAStream();
  cudaEventRecord(side.in, cur);
  cudaStreamWaitEvent(side.stream, side.in, 0);
  int64_t n = x.numel();
  int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
  relu_joined_kernel<<<blocks, 256, 0, side.stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  cudaEventRecord(side.out, side.stream);
  cudaStreamWaitEvent(cur, side.out, 0);  // the caller's stream waits for the result
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_cuda_side_stream_joined",
    cpp_sources="torch::Tensor relu_joined(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu_joined"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_joined(x)
