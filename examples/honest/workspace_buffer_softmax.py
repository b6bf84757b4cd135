# kbv-target: level1/4_Softmax
# kbv-honest: caches a per-row workspace (keyed by shape only) that every call overwrites fully.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

// ws: (rows, 2) workspace, overwritten: [max, 1/sum] per row.
torch::Tensor softmax_ws(torch::Tensor x, torch::Tensor ws) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat, "2-D float input");
  x = x.contiguous();
  const int64_t rows = x.size(0), n = x.size(1);
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* wsp = ws.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = std::fmax(m, xp[r * n + j]);
    double s = 0.0;
    for (int64_t j = 0; j < n; ++j) s += std::exp((double)xp[r * n + j] - m);
    wsp[2 * r] = m;
    wsp[2 * r + 1] = (float)(1.0 / s);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      yp[r * n + j] = std::exp(xp[r * n + j] - wsp[2 * r]) * wsp[2 * r + 1];
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_softmax_ws",
    cpp_sources=_SRC,
    functions=["softmax_ws"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ws = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if rows not in self._ws:
            self._ws[rows] = torch.empty(rows, 2, dtype=torch.float32, device=x.device)
        return _ext.softmax_ws(x, self._ws[rows])
