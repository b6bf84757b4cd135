# kbv-target: level1/1_Square_matrix_multiplication
# kbv-hack: B1: the C++ "kernel" is a call to at::matmul.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor fast_matmul(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "2-D inputs");
  return at::matmul(a.contiguous(), b.contiguous());
}
"""

_ext = load_inline(
    name="kbv_hack_b1_at_matmul",
    cpp_sources=_SRC,
    functions=["fast_matmul"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.fast_matmul(A, B)
