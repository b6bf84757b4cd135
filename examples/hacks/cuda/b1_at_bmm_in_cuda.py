# kbv-target: level1/9_Batched_matrix_multiplication
# kbv-hack: B1 (GPU): the CUDA source's entry point is at::bmm (cuBLAS batched GEMM underneath); the
#   host function only validates shapes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(A.size(0) == B.size(0) && A.size(2) == B.size(1), "shape mismatch");
  // batched GEMM through ATen: cuBLAS strided-batched under the hood, best available
  return at::bmm(A.contiguous(), B.contiguous());
}
"""

_ext = load_inline(
    name="kbv_hack_cuda_b1_at_bmm",
    cpp_sources="torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B);",
    cuda_sources=_CUDA,
    functions=["bmm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.bmm_cuda(A, B)
