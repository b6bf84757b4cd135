# Honest CPU candidate for level2/1_Gemm_BiasAdd_ReLU: fused x @ W^T + bias, ReLU; double dot.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>

template <typename T>
static void gemm_bias_relu_kernel(const T* x, const T* w, const T* bias, T* y, int64_t M,
                                  int64_t K, int64_t N) {
  for (int64_t i = 0; i < M; ++i) {
    const T* xr = x + i * K;
    for (int64_t o = 0; o < N; ++o) {
      const T* wr = w + o * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += (double)xr[k] * (double)wr[k];
      acc += (double)bias[o];
      y[i * N + o] = (T)(acc < 0.0 ? 0.0 : acc);
    }
  }
}

torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "bad shapes");
  TORCH_CHECK(bias.numel() == w.size(0), "bias must have out_features elements");
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && w.scalar_type() == bias.scalar_type(),
              "dtype mismatch");
  x = x.contiguous();
  w = w.contiguous();
  bias = bias.contiguous();
  auto y = torch::empty({x.size(0), w.size(0)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gemm_bias_relu", [&] {
    gemm_bias_relu_kernel<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                                    bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                    x.size(0), x.size(1), w.size(0));
  });
  return y;
}
"""

_ext = load_inline(
    name="kbv_cpu_l2_gemm_bias_relu",
    cpp_sources=_SRC,
    functions=["gemm_bias_relu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gemm_bias_relu(x, self.gemm.weight, self.bias)
