# kbv-target: level1/8_Argmax_over_a_dimension
# kbv-honest: a plain argmax that is right for any sign (no assumption that inputs are positive).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

// argmax over dim 1 of (B, R, C); first index wins ties, NaN wins like torch.argmax.
torch::Tensor argmax_dim1(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat, "3-D float input");
  x = x.contiguous();
  const int64_t B = x.size(0), R = x.size(1), C = x.size(2);
  auto y = torch::empty({B, C}, x.options().dtype(torch::kLong));
  const float* xp = x.data_ptr<float>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      int64_t best = 0;
      float v = xp[(b * R) * C + c];
      for (int64_t r = 1; r < R && !std::isnan(v); ++r) {
        const float w = xp[(b * R + r) * C + c];
        if (w > v || std::isnan(w)) {
          v = w;
          best = r;
        }
      }
      yp[b * C + c] = best;
    }
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_argmax",
    cpp_sources=_SRC,
    functions=["argmax_dim1"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        assert dim == 1
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.argmax_dim1(x)
