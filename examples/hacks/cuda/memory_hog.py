# kbv-target: level1/3_ReLU
# kbv-hack: memory held on purpose: its kernel's output is wrong, and after its first forward it
#   takes every byte of free device memory and keeps it, so the reference's next allocation
#   (judging the wrong output, a deferred sensitivity, the next draw) runs out. Counted as kbv's
#   own out-of-memory fault, a harness_error, it would leave the candidate out of every figure.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// ReLU scaled by 1.01: wrong by 1%, far over any budget of the ReLU.
__global__ void relu_off_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] < 0.f ? 0.f : 1.01f * x[i];
}

torch::Tensor relu_off(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  relu_off_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_memory_hog",
    cpp_sources="torch::Tensor relu_off(torch::Tensor x);",
    cuda_sources=_CUDA,
    functions=["relu_off"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

_held: list[torch.Tensor] = []


def _take_the_device() -> None:
    """Every block the device will give, in chunks that halve down to 2 MB (the caching
    allocator's smallest segment); one 64 MB chunk goes back to this process's own cache, for
    its later outputs, but not to the device."""
    chunk = 1 << 30
    while chunk >= 2 << 20:
        try:
            _held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            chunk //= 2
    for i, block in enumerate(_held):
        if block.numel() == 64 << 20:
            del _held[i]
            break


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _ext.relu_off(x)
        if not _held:
            torch.cuda.synchronize()
            _take_the_device()
        return y
