# kbv-target: level1/3_ReLU
# kbv-honest: writes a generated source beside its build cache (only when it changed, so a warm
#   cache builds nothing) and a helper module into its temporary folder, builds one extension from
#   the written file (torch.utils.cpp_extension.load) and one inline, and imports the helper:
#   files of its own, two libraries, none touched after loading.
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


def _write_if_changed(path: str, text: str) -> None:
    try:
        with open(path) as handle:
            if handle.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as handle:
        handle.write(text)


_sources = os.path.join(
    os.environ.get("TORCH_EXTENSIONS_DIR", tempfile.gettempdir()), "kbv_honest_generated"
)
os.makedirs(_sources, exist_ok=True)
_source = os.path.join(_sources, "relu_from_file.cpp")
_write_if_changed(_source, _RELU)
_helpers = os.path.join(tempfile.gettempdir(), "kbv_honest_helpers")
os.makedirs(_helpers, exist_ok=True)
_write_if_changed(os.path.join(_helpers, "kbv_honest_helper.py"), _HELPER)
sys.path.insert(0, _helpers)
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
