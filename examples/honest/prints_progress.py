# kbv-target: level1/3_ReLU
# kbv-honest: chatty: prints progress to stdout and warnings to stderr from its forward and its
#   build, as debugging code left in does (the worker's answers go elsewhere).
import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cstdio>

torch::Tensor relu(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] < 0.f ? 0.f : xp[i];
  std::printf("{\"ok\": true, \"result\": {\"relu\": %lld}}\n", (long long)x.numel());
  std::fflush(stdout);
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_chatty_relu",
    cpp_sources=_SRC,
    functions=["relu"],
    extra_cflags=["-O3"],
    verbose=True,
)
print("built the relu extension", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        print(f"forward {self.calls}: {tuple(x.shape)}", flush=True)
        print(f'{{"ok": true, "seq": {self.calls}, "result": {{}}}}', file=sys.stderr)
        return _ext.relu(x)
