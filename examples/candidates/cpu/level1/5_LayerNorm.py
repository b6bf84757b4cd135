# Honest CPU candidate for level1/5_LayerNorm: two-pass mean/variance in double, module eps.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

template <typename T>
static void layernorm_kernel(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t D,
                             double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    double mean = 0.0;
    for (int64_t j = 0; j < D; ++j) mean += (double)xr[j];
    mean /= (double)D;
    double var = 0.0;
    for (int64_t j = 0; j < D; ++j) {
      const double d = (double)xr[j] - mean;
      var += d * d;
    }
    var /= (double)D;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < D; ++j)
      yr[j] = (T)(((double)xr[j] - mean) * rstd * (double)w[j] + (double)b[j]);
  }
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && w.scalar_type() == b.scalar_type(),
              "dtype mismatch");
  x = x.contiguous();
  w = w.contiguous();
  b = b.contiguous();
  const int64_t D = w.numel();
  TORCH_CHECK(D > 0 && b.numel() == D && x.numel() % D == 0, "bad shapes");
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "layernorm", [&] {
    layernorm_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                               b.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel() / D, D,
                               eps);
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l1_layernorm",
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
        nd = len(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - nd :]) != tuple(self.ln.normalized_shape):
            raise ValueError("input does not end with normalized_shape")
        return _ext.layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
