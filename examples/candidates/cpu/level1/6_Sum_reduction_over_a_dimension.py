# Honest CPU candidate for level1/6_Sum_reduction_over_a_dimension: loop sum in double, keepdim.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <vector>

template <typename T>
static void sum_kernel(const T* x, T* y, int64_t outer, int64_t R, int64_t inner) {
  std::vector<double> acc(inner);
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t r = 0; r < R; ++r) {
      const T* xp = x + (o * R + r) * inner;
      for (int64_t i = 0; i < inner; ++i) acc[i] += (double)xp[i];
    }
    for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = (T)acc[i];
  }
}

torch::Tensor sum_dim(torch::Tensor x, int64_t dim) {
  TORCH_CHECK(x.dim() > 0, "expected at least 1-D input");
  if (dim < 0) dim += x.dim();
  TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
  x = x.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  auto sizes = x.sizes().vec();
  sizes[dim] = 1;
  auto y = torch::empty(sizes, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "sum_dim", [&] {
    sum_kernel<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), outer, x.size(dim),
                         inner);
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l1_sum_dim",
    cpp_sources=_SRC,
    functions=["sum_dim"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim(x, self.dim)
