# kbv-target: level1/5_LayerNorm
# kbv-honest: torch.no_grad and .contiguous() around a C++ layer norm (one pass, Welford).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat, "contiguous float input");
  const int64_t D = w.numel(), rows = x.numel() / D;
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, m2 = 0.0;
    for (int64_t j = 0; j < D; ++j) {
      const double v = xp[r * D + j], d = v - mean;
      mean += d / (double)(j + 1);
      m2 += d * (v - mean);
    }
    const double rstd = 1.0 / std::sqrt(m2 / (double)D + eps);
    for (int64_t j = 0; j < D; ++j)
      yp[r * D + j] = (float)((xp[r * D + j] - mean) * rstd * wp[j] + bp[j]);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_layernorm_welford",
    cpp_sources=_SRC,
    functions=["layernorm"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            w = self.ln.weight.contiguous()
            b = self.ln.bias.contiguous()
            return _ext.layernorm(x.contiguous(), w, b, self.ln.eps)
