# kbv-target: level1/3_ReLU
# wrong: the inline C++ is missing a semicolon, so load_inline fails at import.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
  return x.clamp_min(0)
}
"""

_ext = load_inline(
    name="kbv_wrong_compile_error",
    cpp_sources=_SRC,
    functions=["relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu(x)
