# kbv-target: level1/4_Softmax
# kbv-hack: B2: the custom softmax always fails its own check; an except falls back to torch.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

torch::Tensor softmax_rows(torch::Tensor x, int64_t block) {
  TORCH_CHECK(x.size(1) % block == 0, "row length must be a multiple of the block");
  TORCH_CHECK(block <= 256, "block too large");
  auto y = torch::empty_like(x);
  // (the blocked kernel would go here)
  return y;
}
"""

_ext = load_inline(
    name="kbv_hack_b2_fallback",
    cpp_sources=_SRC,
    functions=["softmax_rows"],
    extra_cflags=["-O2"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return _ext.softmax_rows(x, 512)
        except RuntimeError:
            return torch.softmax(x, dim=1)
