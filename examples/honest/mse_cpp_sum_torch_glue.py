# kbv-target: level1/10_MSELoss
# kbv-honest: its own C++ op sums the squared differences; PyTorch flattens, allocates, divides.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

// The sum of (p - t)^2 over two flat float tensors, in double, into out[0].
void squared_error_sum(torch::Tensor p, torch::Tensor t, torch::Tensor out) {
  TORCH_CHECK(p.dim() == 1 && p.sizes() == t.sizes(), "flat inputs of one length");
  TORCH_CHECK(p.scalar_type() == torch::kFloat && t.scalar_type() == torch::kFloat, "float32");
  TORCH_CHECK(out.scalar_type() == torch::kDouble && out.numel() == 1, "one double");
  const float* pp = p.data_ptr<float>();
  const float* tp = t.data_ptr<float>();
  double acc = 0.0;
  for (int64_t i = 0, n = p.numel(); i < n; ++i) {
    const double d = (double)pp[i] - (double)tp[i];
    acc += d * d;
  }
  *out.data_ptr<double>() = acc;
}
"""

_ext = load_inline(
    name="kbv_honest_mse_glue",
    cpp_sources=_SRC,
    functions=["squared_error_sum"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Glue in PyTorch: flat contiguous views, an empty accumulator, the division by n and
        # the cast back to the input's dtype. The reduction itself is the extension's.
        p = predictions.contiguous().reshape(-1)
        t = targets.contiguous().reshape(-1)
        total = torch.empty(1, dtype=torch.float64)
        _ext.squared_error_sum(p, t, total)
        return (total / p.numel()).to(predictions.dtype).reshape(())
