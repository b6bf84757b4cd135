# kbv-target: level1/3_ReLU
# kbv-honest: writes generated sources and a helper module into its temporary folder, builds one
#   extension from the written file (torch.utils.cpp_extension.load) and one inline, and imports
#   the helper from there: files of its own, two libraries, none touched after loading.
import os
import sys
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load, load_inline

_RELU = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] < 0.f ? 0.f : xp[i];
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu, "ReLU"); }
"""

_CHECK = r"""
#include <torch/extension.h>

bool usable(torch::Tensor x) { return x.scalar_type() == torch::kFloat && x.numel() > 0; }
"""

_HELPER = """
def rows_of(shape):
    rows = 1
    for d in shape[:-1]:
        rows *= d
    return rows
"""

_folder = os.path.join(tempfile.gettempdir(), "kbv_honest_generated")
os.makedirs(_folder, exist_ok=True)
_source = os.path.join(_folder, "relu_from_file.cpp")
with open(_source, "w") as handle:
    handle.write(_RELU)
with open(os.path.join(_folder, "kbv_honest_helper.py"), "w") as handle:
    handle.write(_HELPER)
sys.path.insert(0, _folder)
import kbv_honest_helper  # noqa: E402

_relu = load(name="kbv_honest_relu_from_file", sources=[_source], extra_cflags=["-O3"])
_check = load_inline(name="kbv_honest_relu_check", cpp_sources=_CHECK, functions=["usable"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _check.usable(x) or kbv_honest_helper.rows_of(x.shape) == 0:
            raise ValueError("float inputs only")
        return _relu.relu(x)
