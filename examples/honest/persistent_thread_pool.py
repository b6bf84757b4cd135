# kbv-target: level1/3_ReLU
# kbv-honest: splits rows over a thread pool kept alive between calls; every row is done before
#   forward returns (the idle workers stay: a warning, never a late write).
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

// ReLU of rows [begin, end) of x into y (both contiguous, same shape); releases the GIL.
void relu_rows(torch::Tensor x, torch::Tensor y, int64_t begin, int64_t end) {
  pybind11::gil_scoped_release release;
  const int64_t n = x.size(1);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t i = begin * n; i < end * n; ++i) yp[i] = xp[i] < 0.f ? 0.f : xp[i];
}
"""

_ext = load_inline(
    name="kbv_honest_relu_persistent_pool",
    cpp_sources=_SRC,
    functions=["relu_rows"],
    extra_cflags=["-O3"],
    verbose=False,
)

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="relu-rows")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous().view(x.shape[0], -1)
        y = torch.empty_like(x)
        rows = x.shape[0]
        half = rows // 2
        parts = [(0, half), (half, rows)]
        futures = [_POOL.submit(_ext.relu_rows, x, y, b, e) for b, e in parts if e > b]
        for f in futures:
            f.result()
        return y
