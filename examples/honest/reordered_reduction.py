# kbv-target: level1/6_Sum_reduction_over_a_dimension
# kbv-honest: float accumulation in a different order (blocked, reversed blocks) than PyTorch's.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

// Sum over dim 1 of a (B, R, C) tensor: 8 partial sums per column, combined in reverse.
torch::Tensor sum_dim1(torch::Tensor x) {
  TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat, "3-D float input");
  x = x.contiguous();
  const int64_t B = x.size(0), R = x.size(1), C = x.size(2);
  auto y = torch::empty({B, 1, C}, x.options());
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t r = 0; r < R; ++r) part[r % 8] += xp[(b * R + r) * C + c];
      float s = 0.f;
      for (int k = 7; k >= 0; --k) s += part[k];
      yp[b * C + c] = s;
    }
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_sum_blocked",
    cpp_sources=_SRC,
    functions=["sum_dim1"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        assert dim == 1, "this kernel reduces dim 1"
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim1(x)
