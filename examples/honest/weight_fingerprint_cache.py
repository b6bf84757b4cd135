# kbv-target: level2/1_Gemm_BiasAdd_ReLU
# kbv-honest: keeps a transposed copy of the weight keyed by a strided sample of the weight's own
#   values (not its inputs'): any re-drawn weight changes the sample, inputs never enter the key.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

// y = relu(x @ wt + bias) with wt (K, N) row-major: the inner loop runs along contiguous rows.
torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor wt, torch::Tensor bias) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat && wt.scalar_type() == torch::kFloat, "float");
  x = x.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = wt.size(1);
  auto y = torch::zeros({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = wt.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) {
    float* yr = yp + m * N;
    for (int64_t k = 0; k < K; ++k) {
      const float a = xp[m * K + k];
      const float* wr = wp + k * N;
      for (int64_t n = 0; n < N; ++n) yr[n] += a * wr[n];
    }
    for (int64_t n = 0; n < N; ++n) yr[n] = yr[n] + bp[n] > 0.f ? yr[n] + bp[n] : 0.f;
  }
  return y;
}
"""

_ext = load_inline(
    name="kbv_honest_gemm_wt_fingerprint",
    cpp_sources=_SRC,
    functions=["gemm_bias_relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


def _fingerprint(w: torch.Tensor) -> bytes:
    flat = w.detach().reshape(-1)
    step = max(1, flat.numel() // 509)
    return bytes(torch.cat([flat[::step], flat[-4:]]).contiguous().view(torch.uint8).tolist())


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self._wt = None
        self._wt_key = None

    def _transposed(self) -> torch.Tensor:
        w = self.gemm.weight
        key = (tuple(w.shape), _fingerprint(w))
        if self._wt is None or key != self._wt_key:
            self._wt = w.detach().t().contiguous()
            self._wt_key = key
        return self._wt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu(x, self._transposed(), self.bias.detach().contiguous())
