# kbv-target: level1/3_ReLU
# kbv-honest: shape-specialised: an unrolled path for rows of exactly 1024, a generic one otherwise.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu_1024(torch::Tensor x) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && x.dim() == 2 && x.size(1) == 1024,
              "relu_1024 wants float rows of 1024");
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < x.size(0); ++r) {
    const float* xr = xp + r * 1024;
    float* yr = yp + r * 1024;
    for (int j = 0; j < 1024; j += 4) {
      yr[j] = xr[j] < 0.f ? 0.f : xr[j];
      yr[j + 1] = xr[j + 1] < 0.f ? 0.f : xr[j + 1];
      yr[j + 2] = xr[j + 2] < 0.f ? 0.f : xr[j + 2];
      yr[j + 3] = xr[j + 3] < 0.f ? 0.f : xr[j + 3];
    }
  }
  return y;
}

torch::Tensor relu_any(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu_any", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] < scalar_t(0) ? scalar_t(0) : xp[i];
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_relu_shapes",
    cpp_sources=_SRC,
    functions=["relu_1024", "relu_any"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2 and x.shape[1] == 1024 and x.dtype == torch.float32:
            return _ext.relu_1024(x)
        return _ext.relu_any(x)
