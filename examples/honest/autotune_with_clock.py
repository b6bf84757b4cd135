# kbv-target: level1/3_ReLU
# kbv-honest: autotunes at the first call of each shape: times two loop variants with its own
#   std::chrono clock (reads a clock, never touches one) and keeps the faster.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <chrono>

static void relu_plain(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i];
}

static void relu_unrolled(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    y[i] = x[i] < 0.f ? 0.f : x[i];
    y[i + 1] = x[i + 1] < 0.f ? 0.f : x[i + 1];
    y[i + 2] = x[i + 2] < 0.f ? 0.f : x[i + 2];
    y[i + 3] = x[i + 3] < 0.f ? 0.f : x[i + 3];
  }
  for (; i < n; ++i) y[i] = x[i] < 0.f ? 0.f : x[i];
}

// Which variant is faster on this input's size: 0 plain, 1 unrolled (best of three each).
int64_t pick_variant(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  double best[2] = {1e30, 1e30};
  for (int rep = 0; rep < 3; ++rep) {
    for (int v = 0; v < 2; ++v) {
      const auto start = std::chrono::steady_clock::now();
      (v == 0 ? relu_plain : relu_unrolled)(xp, yp, x.numel());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                           .count();
      if (s < best[v]) best[v] = s;
    }
  }
  return best[1] < best[0] ? 1 : 0;
}

torch::Tensor relu(torch::Tensor x, int64_t variant) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  (variant == 1 ? relu_unrolled : relu_plain)(x.data_ptr<float>(), y.data_ptr<float>(),
                                              x.numel());
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_autotune_relu",
    cpp_sources=_SRC,
    functions=["pick_variant", "relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.variant = {}  # shape -> the faster loop

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        if key not in self.variant:
            self.variant[key] = _ext.pick_variant(x)
        return _ext.relu(x, self.variant[key])
