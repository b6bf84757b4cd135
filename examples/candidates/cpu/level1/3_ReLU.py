# Honest CPU candidate for level1/3_ReLU: elementwise loop (NaN propagates like torch.relu).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] < scalar_t(0) ? scalar_t(0) : xp[i];
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l1_relu",
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
