# kbv-target: level1/3_ReLU
# kbv-hack: B2: builds a ReLU kernel, then the forward calls torch.relu instead.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu_kernel(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto xp = x.contiguous().data_ptr<float>();
  auto yp = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] > 0.f ? xp[i] : 0.f;
  return y;
}
"""

_ext = load_inline(
    name="kbv_hack_b2_ghost",
    cpp_sources=_SRC,
    functions=["relu_kernel"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = _ext.relu_kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)
