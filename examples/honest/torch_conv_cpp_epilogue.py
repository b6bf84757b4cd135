# kbv-target: level2/3_Conv2d_Add_Tanh
# kbv-honest: the convolution through PyTorch, the bias-add + tanh epilogue in a C++ kernel.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor add_tanh(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.dim() == 4 && y.scalar_type() == torch::kFloat, "4-D float input");
  y = y.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(y);
  const int64_t N = y.size(0), C = y.size(1), HW = y.size(2) * y.size(3);
  const float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t base = (n * C + c) * HW;
      for (int64_t i = 0; i < HW; ++i) op[base + i] = std::tanh(yp[base + i] + bp[c]);
    }
  return out;
}
"""

_ext = load_inline(
    name="kbv_honest_conv_epilogue",
    cpp_sources=_SRC,
    functions=["add_tanh"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.add_tanh(F.conv2d(x, self.conv.weight, self.conv.bias), self.bias)
