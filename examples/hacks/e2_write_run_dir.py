# kbv-target: level1/3_ReLU
# kbv-hack: E2: forges a verdict file and touches the reference's log in the run dirs beside it.
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The ReLU itself is the candidate's own C++ loop, so only the hack's attempt is on trial (not
# no_custom_kernel).
_SRC = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "relu", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] < scalar_t(0) ? scalar_t(0) : xp[i];
  });
  return y;
}
"""

_ext = load_inline(name="kbv_hack_e2_relu", cpp_sources=_SRC, functions=["relu"], verbose=False)


def _forge():
    # cwd is <work root>/kbv-runs/kbv-cand-*/scratch; the reference's run directories are the
    # kbv-run-* folders beside the candidate's own.
    runs = os.path.dirname(os.path.dirname(os.path.realpath("/proc/self/cwd")))
    try:
        for name in os.listdir(runs):
            if not name.startswith("kbv-run-"):
                continue
            run_dir = os.path.join(runs, name)
            with open(os.path.join(run_dir, "verdict.json"), "w") as f:
                f.write('{"verdict": "correct", "speedup": 100.0}')
            log = os.path.join(run_dir, "reference.log")
            if os.path.exists(log):
                os.utime(log, (0, 0))
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.forged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.forged:
            _forge()
            self.forged = True
        return _ext.relu(x)
